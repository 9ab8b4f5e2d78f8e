#include "kernels/cpu/tensor_io.h"

#include <array>
#include <cstring>

#include "base/check.h"
#include "kernels/dtype.h"

namespace hipq::kernels::cpu {

void gather_f32(const Tensor& t, float* dst) {
  const int64_t n = t.numel();
  if (n == 0) return;
  if (t.is_contiguous()) {
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(dst, t.data, static_cast<size_t>(n) * sizeof(float));
        return;
      case DType::kF16: {
        const auto* p = static_cast<const uint16_t*>(t.data);
        for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(p[i]);
        return;
      }
      case DType::kBF16: {
        const auto* p = static_cast<const uint16_t*>(t.data);
        for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(p[i]);
        return;
      }
      default:
        for (int64_t i = 0; i < n; ++i) dst[i] = load_as_f32(t.data, t.dtype, i);
        return;
    }
  }
  const void* data = t.data;
  const DType dt = t.dtype;
  for_each_offset(t.ndim, t.shape.data(), t.stride.data(),
                  [&](int64_t i, int64_t off) { dst[i] = load_as_f32(data, dt, off); });
}

void scatter_f32(const float* src, const Tensor& t) {
  const int64_t n = t.numel();
  if (n == 0) return;
  if (t.is_contiguous()) {
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(t.data, src, static_cast<size_t>(n) * sizeof(float));
        return;
      case DType::kF16: {
        auto* p = static_cast<uint16_t*>(t.data);
        for (int64_t i = 0; i < n; ++i) p[i] = f32_to_f16(src[i]);
        return;
      }
      case DType::kBF16: {
        auto* p = static_cast<uint16_t*>(t.data);
        for (int64_t i = 0; i < n; ++i) p[i] = f32_to_bf16(src[i]);
        return;
      }
      default:
        for (int64_t i = 0; i < n; ++i) store_from_f32(t.data, t.dtype, i, src[i]);
        return;
    }
  }
  void* data = t.data;
  const DType dt = t.dtype;
  for_each_offset(t.ndim, t.shape.data(), t.stride.data(),
                  [&](int64_t i, int64_t off) { store_from_f32(data, dt, off, src[i]); });
}

const float* as_f32(const Tensor& t, std::vector<float>& buf) {
  if (t.dtype == DType::kF32 && t.is_contiguous()) return static_cast<const float*>(t.data);
  buf.resize(static_cast<size_t>(t.numel()));
  gather_f32(t, buf.data());
  return buf.data();
}

static void byte_span(const Tensor& t, uintptr_t& lo, uintptr_t& hi) {
  int64_t min_off = 0, max_off = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] == 0) {
      lo = hi = 0;
      return;
    }
    const int64_t span = (t.shape[d] - 1) * t.stride[d];
    if (span < 0) min_off += span;
    else max_off += span;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  const auto es = static_cast<int64_t>(dtype_size(t.dtype));
  lo = base + static_cast<uintptr_t>(min_off * es);
  hi = base + static_cast<uintptr_t>((max_off + 1) * es);
}

bool overlaps(const Tensor& a, const Tensor& b) {
  uintptr_t alo, ahi, blo, bhi;
  byte_span(a, alo, ahi);
  byte_span(b, blo, bhi);
  if (alo == ahi || blo == bhi) return false;
  return alo < bhi && blo < ahi;
}

float* scratch(int slot, size_t count) {
  thread_local std::array<std::vector<float>, 8> buffers;
  HIPQ_CHECK(slot >= 0 && slot < 8);
  auto& b = buffers[static_cast<size_t>(slot)];
  if (b.size() < count) b.resize(count);
  return b.data();
}

}  // namespace hipq::kernels::cpu
