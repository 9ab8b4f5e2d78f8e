#include "spec/phases.h"

#include <algorithm>

namespace hipq::spec {

const std::vector<std::string>& job_phases() {
  static const std::vector<std::string> k{std::string(kPhaseLoad),        std::string(kPhaseTextEncode),
                                          std::string(kPhaseImageEncode), std::string(kPhaseDenoise),
                                          std::string(kPhaseDecode),      std::string(kPhaseWrite),
                                          std::string(kPhaseParity)};
  return k;
}

const std::vector<std::string>& statistics_phases() {
  static const std::vector<std::string> k = [] {
    std::vector<std::string> out;
    for (const std::string& p : job_phases()) {
      out.push_back(p);
      if (p == kPhaseDenoise) out.emplace_back(kPhaseStep);
    }
    out.emplace_back(kPhaseTotal);
    return out;
  }();
  return k;
}

size_t phase_rank(std::string_view phase) {
  const auto& k = job_phases();
  return static_cast<size_t>(std::find(k.begin(), k.end(), phase) - k.begin());
}

bool phase_before(std::string_view a, std::string_view b) {
  const size_t ra = phase_rank(a), rb = phase_rank(b);
  if (ra != rb) return ra < rb;
  return a < b;
}

}  // namespace hipq::spec
