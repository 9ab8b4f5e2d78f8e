#include "engine/phase_timer.h"

namespace hipq::engine {

Status PhaseTimer::begin(std::string phase) {
  Open o;
  o.phase = std::move(phase);
  if (backend_ != nullptr) {
    HIPQ_ASSIGN_OR_RETURN(o.event_start, backend_->record_event());
  }
  o.host_start = std::chrono::steady_clock::now();
  stack_.push_back(phases_.size());
  phases_.push_back(std::move(o));
  return Status::Ok();
}

Status PhaseTimer::end() {
  if (stack_.empty()) return Status::FailedPrecondition("PhaseTimer::end() without a matching begin()");
  Open& o = phases_[stack_.back()];
  stack_.pop_back();
  if (backend_ != nullptr) {
    HIPQ_ASSIGN_OR_RETURN(o.event_end, backend_->record_event());
  }
  o.host_end = std::chrono::steady_clock::now();
  o.closed = true;
  return Status::Ok();
}

Result<std::vector<PhaseTiming>> PhaseTimer::finish() {
  if (!stack_.empty())
    return Status::FailedPrecondition("PhaseTimer::finish() with phase \"" + phases_[stack_.back()].phase +
                                      "\" still open");
  std::vector<PhaseTiming> out;
  out.reserve(phases_.size());
  for (const Open& o : phases_) {
    PhaseTiming t;
    t.phase = o.phase;
    t.host_ms = std::chrono::duration<double, std::milli>(o.host_end - o.host_start).count();
    if (backend_ != nullptr) {
      HIPQ_ASSIGN_OR_RETURN(t.gpu_ms, backend_->elapsed_ms(o.event_start, o.event_end));
    }
    out.push_back(std::move(t));
  }
  phases_.clear();
  return out;
}

}  // namespace hipq::engine
