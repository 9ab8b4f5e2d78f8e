#include "kernels/cpu/tensor_io.h"

#include <algorithm>
#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define HIPQ_CPU_F16C 1
#endif

#include "base/check.h"
#include "kernels/dtype.h"

namespace hipq::kernels::cpu {

namespace {

// 64K-entry table: f16 bits -> f32, built once; turns the branchy conversion
// into one load per element.
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) t[i] = f16_to_f32(static_cast<uint16_t>(i));
    return t;
  }();
  return table.data();
}

#if HIPQ_CPU_F16C
// Hardware conversions (F16C), round to nearest even like f32_to_f16.
__attribute__((target("avx,f16c"))) void f16_to_f32_hw(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
__attribute__((target("avx,f16c"))) void f32_to_f16_hw(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}
// AVX usable (CPU and OS) and CPUID leaf 1 ECX's F16C bit, read directly:
// clang's __builtin_cpu_supports does not know "f16c".
bool have_f16c() {
  static const bool yes = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__builtin_cpu_supports("avx") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    return (ecx & bit_F16C) != 0;
  }();
  return yes;
}
#endif

void f16_to_f32_n(const uint16_t* src, float* dst, int64_t n) {
#if HIPQ_CPU_F16C
  if (have_f16c()) return f16_to_f32_hw(src, dst, n);
#endif
  const float* lut = f16_table();
  for (int64_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
}

void f32_to_f16_n(const float* src, uint16_t* dst, int64_t n) {
#if HIPQ_CPU_F16C
  if (have_f16c()) return f32_to_f16_hw(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

template <typename Load>
void transpose_block_copy(const Tensor& t, float* dst, Load load) {
  // t is [.., R, C] with stride[-2] == 1 (a transposed matrix): copy in
  // 32 x 32 tiles so both the reads and the writes stay in cache.
  constexpr int64_t kTile = 32;
  const int64_t R = t.shape[t.ndim - 2], C = t.shape[t.ndim - 1], cs = t.stride[t.ndim - 1];
  const int64_t batches = t.ndim == 3 ? t.shape[0] : 1;
  const int64_t bs = t.ndim == 3 ? t.stride[0] : 0;
  for (int64_t b = 0; b < batches; ++b) {
    float* out = dst + b * R * C;
    const int64_t base = b * bs;
    for (int64_t r0 = 0; r0 < R; r0 += kTile)
      for (int64_t c0 = 0; c0 < C; c0 += kTile) {
        const int64_t r1 = std::min(R, r0 + kTile), c1 = std::min(C, c0 + kTile);
        for (int64_t c = c0; c < c1; ++c)
          for (int64_t r = r0; r < r1; ++r) out[r * C + c] = load(base + r + c * cs);
      }
  }
}

}  // namespace

void gather_f32(const Tensor& t, float* dst) {
  const int64_t n = t.numel();
  if (n == 0) return;
  if ((t.ndim == 2 || t.ndim == 3) && t.stride[t.ndim - 2] == 1 && t.shape[t.ndim - 1] > 1 &&
      t.shape[t.ndim - 2] > 1) {
    switch (t.dtype) {
      case DType::kF32: {
        const auto* p = static_cast<const float*>(t.data);
        transpose_block_copy(t, dst, [p](int64_t i) { return p[i]; });
        return;
      }
      case DType::kF16: {
        const auto* p = static_cast<const uint16_t*>(t.data);
        const float* lut = f16_table();
        transpose_block_copy(t, dst, [p, lut](int64_t i) { return lut[p[i]]; });
        return;
      }
      case DType::kBF16: {
        const auto* p = static_cast<const uint16_t*>(t.data);
        transpose_block_copy(t, dst, [p](int64_t i) { return bf16_to_f32(p[i]); });
        return;
      }
      default: break;
    }
  }
  if (t.is_contiguous()) {
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(dst, t.data, static_cast<size_t>(n) * sizeof(float));
        return;
      case DType::kF16:
        f16_to_f32_n(static_cast<const uint16_t*>(t.data), dst, n);
        return;
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
      case DType::kF16:
        f32_to_f16_n(src, static_cast<uint16_t*>(t.data), n);
        return;
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

namespace {

// Calls f(k, offset) for logical elements begin + k, k < count, of a view.
template <typename F>
void for_range(const Tensor& t, int64_t begin, int64_t count, F&& f) {
  if (count <= 0) return;
  int64_t idx[kMaxDims] = {};
  int64_t off = 0, rest = begin;
  for (int d = t.ndim - 1; d >= 0; --d) {
    idx[d] = rest % t.shape[d];
    rest /= t.shape[d];
    off += idx[d] * t.stride[d];
  }
  for (int64_t k = 0; k < count; ++k) {
    f(k, off);
    for (int d = t.ndim - 1; d >= 0; --d) {
      off += t.stride[d];
      if (++idx[d] < t.shape[d]) break;
      off -= t.stride[d] * t.shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace

void gather_range_f32(const Tensor& t, int64_t begin, int64_t count, float* dst) {
  if (t.is_contiguous()) {
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(dst, static_cast<const float*>(t.data) + begin, static_cast<size_t>(count) * sizeof(float));
        return;
      case DType::kF16:
        f16_to_f32_n(static_cast<const uint16_t*>(t.data) + begin, dst, count);
        return;
      case DType::kBF16: {
        const auto* p = static_cast<const uint16_t*>(t.data) + begin;
        for (int64_t i = 0; i < count; ++i) dst[i] = bf16_to_f32(p[i]);
        return;
      }
      default:
        for (int64_t i = 0; i < count; ++i) dst[i] = load_as_f32(t.data, t.dtype, begin + i);
        return;
    }
  }
  for_range(t, begin, count, [&](int64_t k, int64_t off) { dst[k] = load_as_f32(t.data, t.dtype, off); });
}

void scatter_range_f32(const float* src, const Tensor& t, int64_t begin, int64_t count) {
  if (t.is_contiguous()) {
    switch (t.dtype) {
      case DType::kF32:
        std::memcpy(static_cast<float*>(t.data) + begin, src, static_cast<size_t>(count) * sizeof(float));
        return;
      case DType::kF16:
        f32_to_f16_n(src, static_cast<uint16_t*>(t.data) + begin, count);
        return;
      case DType::kBF16: {
        auto* p = static_cast<uint16_t*>(t.data) + begin;
        for (int64_t i = 0; i < count; ++i) p[i] = f32_to_bf16(src[i]);
        return;
      }
      default:
        for (int64_t i = 0; i < count; ++i) store_from_f32(t.data, t.dtype, begin + i, src[i]);
        return;
    }
  }
  for_range(t, begin, count, [&](int64_t k, int64_t off) { store_from_f32(t.data, t.dtype, off, src[k]); });
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

const float* as_f32_input(const Tensor& t, const Tensor& out, std::vector<float>& buf) {
  const float* p = as_f32(t, buf);
  if (p == t.data && t.data != out.data && overlaps(t, out)) {
    buf.assign(p, p + t.numel());
    p = buf.data();
  }
  return p;
}

float* scratch(int slot, size_t count) {
  thread_local std::array<std::vector<float>, 8> buffers;
  HIPQ_CHECK(slot >= 0 && slot < 8);
  auto& b = buffers[static_cast<size_t>(slot)];
  if (b.size() < count) b.resize(count);
  return b.data();
}

}  // namespace hipq::kernels::cpu
