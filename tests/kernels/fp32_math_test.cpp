#include "kernels/fp32_math.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace hipq::kernels {
namespace {

TEST(Fp32Math, NamesParseAndAnEmptyValueIsTheDefault) {
  EXPECT_EQ(*parse_fp32_math("3xtf32"), Fp32Math::k3xTf32);
  EXPECT_EQ(*parse_fp32_math(""), Fp32Math::k3xTf32);
  EXPECT_EQ(*parse_fp32_math("fma"), Fp32Math::kFma);
}

TEST(Fp32Math, AnUnknownValueNamesTheVariableAndTheChoices) {
  auto r = parse_fp32_math("tf32");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string m = r.status().message();
  EXPECT_NE(m.find("HIPQ_FP32_MATH=tf32"), std::string::npos) << m;
  EXPECT_NE(m.find("3xtf32"), std::string::npos) << m;
  EXPECT_NE(m.find("fma"), std::string::npos) << m;
}

TEST(Fp32Math, TheEnvironmentVariableSelectsTheMode) {
  const char* old = std::getenv(kFp32MathEnv);
  const std::string saved = old ? old : "";
  ::unsetenv(kFp32MathEnv);
  EXPECT_EQ(*fp32_math_from_env(), Fp32Math::k3xTf32);
  ::setenv(kFp32MathEnv, "fma", 1);
  EXPECT_EQ(*fp32_math_from_env(), Fp32Math::kFma);
  ::setenv(kFp32MathEnv, "fast", 1);
  EXPECT_FALSE(fp32_math_from_env().ok());
  if (old)
    ::setenv(kFp32MathEnv, saved.c_str(), 1);
  else
    ::unsetenv(kFp32MathEnv);
}

TEST(Fp32Math, TheProductsAreNamedByModeAndDevice) {
  EXPECT_EQ(fp32_products(Fp32Math::k3xTf32, true), "3xTF32 split on tensor cores");
  EXPECT_EQ(fp32_products(Fp32Math::k3xTf32, false), "fp32 FMA");
  EXPECT_EQ(fp32_products(Fp32Math::kFma, true), "fp32 FMA");
}

}  // namespace
}  // namespace hipq::kernels
