#include "base/byte_size.h"

#include <gtest/gtest.h>

#include <string>

namespace hipq {
namespace {

TEST(ByteSizeTest, BinaryUnitsAndPlainBytesParse) {
  EXPECT_EQ(*parse_byte_size("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(*parse_byte_size("8 gib"), int64_t{8} << 30);
  EXPECT_EQ(*parse_byte_size("6144MiB"), int64_t{6} << 30);
  EXPECT_EQ(*parse_byte_size("7.5G"), int64_t{15} << 29);
  EXPECT_EQ(*parse_byte_size("512k"), int64_t{512} << 10);
  EXPECT_EQ(*parse_byte_size("1073741824"), int64_t{1} << 30);
  EXPECT_EQ(*parse_byte_size(" 100 B "), 100);
  EXPECT_EQ(*parse_byte_size("1T"), int64_t{1} << 40);
  EXPECT_EQ(*parse_byte_size("8GB"), int64_t{8} << 30) << "an 8 GB card holds 8 GiB";
  EXPECT_EQ(*parse_byte_size("512 mb"), int64_t{512} << 20);
}

TEST(ByteSizeTest, WhatIsNotASizeIsRefusedWithTheForms) {
  for (const char* bad : {"", "GiB", "-1G", "8 GiBs", "8XB", "1.2.3G", ".", "2e9", "9999999999999999999T"}) {
    auto r = parse_byte_size(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("8GiB"), std::string::npos) << r.status().message();
  }
  const std::string huge(1000, '9');
  EXPECT_FALSE(parse_byte_size(huge).ok());
}

TEST(ByteSizeTest, FormatsInTheLargestUnitAboveOne) {
  EXPECT_EQ(format_byte_size(int64_t{8} << 30), "8 GiB");
  EXPECT_EQ(format_byte_size(int64_t{3} << 29), "1.5 GiB");
  EXPECT_EQ(format_byte_size(1000), "1000 B");
  EXPECT_EQ(format_byte_size(int64_t{12} << 20), "12 MiB");
}

}  // namespace
}  // namespace hipq
