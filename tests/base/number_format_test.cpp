#include "base/number_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace hipq {
namespace {

TEST(NumberFormatTest, LargeValuesArePlainIntegersNotExponents) {
  EXPECT_EQ(format_significant(14210.3, 4), "14210");
  EXPECT_EQ(format_significant(14210.3, 5), "14210");
  EXPECT_EQ(format_significant(142103.7, 5), "142104");
  EXPECT_EQ(format_significant(-98765.4, 3), "-98765");
  EXPECT_EQ(format_significant(1e14, 4), "100000000000000");
}

TEST(NumberFormatTest, SmallerValuesKeepTheirSignificantDigitsLikePercentG) {
  EXPECT_EQ(format_significant(3.14159, 4), "3.142");
  EXPECT_EQ(format_significant(2.5, 4), "2.5");
  EXPECT_EQ(format_significant(3.0, 4), "3");
  EXPECT_EQ(format_significant(0.0123456, 3), "0.0123");
  EXPECT_EQ(format_significant(9.99996, 4), "10");   // rounding carries into a new digit
  EXPECT_EQ(format_significant(999.96, 4), "1000");
  EXPECT_EQ(format_significant(0, 4), "0");
}

TEST(NumberFormatTest, ExtremesFallBackToPercentG) {
  EXPECT_EQ(format_significant(1.5e-7, 3), "1.5e-07");
  EXPECT_EQ(format_significant(2e20, 3), "2e+20");
  EXPECT_EQ(format_significant(std::numeric_limits<double>::infinity(), 4), "inf");
  EXPECT_EQ(format_significant(std::nan(""), 4), "nan");
}

}  // namespace
}  // namespace hipq
