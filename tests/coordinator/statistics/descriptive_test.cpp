#include "coordinator/statistics/descriptive.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/coordinator/statistics/expected_data.h"

namespace hipq::coordinator::statistics {
namespace {

using testing::expect_close;
using testing::values_of;

TEST(DescriptiveTest, MatchesPythonStatisticsAndNumpyOnEveryDataSet) {
  const auto expected = testing::load_expected();
  ASSERT_TRUE(expected.contains("datasets"));
  int checked = 0;
  for (const auto& [name, set] : expected["datasets"].items()) {
    SCOPED_TRACE(name);
    const auto xs = values_of(set["values"]);
    auto s = summarize(xs);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const auto& e = set["summary"];
    EXPECT_EQ(s->n, e["n"].get<size_t>());
    expect_close(e["mean"], s->mean, "mean");
    if (e["sd"].is_null()) {
      EXPECT_TRUE(std::isnan(s->sd)) << "sd of n < 2 must be NaN";
    } else {
      expect_close(e["sd"], s->sd, "sd", 1e-7);
    }
    expect_close(e["min"], s->min, "min");
    expect_close(e["p50"], s->p50, "p50");
    expect_close(e["median_statistics"], s->p50, "p50 vs statistics.median");
    expect_close(e["p90"], s->p90, "p90");
    expect_close(e["p95"], s->p95, "p95");
    expect_close(e["p99"], s->p99, "p99");
    expect_close(e["max"], s->max, "max");
    std::vector<double> scratch = xs;
    expect_close(e["p50"], median_in_place(scratch), "median_in_place");
    ++checked;
  }
  EXPECT_GE(checked, 8);
}

TEST(DescriptiveTest, SingleValueHasEveryQuantileEqualToIt) {
  const std::vector<double> one{7.25};
  auto s = summarize(one);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->n, 1u);
  EXPECT_DOUBLE_EQ(s->p99, 7.25);
  EXPECT_DOUBLE_EQ(s->min, 7.25);
  EXPECT_TRUE(std::isnan(s->sd));
}

TEST(DescriptiveTest, QuantileEndpointsAreMinAndMax) {
  const std::vector<double> xs{3, 1, 2, 5, 4};
  EXPECT_DOUBLE_EQ(*quantile(xs, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(*quantile(xs, 1.0), 5.0);
  EXPECT_DOUBLE_EQ(*quantile(xs, 0.5), 3.0);
  EXPECT_DOUBLE_EQ(*quantile(xs, 0.1), 1.4);  // h = 0.4 → 1 + 0.4 * (2 - 1)
}

TEST(DescriptiveTest, RejectsEmptyNonFiniteAndOutOfRange) {
  const std::vector<double> empty;
  EXPECT_EQ(summarize(empty).status().code(), StatusCode::kInvalidArgument);
  const std::vector<double> nan{1.0, std::numeric_limits<double>::quiet_NaN()};
  auto s = summarize(nan);
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("value 1"), std::string::npos) << s.status().message();
  const std::vector<double> ok{1.0};
  EXPECT_EQ(quantile(ok, 1.5).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::coordinator::statistics
