#include "coordinator/statistics/mann_whitney.h"

#include <gtest/gtest.h>

#include "tests/coordinator/statistics/expected_data.h"

namespace hipq::coordinator::statistics {
namespace {

TEST(MannWhitneyTest, MatchesIndependentComputation) {
  const auto expected = testing::load_expected();
  int exact = 0, asymptotic = 0;
  for (const auto& e : expected["mann_whitney"]) {
    SCOPED_TRACE(e["name"].get<std::string>());
    auto r = mann_whitney_u(testing::values_of(e["a"]), testing::values_of(e["b"]));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_DOUBLE_EQ(r->u, e["u"].get<double>());
    EXPECT_EQ(r->exact, e["exact"].get<bool>());
    testing::expect_close(e["p"], r->p, "p", 1e-9);
    testing::expect_close(e["effect"], r->effect, "effect");
    if (e.contains("z")) testing::expect_close(e["z"], r->z, "z");
    (r->exact ? exact : asymptotic)++;
  }
  EXPECT_GE(exact, 3);
  EXPECT_GE(asymptotic, 3);
}

TEST(MannWhitneyTest, SwappingSamplesMirrorsU) {
  const std::vector<double> a{1, 3, 5, 7}, b{2, 4, 6};
  auto ab = mann_whitney_u(a, b);
  auto ba = mann_whitney_u(b, a);
  ASSERT_TRUE(ab.ok() && ba.ok());
  EXPECT_DOUBLE_EQ(ab->u + ba->u, 12.0);
  EXPECT_DOUBLE_EQ(ab->p, ba->p);
}

TEST(MannWhitneyTest, RejectsEmptySample) {
  const std::vector<double> a{1}, none;
  EXPECT_EQ(mann_whitney_u(a, none).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::coordinator::statistics
