// PhaseTimer: host-clock and device-event timing of named phases (load,
// text_encode, denoise, each step, decode, write, parity).
//
// begin(name) records a host timestamp and a backend event; end() records the
// closing pair. gpu_ms comes from Backend::elapsed_ms over the two events (it
// synchronises on the end event, so call finish() once, after the work, to
// avoid stalling the stream mid-run); the cpu backend's events are host
// clocks. Phases may nest (denoise contains the steps) but not interleave.
// Without a backend only host_ms is measured (gpu_ms = 0).
// Errors: the backend's event errors, FailedPrecondition for end() without
// begin(). Thread safety: one thread.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct PhaseTiming {
  std::string phase;  // load | text_encode | denoise | decode | write | parity | step
  double host_ms = 0;
  double gpu_ms = 0;
};

class PhaseTimer {
 public:
  explicit PhaseTimer(kernels::Backend* backend) : backend_(backend) {}

  Status begin(std::string phase);
  Status end();
  // Resolves device times of every closed phase (synchronises). Returns the
  // phases in the order they were begun.
  Result<std::vector<PhaseTiming>> finish();

 private:
  struct Open {
    std::string phase;
    std::chrono::steady_clock::time_point host_start;
    std::chrono::steady_clock::time_point host_end;
    int event_start = -1;
    int event_end = -1;
    bool closed = false;
  };
  kernels::Backend* backend_;
  std::vector<Open> phases_;
  std::vector<size_t> stack_;
};

}  // namespace hipq::engine
