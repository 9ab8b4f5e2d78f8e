#include "engine/phase_peaks.h"

#include <algorithm>

namespace hipq::engine {

void PhasePeaks::begin() {
  folded_ = std::max(folded_, backend_.peak_bytes());
  backend_.reset_peak();
}

void PhasePeaks::end(const std::string& phase) {
  const int64_t peak = backend_.peak_bytes();
  folded_ = std::max(folded_, peak);
  for (PhasePeak& p : phases_)
    if (p.phase == phase) {
      p.bytes = std::max(p.bytes, peak);
      return;
    }
  phases_.push_back({phase, peak});
}

int64_t PhasePeaks::job_peak() const { return std::max(folded_, backend_.peak_bytes()); }

}  // namespace hipq::engine
