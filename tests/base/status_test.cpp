#include "base/status.h"

#include <gtest/gtest.h>

#include "base/result.h"

namespace hipq {
namespace {

TEST(StatusTest, DefaultIsOkAndPrintsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.code(), StatusCode::kOk);
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = Status::NotFound("weights 'unet/x.safetensors' missing");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NotFound: weights 'unet/x.safetensors' missing");
}

TEST(StatusTest, CopyIsDeep) {
  Status a = Status::IOError("disk");
  Status b = a;
  a = Status::Ok();
  EXPECT_EQ(b.message(), "disk");
  EXPECT_TRUE(a.ok());
}

TEST(StatusTest, WithContextPrependsAndKeepsCode) {
  Status s = Status::Corruption("bad header").WithContext("file 'a.safetensors'");
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_EQ(s.message(), "file 'a.safetensors': bad header");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

Result<int> half_of(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Status use_half(int x, int* out) {
  HIPQ_ASSIGN_OR_RETURN(*out, half_of(x));
  return Status::Ok();
}

TEST(ResultTest, ValueAndErrorPropagate) {
  int v = 0;
  EXPECT_TRUE(use_half(8, &v).ok());
  EXPECT_EQ(v, 4);
  Status s = use_half(3, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> r = Status::Internal("x");
  EXPECT_DEATH((void)r.value(), "value\\(\\) of an error Result");
}

}  // namespace
}  // namespace hipq
