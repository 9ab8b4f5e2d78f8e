// No vendor math libraries: runs `ldd` on the GPU-enabled binaries of this
// build and fails if any links a vendor BLAS/DNN library (rocBLAS, hipBLAS,
// hipBLASLt, MIOpen, cuBLAS, cuBLASLt, cuDNN, or any *blas* / *dnn*). Needs
// no device. The binaries come from the compile definition
// HIPQ_GPU_BINARIES (','-separated), or from env HIPQ_GPU_BINARIES.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/kernels/gpu/command_output.h"

namespace {

using hipq::testing::command_output;
using hipq::testing::split;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The forbidden library a line of ldd output names, or "".
std::string forbidden_in(const std::string& line) {
  const std::string l = lower(line);
  const std::string name = l.substr(0, l.find("=>"));
  for (const char* bad : {"rocblas", "hipblas", "miopen", "cublas", "cudnn", "blas", "dnn", "rocsolver",
                          "hipsolver", "cusolver", "rocfft", "cufft"})
    if (name.find(bad) != std::string::npos) return bad;
  return "";
}

TEST(NoVendorLibs, ForbiddenNamesAreDetected) {
  EXPECT_EQ(forbidden_in("\tlibrocblas.so.0 => /usr/lib/x86_64-linux-gnu/librocblas.so.0 (0x1)"), "rocblas");
  EXPECT_EQ(forbidden_in("\tlibcublasLt.so.13 => not found"), "cublas");
  EXPECT_EQ(forbidden_in("\tlibcudnn.so.9 => /x/libcudnn.so.9"), "cudnn");
  EXPECT_EQ(forbidden_in("\tlibopenblas.so.0 => /x/libopenblas.so.0"), "blas");
  EXPECT_EQ(forbidden_in("\tlibMIOpen.so.1 => /x"), "miopen");
  EXPECT_EQ(forbidden_in("\tlibamdhip64.so.5 => /usr/lib/x86_64-linux-gnu/libamdhip64.so.5 (0x1)"), "");
  EXPECT_EQ(forbidden_in("\tlibstdc++.so.6 => /lib/x86_64-linux-gnu/libstdc++.so.6"), "");
}

TEST(NoVendorLibs, GpuBinariesLinkNoVendorMathLibrary) {
  std::string list;
  if (const char* env = std::getenv("HIPQ_GPU_BINARIES")) list = env;
#ifdef HIPQ_GPU_BINARIES
  if (list.empty()) list = HIPQ_GPU_BINARIES;
#endif
  const auto binaries = split(list, ',');
  ASSERT_FALSE(binaries.empty()) << "no GPU binaries to check: set HIPQ_GPU_BINARIES";
  int checked = 0;
  for (const std::string& bin : binaries) {
    if (!std::filesystem::exists(bin)) {
      ADD_FAILURE() << "GPU binary not found: " << bin << " (build it first)";
      continue;
    }
    int status = 0;
    const std::string out = command_output("ldd '" + bin + "' 2>&1", &status);
    ASSERT_NE(status, -1) << "could not run ldd on " << bin;
    ASSERT_FALSE(out.empty()) << "ldd printed nothing for " << bin;
    for (const std::string& line : split(out, '\n')) {
      const std::string bad = forbidden_in(line);
      EXPECT_TRUE(bad.empty()) << bin << " links a vendor math library (" << bad << "): " << line;
    }
    std::printf("%s: %zu shared libraries, none vendor BLAS/DNN\n", bin.c_str(), split(out, '\n').size());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(binaries.size()));
}

}  // namespace
