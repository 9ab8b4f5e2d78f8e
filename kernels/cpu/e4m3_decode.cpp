#include "kernels/cpu/e4m3_decode.h"

#include <cstdint>

#include "kernels/cpu/thread_pool.h"
#include "kernels/fp8_e4m3.h"

namespace hipq::kernels::cpu {
namespace {

// The 256 code values, decoded once.
const float* e4m3_table() {
  static const std::vector<float> t = [] {
    std::vector<float> v(256);
    for (int c = 0; c < 256; ++c) v[static_cast<size_t>(c)] = fp8::f32_from_e4m3(static_cast<uint8_t>(c));
    return v;
  }();
  return t.data();
}

}  // namespace

void decode_e4m3(const Tensor& codes, std::vector<float>& dst) {
  const float* table = e4m3_table();
  const auto* q = static_cast<const uint8_t*>(codes.data);
  const int64_t n = codes.numel();
  dst.resize(static_cast<size_t>(n));
  ThreadPool::global().parallel_for(n, 1 << 16, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) dst[static_cast<size_t>(i)] = table[q[i]];
  });
}

}  // namespace hipq::kernels::cpu
