// `hipq version` through the real binary: the fp32 products line follows the
// build's GPU flavour and HIPQ_FP32_MATH.
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

}  // namespace
}  // namespace hipq
