// lora_merge on the cpu: out = f32(base) + sum over deltas of
// (coefficient * up) @ down, row by row (kernels/backend.h gives the order).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/dtype.h"

namespace hipq::kernels::cpu {
namespace {

// acc [in] += (c * up_row[k]) * down[k, :] for k = 0, 1, ..., rank - 1: a
// multiply and an add each (no FMA contraction: the AVX2 clone of
// HIPQ_CPU_HOT has none), so both clones give the same bits. Blocks of 32
// columns stay in registers over the whole rank.
HIPQ_CPU_HOT void accumulate_row(float* acc, const float* up_row, const float* down, float c, int64_t rank,
                                 int64_t in) {
  constexpr int64_t kBlock = 32;
  int64_t j0 = 0;
  for (; j0 + kBlock <= in; j0 += kBlock) {
    float t[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) t[j] = acc[j0 + j];
    for (int64_t k = 0; k < rank; ++k) {
      const float a = c * up_row[k];
      const float* d = down + k * in + j0;
      for (int64_t j = 0; j < kBlock; ++j) t[j] += a * d[j];
    }
    for (int64_t j = 0; j < kBlock; ++j) acc[j0 + j] = t[j];
  }
  for (int64_t k = 0; k < rank && j0 < in; ++k) {
    const float a = c * up_row[k];
    const float* d = down + k * in;
    for (int64_t j = j0; j < in; ++j) acc[j] += a * d[j];
  }
}

}  // namespace

Status lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out) {
  constexpr std::string_view op = "lora_merge";
  HIPQ_RETURN_IF_ERROR(check_host(op, "base", base));
  HIPQ_RETURN_IF_ERROR(check_host(op, "out", out));
  for (const LoraFactors& d : deltas) {
    HIPQ_RETURN_IF_ERROR(check_host(op, "up", d.up));
    HIPQ_RETURN_IF_ERROR(check_host(op, "down", d.down));
  }
  HIPQ_RETURN_IF_ERROR(check_lora_merge(base, deltas, out));
  const int64_t rows = base.shape[0], cols = base.shape[1];
  int64_t work = 0;
  for (const LoraFactors& d : deltas) work += d.up.shape[1] * cols;
  // Each output row is computed by one thread in one fixed order, so the
  // bits do not depend on the thread count; a chunk holds at least 2^20
  // multiply-adds.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, std::max(work, cols)));
  ThreadPool::global().parallel_for(rows, grain, [&](int64_t b, int64_t e) {
    std::vector<float> acc(static_cast<size_t>(cols));
    for (int64_t o = b; o < e; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (const LoraFactors& d : deltas) {
        const int64_t rank = d.up.shape[1];
        accumulate_row(acc.data(), static_cast<const float*>(d.up.data) + o * rank,
                       static_cast<const float*>(d.down.data), d.coefficient, rank, cols);
      }
      float* row = static_cast<float*>(out.data) + o * cols;
      if (base.dtype == DType::kF32) {
        std::memcpy(row, static_cast<const float*>(base.data) + o * cols, static_cast<size_t>(cols) * sizeof(float));
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] = load_as_f32(base.data, base.dtype, o * cols + j);
      }
      for (int64_t j = 0; j < cols; ++j) row[j] += acc[static_cast<size_t>(j)];
    }
  });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
