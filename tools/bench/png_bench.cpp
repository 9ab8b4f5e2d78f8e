// hipq_bench_png: time of encode_png (spec/png.h) on a 1024 x 1024 image of
// the kind a job writes (smooth gradients plus noise), median of --repeats,
// and the encoded size. Not a test. Prints one line a run, then the median.
//   hipq_bench_png [--repeats N]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "spec/png.h"

int main(int argc, char** argv) {
  int repeats = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--repeats") == 0) repeats = std::max(1, std::atoi(argv[i + 1]));
  hipq::spec::RgbImage im;
  im.width = im.height = 1024;
  im.rgb.resize(size_t{1024} * 1024 * 3);
  uint32_t state = 1;
  for (int y = 0; y < 1024; ++y)
    for (int x = 0; x < 1024; ++x)
      for (int c = 0; c < 3; ++c) {
        state = state * 1664525u + 1013904223u;
        const double v = 128 + 100 * std::sin(x * 0.01 * (c + 1)) * std::cos(y * 0.013) + (state >> 28) - 8.0;
        im.rgb[(static_cast<size_t>(y) * 1024 + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  std::vector<double> ms;
  size_t bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    auto png = hipq::spec::encode_png(im);
    const auto t1 = std::chrono::steady_clock::now();
    if (!png.ok()) {
      std::fprintf(stderr, "hipq_bench_png: %s\n", png.status().ToString().c_str());
      return 1;
    }
    bytes = png->size();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    std::printf("run %d: %.1f ms, %zu bytes\n", r + 1, ms.back(), bytes);
  }
  std::sort(ms.begin(), ms.end());
  std::printf("1024x1024 RGB: median %.1f ms over %d runs, %zu bytes\n", ms[ms.size() / 2], repeats, bytes);
  return 0;
}
