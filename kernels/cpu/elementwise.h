// elementwise(): the loop behind the cpu's elementwise ops (unary, binary,
// scale). Inputs are read in chunks of logical elements into per-thread fp32
// buffers, `f` computes one chunk in place in the first buffer, and the chunk
// is stored into y; chunks run on the thread pool, so memory stays bounded
// and reads, math and rounding all run in parallel. An input that overlaps y
// with a different layout is staged whole first, so in-place views are safe.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <vector>

#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/tensor.h"

namespace hipq::kernels::cpu {

inline bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.data != b.data || a.dtype != b.dtype || !a.same_shape(b)) return false;
  for (int d = 0; d < a.ndim; ++d)
    if (a.shape[d] > 1 && a.stride[d] != b.stride[d]) return false;
  return true;
}

// f(float* const* bufs, int64_t count): bufs[i] holds input i's chunk; the
// result goes into bufs[0].
template <size_t N, typename F>
void elementwise(const std::array<Tensor, N>& ins, const Tensor& y, F&& f) {
  constexpr int64_t kChunk = 8192;
  const int64_t n = y.numel();
  if (n == 0) return;
  std::array<Tensor, N> src = ins;
  std::array<std::vector<float>, N> staged;
  for (size_t i = 0; i < N; ++i) {
    if (overlaps(ins[i], y) && !same_layout(ins[i], y)) {
      staged[i].resize(static_cast<size_t>(n));
      gather_f32(ins[i], staged[i].data());
      src[i] = Tensor::contiguous(staged[i].data(), DType::kF32, y.shape_vec());
    }
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  ThreadPool::global().parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    float* bufs[N];
    for (size_t i = 0; i < N; ++i) bufs[i] = scratch(static_cast<int>(i), kChunk);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t begin = c * kChunk, count = std::min(kChunk, n - begin);
      for (size_t i = 0; i < N; ++i) gather_range_f32(src[i], begin, count, bufs[i]);
      f(static_cast<float* const*>(bufs), count);
      scatter_range_f32(bufs[0], y, begin, count);
    }
  });
}

}  // namespace hipq::kernels::cpu
