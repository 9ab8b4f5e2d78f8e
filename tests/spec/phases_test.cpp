#include "spec/phases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace hipq::spec {
namespace {

TEST(PhasesTest, JobPhasesAreInPipelineOrder) {
  EXPECT_EQ(job_phases(), (std::vector<std::string>{"load", "text_encode", "image_encode", "denoise", "decode", "write",
                                                    "parity"}));
}

TEST(PhasesTest, StatisticsPhasesAddStepAfterDenoiseAndTotalLast) {
  EXPECT_EQ(statistics_phases(), (std::vector<std::string>{"load", "text_encode", "image_encode", "denoise", "step",
                                                           "decode", "write", "parity", "total"}));
}

TEST(PhasesTest, SortingByPhaseBeforeGivesPipelineOrderThenUnknownByName) {
  std::vector<std::string> names{"write", "zeta", "decode", "parity", "alpha", "load", "denoise", "text_encode"};
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return phase_before(a, b); });
  EXPECT_EQ(names, (std::vector<std::string>{"load", "text_encode", "denoise", "decode", "write", "parity", "alpha",
                                             "zeta"}));
  EXPECT_EQ(phase_rank("load"), 0u);
  EXPECT_EQ(phase_rank("parity"), 6u);
  EXPECT_EQ(phase_rank("nope"), job_phases().size());
}

}  // namespace
}  // namespace hipq::spec
