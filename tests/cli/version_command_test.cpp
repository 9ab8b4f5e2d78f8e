// `hipq version` through the real binary: the fp32 and f16 products lines
// follow the build's GPU flavour, HIPQ_FP32_MATH and HIPQ_DOT2.
#include <stdlib.h>

#include <string>

#include <gtest/gtest.h>

#include "../coordinator/process_harness.h"
#include "base/build_info.h"

namespace hipq {
namespace {

using testing::run_hipq;
using testing::TempDir;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(VersionCommand, NamesTheFp32ProductsOfTheBuildUnderHipqFp32Math) {
  TempDir dir;
  std::string out, err;
  const bool nvidia = std::string(build_info::kGpuFlavour) == "nvidia";
  {
    ScopedEnv env("HIPQ_FP32_MATH", nullptr);
    ASSERT_EQ(run_hipq(dir.path(), "default", {"version"}, &out, &err), 0) << err;
    EXPECT_NE(out.find(nvidia ? "fp32 products  3xTF32 split on tensor cores on sm_80+ devices"
                              : "fp32 products  fp32 FMA\n"),
              std::string::npos)
        << out;
  }
  {
    ScopedEnv env("HIPQ_FP32_MATH", "3xtf32");
    ASSERT_EQ(run_hipq(dir.path(), "3xtf32", {"version"}, &out, &err), 0) << err;
    EXPECT_NE(out.find(nvidia ? "fp32 products  3xTF32 split on tensor cores on sm_80+ devices"
                              : "fp32 products  fp32 FMA\n"),
              std::string::npos)
        << out;
  }
  {
    ScopedEnv env("HIPQ_FP32_MATH", "fma");
    ASSERT_EQ(run_hipq(dir.path(), "fma", {"version"}, &out, &err), 0) << err;
    EXPECT_NE(out.find(nvidia ? "fp32 products  fp32 FMA (HIPQ_FP32_MATH=fma" : "fp32 products  fp32 FMA\n"),
              std::string::npos)
        << out;
    EXPECT_EQ(out.find("3xTF32"), std::string::npos) << out;
  }
  {
    ScopedEnv env("HIPQ_FP32_MATH", "tf32");
    ASSERT_EQ(run_hipq(dir.path(), "bad", {"version"}, &out, &err), 0) << err;
    EXPECT_NE(out.find("HIPQ_FP32_MATH=tf32: unknown fp32 math mode"), std::string::npos) << out;
  }
}

TEST(VersionCommand, NamesTheF16ProductsOfTheBuildUnderHipqDot2) {
  TempDir dir;
  std::string out, err;
  const std::string flavour = build_info::kGpuFlavour;
  {
    ScopedEnv env("HIPQ_DOT2", nullptr);
    ASSERT_EQ(run_hipq(dir.path(), "default", {"version"}, &out, &err), 0) << err;
    const char* want = flavour == "amd"      ? "f16 products   fp32 FMA (HIPQ_DOT2=1: packed-half"
                       : flavour == "nvidia" ? "f16 products   tensor cores, fp32 accumulate"
                                             : "f16 products   fp32 (cpu backend)\n";
    EXPECT_NE(out.find(want), std::string::npos) << out;
  }
  {
    ScopedEnv env("HIPQ_DOT2", "1");
    ASSERT_EQ(run_hipq(dir.path(), "switched", {"version"}, &out, &err), 0) << err;
    const char* want = flavour == "amd"      ? "f16 products   packed-half dot2 into fp32 (v_dot2_f32_f16"
                       : flavour == "nvidia" ? "f16 products   packed-half dot2 into fp32 (HIPQ_DOT2=1"
                                             : "f16 products   fp32 (cpu backend)\n";
    EXPECT_NE(out.find(want), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace hipq
