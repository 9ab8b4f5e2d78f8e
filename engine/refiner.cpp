#include "engine/refiner.h"

#include <cfenv>
#include <cmath>
#include <string>

#include "engine/img2img.h"

namespace hipq::engine {

namespace {

bool second_order(SamplerKind k) {
  switch (k) {
    case SamplerKind::kHeun:
    case SamplerKind::kHeunKarras:
    case SamplerKind::kDpm2:
    case SamplerKind::kDpm2Karras:
    case SamplerKind::kDpm2Ancestral:
    case SamplerKind::kDpm2AncestralKarras: return true;
    default: return false;
  }
}

std::string split_words(float switch_at, int steps) {
  return "refiner_switch_at " + spec::format_guidance(switch_at) + " of a " + std::to_string(steps) + "-step schedule";
}

}  // namespace

int discrete_timestep_cutoff(int num_train_timesteps, float switch_at) {
  const double frac = std::stod(spec::format_guidance(switch_at));
  const double t = static_cast<double>(num_train_timesteps);
  // Python's round(): to nearest, ties to even (the default rounding mode).
  const int saved = std::fegetround();
  std::fesetround(FE_TONEAREST);
  const double r = std::nearbyint(t - frac * t);
  std::fesetround(saved);
  return static_cast<int>(r);
}

int base_steps(const Schedule& full, int cutoff) {
  int n = 0;
  for (float t : full.timesteps)
    if (t >= static_cast<float>(cutoff)) ++n;
  return n;
}

int refiner_start_index(const Schedule& full, int cutoff) {
  int n = 0;
  for (float t : full.timesteps)
    if (t < static_cast<float>(cutoff)) ++n;
  if (second_order(full.kind) && n % 2 == 0) ++n;
  const int len = static_cast<int>(full.timesteps.size());
  return len - n > 0 ? len - n : 0;
}

Result<Schedule> schedule_head(const Schedule& full, int cutoff, float switch_at) {
  const int len = static_cast<int>(full.timesteps.size());
  const int k = base_steps(full, cutoff);
  if (full.sigmas.size() != full.timesteps.size() + 1)
    return Status::InvalidArgument("refiner: the schedule has " + std::to_string(full.sigmas.size()) + " sigmas for " +
                                   std::to_string(len) + " timesteps");
  if (k < 1)
    return Status::InvalidArgument(split_words(switch_at, inference_steps(full)) +
                                   " leaves the base no step (every timestep is below the cutoff " +
                                   std::to_string(cutoff) + "); raise refiner_switch_at or the steps");
  if (k >= len)
    return Status::InvalidArgument(split_words(switch_at, inference_steps(full)) +
                                   " leaves the refiner no step (no timestep below the cutoff " +
                                   std::to_string(cutoff) + "); lower refiner_switch_at or raise the steps");
  Schedule head = full;
  head.timesteps.assign(full.timesteps.begin(), full.timesteps.begin() + k);
  head.sigmas.assign(full.sigmas.begin(), full.sigmas.begin() + k + 1);
  head.num_inference_steps = inference_steps(full);
  head.truncated_end = true;
  return head;
}

Result<Schedule> schedule_tail(const Schedule& full, int cutoff, float switch_at) {
  const int t_start = refiner_start_index(full, cutoff);
  if (t_start >= static_cast<int>(full.timesteps.size()))
    return Status::InvalidArgument(split_words(switch_at, inference_steps(full)) +
                                   " leaves the refiner no step (no timestep below the cutoff " +
                                   std::to_string(cutoff) + "); lower refiner_switch_at or raise the steps");
  return cut_schedule(full, t_start);
}

std::vector<float> refiner_time_ids(const spec::GenerationSettings& s, int batch, kernels::DType dtype) {
  std::vector<float> ids;
  for (int b = 0; b < batch; ++b) {
    const bool negative = batch == 2 && b == 0;
    const float score = negative ? s.negative_aesthetic_score : s.aesthetic_score;
    for (float v : {static_cast<float>(s.height), static_cast<float>(s.width), 0.f, 0.f, score})
      ids.push_back(round_to_dtype(v, dtype));
  }
  return ids;
}

}  // namespace hipq::engine
