#include "coordinator/statistics/outliers.h"

#include <gtest/gtest.h>

#include "tests/coordinator/statistics/expected_data.h"

namespace hipq::coordinator::statistics {
namespace {

TEST(OutliersTest, FlagsMatchTukeyFencesComputedWithNumpy) {
  const auto expected = testing::load_expected();
  for (const auto& [name, set] : expected["datasets"].items()) {
    SCOPED_TRACE(name);
    auto r = classify_outliers(testing::values_of(set["values"]));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const auto& e = set["outliers"];
    testing::expect_close(e["q1"], r->fences.q1, "q1");
    testing::expect_close(e["q3"], r->fences.q3, "q3");
    const auto flags = e["flags"].get<std::vector<std::string>>();
    ASSERT_EQ(flags.size(), r->flags.size());
    for (size_t i = 0; i < flags.size(); ++i) {
      EXPECT_EQ(flags[i], outlier_class_name(r->flags[i])) << "value " << i;
    }
  }
}

TEST(OutliersTest, CountsEachClass) {
  const auto expected = testing::load_expected();
  auto r = classify_outliers(testing::values_of(expected["datasets"]["outliers"]["values"]));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->low_severe, 1u);
  EXPECT_EQ(r->high_severe, 1u);
  EXPECT_EQ(r->high_mild, 1u);
  EXPECT_EQ(r->low_mild, 0u);
  EXPECT_EQ(r->total(), 3u);
}

TEST(OutliersTest, IdenticalValuesHaveNoOutliers) {
  const std::vector<double> xs{4, 4, 4, 4};
  auto r = classify_outliers(xs);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->total(), 0u);
}

}  // namespace
}  // namespace hipq::coordinator::statistics
