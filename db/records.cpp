#include "db/records.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>

#include "spec/phases.h"

namespace hipq::db {
namespace {

constexpr std::array<std::pair<BatchState, std::string_view>, 3> kBatchStates = {{
    {BatchState::kActive, "active"}, {BatchState::kDone, "done"}, {BatchState::kCancelled, "cancelled"}}};
constexpr std::array<std::pair<JobState, std::string_view>, 6> kJobStates = {{{JobState::kQueued, "queued"},
                                                                              {JobState::kLeased, "leased"},
                                                                              {JobState::kDone, "done"},
                                                                              {JobState::kFailed, "failed"},
                                                                              {JobState::kDead, "dead"},
                                                                              {JobState::kCancelled, "cancelled"}}};
constexpr std::array<std::pair<AttemptState, std::string_view>, 5> kAttemptStates = {
    {{AttemptState::kRunning, "running"},
     {AttemptState::kDone, "done"},
     {AttemptState::kFailed, "failed"},
     {AttemptState::kExpired, "expired"},
     {AttemptState::kCancelled, "cancelled"}}};

template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [v, n] : table)
    if (v == e) return n;
  return "?";
}

template <typename E, size_t N>
Result<E> parse_of(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view name,
                   std::string_view what) {
  std::string known;
  for (const auto& [v, n] : table) {
    if (n == name) return v;
    known += (known.empty() ? "" : ", ") + std::string(n);
  }
  return Status::InvalidArgument("unknown " + std::string(what) + " '" + std::string(name) + "'; known: " + known);
}

}  // namespace

std::string_view batch_state_name(BatchState s) { return name_of(kBatchStates, s); }
std::string_view job_state_name(JobState s) { return name_of(kJobStates, s); }
std::string_view attempt_state_name(AttemptState s) { return name_of(kAttemptStates, s); }
Result<BatchState> parse_batch_state(std::string_view name) { return parse_of(kBatchStates, name, "batch state"); }
Result<JobState> parse_job_state(std::string_view name) { return parse_of(kJobStates, name, "job state"); }
Result<AttemptState> parse_attempt_state(std::string_view name) {
  return parse_of(kAttemptStates, name, "attempt state");
}

bool is_terminal(JobState s) { return s != JobState::kQueued && s != JobState::kLeased; }

Status for_each_new_job(const NewBatch& batch, const NewJobVisitor& visit) {
  if (batch.job_stream) return batch.job_stream(visit);
  for (const NewJob& job : batch.jobs) HIPQ_RETURN_IF_ERROR(visit(job));
  return Status::Ok();
}

spec::GenerationSettings JobRecord::generation_settings() const {
  spec::GenerationSettings s;
  s.prompt = prompt;
  s.negative_prompt = negative_prompt;
  s.seed = seed;
  s.width = width;
  s.height = height;
  s.steps = steps;
  s.guidance = static_cast<float>(guidance);
  s.sampler = sampler;
  s.precision = precision;
  s.rng = rng;
  s.timestep_spacing = timestep_spacing;
  s.guidance_rescale = static_cast<float>(guidance_rescale);
  s.loras = loras;
  s.init_image = init_image;
  s.strength = static_cast<float>(strength);
  s.refiner = refiner;
  s.refiner_switch_at = static_cast<float>(refiner_switch_at);
  s.aesthetic_score = static_cast<float>(aesthetic_score);
  s.negative_aesthetic_score = static_cast<float>(negative_aesthetic_score);
  s.vae_precision = vae_precision;
  return s;
}

void sort_phase_timings(std::vector<PhaseTimingRecord>& phases) {
  std::stable_sort(phases.begin(), phases.end(), [](const PhaseTimingRecord& a, const PhaseTimingRecord& b) {
    return spec::phase_before(a.phase, b.phase);
  });
}

}  // namespace hipq::db
