// Parity of every op on every available backend against the harness's fp64
// reference: the light table (odd shapes, strided views, medium SDXL-like
// sizes). Runs on the cpu backend everywhere, and on hip device 0 when the
// build has it and a GPU is visible. Filter with --gtest_filter=*matmul* or
// env HIPQ_PARITY_FILTER=matmul,conv2d_f16.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>

#include "kernels/backend.h"
#include "parity/parity_case.h"
#include "parity/parity_runner.h"

namespace hipq::kernels::parity {
namespace {

class ParityTest : public ::testing::TestWithParam<ParityCase> {};

TEST_P(ParityTest, MatchesReferenceOnEveryBackend) {
  const ParityCase& c = GetParam();
  if (!case_selected(c.name)) GTEST_SKIP() << "filtered out by HIPQ_PARITY_FILTER";
  int ran = 0;
  for (const std::string& name : available_backends()) {
    if (name == "hip" && gpu_device_count() == 0) continue;
    auto be = make_backend(name, 0);
    ASSERT_TRUE(be.ok()) << be.status().ToString();
    ParityReport r = run_case(**be, c);
    std::printf("[parity] %-70s %s\n", c.name.c_str(), r.summary().c_str());
    record_report(c, r);
    EXPECT_TRUE(r.ok) << c.name << " on " << name << ": " << r.failure;
    ++ran;
  }
  EXPECT_GT(ran, 0);
}

// Prints the backend x dtype table after the last case.
class SummaryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    const std::string t = summary_table();
    if (t.find("| cpu") != std::string::npos || t.find("| hip") != std::string::npos) std::printf("%s", t.c_str());
  }
};
const auto* const kSummary = ::testing::AddGlobalTestEnvironment(new SummaryEnvironment);

std::string test_name(const ::testing::TestParamInfo<ParityCase>& info) {
  std::string s = info.param.name;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Ops, ParityTest, ::testing::ValuesIn(parity_cases(false)), test_name);

}  // namespace
}  // namespace hipq::kernels::parity
