#include "worker/sleep_engine.h"

#include <charconv>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "proto/protocol.h"

#include "spec/phases.h"

namespace hipq::worker {

Result<std::chrono::microseconds> SleepEngine::parse_spec(std::string_view spec) {
  auto bad = [&] {
    return Status::InvalidArgument("engine \"" + std::string(spec) +
                                   "\": want sleep:DURATION with a unit, e.g. sleep:20ms, sleep:1.5s, sleep:0");
  };
  if (spec == "sleep") return std::chrono::microseconds(0);
  if (spec.rfind("sleep:", 0) != 0) return bad();
  std::string_view v = spec.substr(6);
  double number = 0;
  auto [ptr, ec] = std::from_chars(v.data(), v.data() + v.size(), number);
  if (ec != std::errc() || number < 0) return bad();
  std::string_view unit(ptr, static_cast<size_t>(v.data() + v.size() - ptr));
  double us = 0;
  if (unit == "us") us = number;
  else if (unit == "ms") us = number * 1e3;
  else if (unit == "s") us = number * 1e6;
  else if (unit.empty() && number == 0) us = 0;
  else return bad();
  return std::chrono::microseconds(static_cast<int64_t>(us));
}

void SleepEngine::describe(proto::WorkerHello& hello) const {
  hello.set_device_index(device_index_);
  hello.set_device_name("sleep test double");
  hello.set_arch("none");
  hello.set_backend("sleep");
}

std::vector<std::string> SleepEngine::loaded_models() const {
  if (last_model_.empty()) return {};
  return {last_model_};
}

namespace {

// The failure a prompt marker asks for, or Ok.
Status marker_failure(const JobAssignment& job) {
  const std::string& prompt = job.settings().prompt();
  if (prompt.find("[fail]") != std::string::npos) {
    return Status::InvalidArgument("sleep test double: prompt asks to fail ([fail])");
  }
  if (prompt.find("[config]") != std::string::npos) {
    return Status::FailedPrecondition("sleep test double: prompt asks for a configuration error ([config]) under " +
                                      job.output_root());
  }
  if (prompt.find("[oom]") != std::string::npos) {
    return Status::ResourceExhausted("sleep test double: prompt asks for out of memory ([oom])");
  }
  return Status::Ok();
}

Status cancelled(const JobAssignment& job) {
  return Status::Cancelled("job " + std::to_string(job.job_id()) + " cancelled");
}

}  // namespace

std::string SleepEngine::batch_key(const JobAssignment& job) const {
  // Every field a shared UNet step depends on; the prompt, negative prompt
  // and seed differ per job of a batch.
  const auto& g = job.settings();
  std::ostringstream k;
  k << job.model() << '|' << g.width() << 'x' << g.height() << '|' << g.steps() << '|' << g.sampler() << '|'
    << g.precision() << '|' << g.timestep_spacing() << '|' << g.guidance() << '|' << g.guidance_rescale() << '|'
    << g.init_image() << '|' << g.strength() << '|' << g.refiner() << '|' << g.refiner_switch_at();
  for (const auto& l : g.loras()) k << '|' << l.path() << '*' << l.scale();
  return k.str();
}

int SleepEngine::max_batch() const { return proto::kMaxBatch; }

std::vector<Result<proto::JobResult>> SleepEngine::run_batch(const std::vector<JobAssignment>& jobs,
                                                             const std::vector<ProgressSink*>& progress,
                                                             const std::vector<const std::atomic<bool>*>& cancel) {
  std::vector<Result<proto::JobResult>> out;
  auto refuse_all = [&](const std::string& why) {
    out.clear();
    for (size_t i = 0; i < jobs.size(); ++i) out.emplace_back(Status::InvalidArgument("sleep test double: " + why));
    return std::move(out);
  };
  if (jobs.empty() || jobs.size() > static_cast<size_t>(max_batch())) {
    return refuse_all("a batch of " + std::to_string(jobs.size()) + " jobs; want 1.." + std::to_string(max_batch()));
  }
  if (progress.size() != jobs.size() || cancel.size() != jobs.size()) {
    return refuse_all("a batch of " + std::to_string(jobs.size()) + " jobs with " + std::to_string(progress.size()) +
                      " progress sinks and " + std::to_string(cancel.size()) + " cancel flags");
  }
  const std::string key = batch_key(jobs[0]);
  for (const auto& j : jobs) {
    if (batch_key(j) != key) {
      return refuse_all("job " + std::to_string(j.job_id()) + " does not share the batch key of job " +
                        std::to_string(jobs[0].job_id()));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  // Each job's own outcome: a marker fails that job alone, before any sleep.
  std::vector<std::optional<Status>> failed(jobs.size());
  int steps = 1;
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (Status s = marker_failure(jobs[i]); !s.ok()) failed[i] = s;
    steps = std::max(steps, jobs[i].settings().steps());
  }
  const bool warm = last_model_ == jobs[0].model();
  last_model_ = jobs[0].model();
  auto live = [&](size_t i) { return !failed[i].has_value(); };
  std::vector<double> step_ms;
  if (duration_.count() > 0) {
    const int slices = std::min(steps, 1000);
    auto slice_start = start;
    for (int s = 0; s < slices; ++s) {
      bool any = false;
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (live(i) && cancel[i]->load()) failed[i] = cancelled(jobs[i]);
        any = any || live(i);
      }
      if (!any) break;  // every job failed or was cancelled: nothing left to sleep for
      std::this_thread::sleep_until(start + duration_ * (s + 1) / slices);
      const auto slice_end = std::chrono::steady_clock::now();
      step_ms.push_back(std::chrono::duration<double, std::milli>(slice_end - slice_start).count());
      slice_start = slice_end;
      for (size_t i = 0; i < jobs.size(); ++i) {
        if (live(i)) progress[i]->progress(s + 1, slices, spec::kPhaseDenoise);
      }
    }
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (live(i) && cancel[i]->load()) failed[i] = cancelled(jobs[i]);
    if (!live(i)) {
      out.emplace_back(*failed[i]);
      continue;
    }
    proto::JobResult r;
    r.set_job_id(jobs[i].job_id());
    r.set_attempt(jobs[i].attempt());
    r.mutable_parity()->set_verdict("NO_GOLDEN");
    r.mutable_parity()->set_reason("sleep test double: nothing to compare");
    auto* t = r.add_phases();
    t->set_phase(std::string(spec::kPhaseDenoise));
    t->set_host_ms(ms);
    // The shared steps: each job of the batch reports the same ones.
    for (size_t k = 0; k < step_ms.size(); ++k) {
      auto* st = r.add_steps();
      st->set_phase("step");
      st->set_step(static_cast<int32_t>(k));
      st->set_host_ms(step_ms[k]);
    }
    r.set_warm(warm);
    r.set_wall_ms(ms);
    r.set_batch_size(static_cast<int32_t>(jobs.size()));
    out.emplace_back(std::move(r));
  }
  return out;
}

Result<proto::JobResult> SleepEngine::run(const JobAssignment& job, ProgressSink& progress,
                                          const std::atomic<bool>& cancel) {
  auto start = std::chrono::steady_clock::now();
  const int steps = std::max(1, job.settings().steps());
  HIPQ_RETURN_IF_ERROR(marker_failure(job));
  bool warm = last_model_ == job.model();
  last_model_ = job.model();
  std::vector<double> step_ms;
  if (duration_.count() > 0) {
    const int slices = std::min(steps, 1000);
    auto slice_start = start;
    for (int i = 0; i < slices; ++i) {
      if (cancel.load()) return cancelled(job);
      std::this_thread::sleep_until(start + duration_ * (i + 1) / slices);
      const auto slice_end = std::chrono::steady_clock::now();
      step_ms.push_back(std::chrono::duration<double, std::milli>(slice_end - slice_start).count());
      slice_start = slice_end;
      progress.progress(i + 1, slices, spec::kPhaseDenoise);
    }
  }
  if (cancel.load()) return cancelled(job);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  proto::JobResult out;
  out.set_job_id(job.job_id());
  out.set_attempt(job.attempt());
  out.mutable_parity()->set_verdict("NO_GOLDEN");
  out.mutable_parity()->set_reason("sleep test double: nothing to compare");
  auto* t = out.add_phases();
  t->set_phase(std::string(spec::kPhaseDenoise));
  t->set_host_ms(ms);
  // Each slice is reported as a step, as the engine reports its steps.
  for (size_t i = 0; i < step_ms.size(); ++i) {
    auto* st = out.add_steps();
    st->set_phase("step");
    st->set_step(static_cast<int32_t>(i));
    st->set_host_ms(step_ms[i]);
  }
  out.set_warm(warm);
  out.set_wall_ms(ms);
  return out;
}

}  // namespace hipq::worker
