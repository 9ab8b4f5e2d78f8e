#include "worker/sleep_engine.h"

#include <charconv>
#include <thread>
#include <vector>

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

Result<proto::JobResult> SleepEngine::run(const JobAssignment& job, ProgressSink& progress,
                                          const std::atomic<bool>& cancel) {
  auto start = std::chrono::steady_clock::now();
  const std::string& prompt = job.settings().prompt();
  const int steps = std::max(1, job.settings().steps());
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
  bool warm = last_model_ == job.model();
  last_model_ = job.model();
  std::vector<double> step_ms;
  if (duration_.count() > 0) {
    const int slices = std::min(steps, 1000);
    auto slice_start = start;
    for (int i = 0; i < slices; ++i) {
      if (cancel.load()) return Status::Cancelled("job " + std::to_string(job.job_id()) + " cancelled");
      std::this_thread::sleep_until(start + duration_ * (i + 1) / slices);
      const auto slice_end = std::chrono::steady_clock::now();
      step_ms.push_back(std::chrono::duration<double, std::milli>(slice_end - slice_start).count());
      slice_start = slice_end;
      progress.progress(i + 1, slices, spec::kPhaseDenoise);
    }
  }
  if (cancel.load()) return Status::Cancelled("job " + std::to_string(job.job_id()) + " cancelled");
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
