// HIPQ_DOT2 and the names of the f16 product modes (kernels/f16_math.h).
#include "kernels/f16_math.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

namespace hipq::kernels {
namespace {

TEST(F16Math, TheVariableTurnsDot2OnOrOffAndUnsetIsTheVendorDefault) {
  EXPECT_EQ(dot2_f16(/*amd=*/true, ""), kDot2DefaultOnAmd);
  EXPECT_FALSE(dot2_f16(/*amd=*/false, ""));
  EXPECT_FALSE(dot2_f16(true, "0"));
  EXPECT_TRUE(dot2_f16(false, "1"));
  EXPECT_TRUE(dot2_f16(true, "1"));
  EXPECT_FALSE(dot2_f16(false, "0"));
  // Anything else is the vendor's default.
  EXPECT_EQ(dot2_f16(true, "yes"), kDot2DefaultOnAmd);
  EXPECT_FALSE(dot2_f16(false, "yes"));
}

TEST(F16Math, TheEnvironmentVariableIsRead) {
  const char* old = std::getenv(kDot2Env);
  const std::string saved = old ? old : "";
  ::unsetenv(kDot2Env);
  EXPECT_EQ(dot2_f16_from_env(true), kDot2DefaultOnAmd);
  EXPECT_FALSE(dot2_f16_from_env(false));
  ::setenv(kDot2Env, "1", 1);
  EXPECT_TRUE(dot2_f16_from_env(false));
  ::setenv(kDot2Env, "0", 1);
  EXPECT_FALSE(dot2_f16_from_env(true));
  if (old)
    ::setenv(kDot2Env, saved.c_str(), 1);
  else
    ::unsetenv(kDot2Env);
}

TEST(F16Math, TheProductsAreNamedByRoute) {
  EXPECT_EQ(f16_products(true, true, true), "packed-half dot2 into fp32");
  EXPECT_EQ(f16_products(false, true, true), "tensor cores (wgmma), fp32 accumulate");
  EXPECT_EQ(f16_products(false, true, false), "tensor cores (mma.sync), fp32 accumulate");
  EXPECT_EQ(f16_products(false, false, false), "fp32 FMA");
}

}  // namespace
}  // namespace hipq::kernels
