// PhasePeaks: the device allocator's in-use peak of each phase of one job
// (text_encode, image_encode, denoise, decode), beside the job's whole peak,
// so each can be set against the memory plan's moment of that phase
// (engine/memory_plan.h; timings.json `phase_peak_bytes`, docs/pipeline.md).
//
// It works on the backend's one peak counter (Backend::peak_bytes, the
// highest in_use since reset_peak): begin() folds the peak so far into the
// job's and resets the counter, end() reads the phase's. Nothing is lost:
// reset_peak() restarts from the bytes in use, so the job's peak is the
// largest of the folded ones. The caller resets the backend's peak once at the
// job's start and reads job_peak() at its end; phases do not nest.
// Thread safety: one thread (the job's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace hipq::engine {

struct PhasePeak {
  std::string phase;
  int64_t bytes = 0;
};

class PhasePeaks {
 public:
  explicit PhasePeaks(kernels::Backend& backend) : backend_(backend) {}

  void begin();
  // A phase measured twice (a base + refiner job's text encode) keeps its larger peak.
  void end(const std::string& phase);
  // The largest in-use bytes since the caller's reset_peak(), now included.
  int64_t job_peak() const;
  const std::vector<PhasePeak>& phases() const { return phases_; }

 private:
  kernels::Backend& backend_;
  int64_t folded_ = 0;
  std::vector<PhasePeak> phases_;
};

}  // namespace hipq::engine
