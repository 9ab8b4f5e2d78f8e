// Shared device-side vocabulary of the hip backend: the one place where AMD
// (ROCm 5.2.3) and NVIDIA (CUDA through kernels/hip/vendors/nvidia) differ, error checks,
// storage-type loads/stores, activations and block reductions.
//
// Included only by kernels/hip/*.hip. Vendor rules kept here:
//  - warp width is `warpSize` (wave32 on RDNA, wave64 on CDNA, 32 on NVIDIA);
//    never a literal 32 in a kernel.
//  - shuffles go through HIPQ_SHFL_XOR: HIP 5.2.3 has only mask-less
//    __shfl_xor, CUDA (sm_70+) needs __shfl_xor_sync.
//  - bf16 is the project's own 16-bit storage type (hipq_bf16_t) converted by
//    bit operations, identical on both vendors and to kernels/dtype.h.
#pragma once

#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>

#include <climits>
#include <cmath>
#include <cstdint>

#include "base/status.h"
#include "kernels/dtype.h"
#include "kernels/tensor.h"

// ---- vendor mapping ---------------------------------------------------------
#if defined(__HIP_PLATFORM_NVIDIA__)
#define HIPQ_SHFL_XOR(v, lane_mask, width) __shfl_xor_sync(0xffffffffu, (v), (lane_mask), (width))
#define HIPQ_VENDOR_NVIDIA 1
#else
#define HIPQ_SHFL_XOR(v, lane_mask, width) __shfl_xor((v), (lane_mask), (width))
#define HIPQ_VENDOR_NVIDIA 0
#endif

typedef __half hipq_f16_t;
typedef uint16_t hipq_bf16_t;

// ---- runtime error checks ---------------------------------------------------
namespace hipq::kernels {
// Reports a failed runtime call (expression, function, file, line and the
// runtime's error name) and aborts. For errors that are bugs.
[[noreturn]] void hip_check_failed(hipError_t err, const char* expr, const char* func,
                                   const char* file, int line);
// The Status for a failed runtime call: ResourceExhausted for out-of-memory,
// Unavailable for no device/driver, Internal otherwise.
Status hip_error_status(hipError_t err, const char* expr, const char* func, const char* file,
                        int line);
}  // namespace hipq::kernels

#define HIPQ_HIP_CHECK(expr)                                                           \
  do {                                                                                 \
    hipError_t hipq_err_ = (expr);                                                     \
    if (hipq_err_ != hipSuccess)                                                       \
      ::hipq::kernels::hip_check_failed(hipq_err_, #expr, __func__, __FILE__, __LINE__); \
  } while (0)

#define HIPQ_HIP_RETURN_IF_ERROR(expr)                                                          \
  do {                                                                                          \
    hipError_t hipq_err_ = (expr);                                                              \
    if (hipq_err_ != hipSuccess)                                                                \
      return ::hipq::kernels::hip_error_status(hipq_err_, #expr, __func__, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: reports a bad launch configuration without syncing.
#define HIPQ_HIP_RETURN_IF_LAUNCH_FAILED() HIPQ_HIP_RETURN_IF_ERROR(hipGetLastError())

namespace hipq::kernels::dev {

// DType codes as passed to kernels (static_cast<int>(DType)).
enum : int { kDtF32 = 0, kDtF16 = 1, kDtBF16 = 2 };

__device__ __forceinline__ float bf16_bits_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Element i of a float tensor stored as f32/f16/bf16, as fp32. The dtype is
// uniform across a launch, so the branch costs no divergence.
__device__ __forceinline__ float ld(const void* p, int dt, int64_t i) {
  if (dt == kDtF32) return static_cast<const float*>(p)[i];
  if (dt == kDtF16) return __half2float(static_cast<const hipq_f16_t*>(p)[i]);
  return bf16_bits_to_f32(static_cast<const hipq_bf16_t*>(p)[i]);
}

// One f16 or bf16 element given as its bits (dt: kDtF16 or kDtBF16), as fp32.
__device__ __forceinline__ float from_16bit(int dt, uint16_t h) {
  return dt == kDtF16 ? __half2float(__ushort_as_half(h)) : bf16_bits_to_f32(h);
}

// Elements i .. i+7 of a 16-bit (f16/bf16) tensor as fp32, from one 16-byte
// load (the caller checks that p + i is 16-byte aligned).
__device__ __forceinline__ void ld8_16bit(const void* p, int dt, int64_t i, float* v) {
  const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = from_16bit(dt, static_cast<uint16_t>(w[e / 2] >> (16 * (e % 2))));
}

// Rounds once (nearest even) into the storage type.
__device__ __forceinline__ void st(void* p, int dt, int64_t i, float v) {
  if (dt == kDtF32) {
    static_cast<float*>(p)[i] = v;
  } else if (dt == kDtF16) {
    static_cast<hipq_f16_t*>(p)[i] = __float2half_rn(v);
  } else {
    static_cast<hipq_bf16_t*>(p)[i] = f32_to_bf16_bits(v);
  }
}

// Two values rounded as st() does into one 32-bit word of a 16-bit (f16 /
// bf16) tensor, lo at the lower address.
__device__ __forceinline__ uint32_t pack2_16bit(int dt, float lo, float hi) {
  const uint32_t l = dt == kDtF16 ? __half_as_ushort(__float2half_rn(lo)) : f32_to_bf16_bits(lo);
  const uint32_t h = dt == kDtF16 ? __half_as_ushort(__float2half_rn(hi)) : f32_to_bf16_bits(hi);
  return l | (h << 16);
}

// Elements i .. i+7 of a 16-bit (f16/bf16) tensor in one 16-byte store, each
// rounded as st() does; the caller checks that p + i is 16-byte aligned.
__device__ __forceinline__ void st8_16bit(void* p, int dt, int64_t i, const float* v) {
  *reinterpret_cast<uint4*>(static_cast<uint16_t*>(p) + i) =
      make_uint4(pack2_16bit(dt, v[0], v[1]), pack2_16bit(dt, v[2], v[3]), pack2_16bit(dt, v[4], v[5]),
                 pack2_16bit(dt, v[6], v[7]));
}

// Activation codes match kernels::Activation / UnaryOp numbering.
enum : int { kActNone = 0, kActGelu = 1, kActGeluTanh = 2, kActSilu = 3, kActQuickGelu = 4 };

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float quick_gelu(float x) { return x / (1.0f + expf(-1.702f * x)); }

__device__ __forceinline__ float activate(int act, float x) {
  switch (act) {
    case kActGelu: return gelu(x);
    case kActGeluTanh: return gelu_tanh(x);
    case kActSilu: return silu(x);
    case kActQuickGelu: return quick_gelu(x);
    default: return x;
  }
}

template <typename T>
__device__ __forceinline__ T warp_reduce_sum(T v) {
  for (int off = warpSize / 2; off > 0; off >>= 1) v += HIPQ_SHFL_XOR(v, off, warpSize);
  return v;
}

template <typename T>
__device__ __forceinline__ T warp_reduce_max(T v) {
  for (int off = warpSize / 2; off > 0; off >>= 1) v = fmax(v, HIPQ_SHFL_XOR(v, off, warpSize));
  return v;
}

// Sum over the whole block, returned to every thread. `scratch` holds at
// least 32 elements (1024 threads / 32 lanes); the call synchronises.
template <typename T>
__device__ T block_reduce_sum(T v, T* scratch) {
  const int lane = threadIdx.x % warpSize;
  const int wid = threadIdx.x / warpSize;
  const int nwarps = (blockDim.x + warpSize - 1) / warpSize;
  v = warp_reduce_sum(v);
  __syncthreads();
  if (lane == 0) scratch[wid] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < nwarps; ++w) total += scratch[w];
  return total;
}

template <typename T>
__device__ T block_reduce_max(T v, T* scratch) {
  const int lane = threadIdx.x % warpSize;
  const int wid = threadIdx.x / warpSize;
  const int nwarps = (blockDim.x + warpSize - 1) / warpSize;
  v = warp_reduce_max(v);
  __syncthreads();
  if (lane == 0) scratch[wid] = v;
  __syncthreads();
  T m = scratch[0];
  for (int w = 1; w < nwarps; ++w) m = fmax(m, scratch[w]);
  return m;
}

// Maps a linear index over `shape` (row-major) to element offsets in up to
// three tensors with their own strides (0 = broadcast). Passed by value.
// finish_indexer() merges dims that are contiguous in all three and sets
// `narrow` when every linear index fits 32 bits, so that offsets() divides in
// 32 bits (a 64-bit division is a long instruction sequence on GPUs).
struct Indexer {
  int ndim = 0;
  bool narrow = false;
  int64_t shape[kMaxDims] = {};
  int64_t stride[3][kMaxDims] = {};

  __device__ __forceinline__ void offsets(int64_t i, int64_t& o0, int64_t& o1, int64_t& o2) const {
    o0 = o1 = o2 = 0;
    if (narrow) {
      uint32_t j = static_cast<uint32_t>(i);
      for (int d = ndim - 1; d >= 0; --d) {
        const uint32_t s = static_cast<uint32_t>(shape[d]);
        const uint32_t q = j / s;
        const int64_t c = j - q * s;
        j = q;
        o0 += c * stride[0][d];
        o1 += c * stride[1][d];
        o2 += c * stride[2][d];
      }
      return;
    }
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t c = i % shape[d];
      i /= shape[d];
      o0 += c * stride[0][d];
      o1 += c * stride[1][d];
      o2 += c * stride[2][d];
    }
  }
};

}  // namespace hipq::kernels::dev

namespace hipq::kernels {

// Whether `p` may be read and written in 16-byte vectors.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Drops size-1 dims, merges neighbours that are contiguous in all three
// stride sets (d - 1 steps over exactly one run of d) and sets `narrow`.
// Keeps at least one dim. The linear index order is unchanged.
inline void finish_indexer(dev::Indexer& ix) {
  int64_t numel = 1;
  for (int d = 0; d < ix.ndim; ++d) numel *= ix.shape[d];
  if (numel > 1) {
    int out = 0;
    for (int d = 0; d < ix.ndim; ++d) {
      if (ix.shape[d] == 1) continue;
      bool merge = out > 0;
      for (int j = 0; j < 3 && merge; ++j) merge = ix.stride[j][out - 1] == ix.stride[j][d] * ix.shape[d];
      if (merge) {
        ix.shape[out - 1] *= ix.shape[d];
        for (int j = 0; j < 3; ++j) ix.stride[j][out - 1] = ix.stride[j][d];
      } else {
        ix.shape[out] = ix.shape[d];
        for (int j = 0; j < 3; ++j) ix.stride[j][out] = ix.stride[j][d];
        ++out;
      }
    }
    ix.ndim = out;
  }
  if (ix.ndim == 0 || numel <= 1) {
    ix.ndim = 1;
    ix.shape[0] = numel < 1 ? 1 : numel;
  }
  ix.narrow = numel <= INT32_MAX;
}

// An Indexer over `shape_of`'s shape for up to three tensors of that shape
// (strides taken from each; a null tensor gets stride 0), dims merged by
// finish_indexer: when every given tensor is contiguous it is one dimension.
inline dev::Indexer make_indexer(const Tensor& shape_of, const Tensor* t0, const Tensor* t1 = nullptr,
                                 const Tensor* t2 = nullptr) {
  dev::Indexer ix;
  const Tensor* ts[3] = {t0, t1, t2};
  ix.ndim = shape_of.ndim;
  for (int d = 0; d < shape_of.ndim; ++d) {
    ix.shape[d] = shape_of.shape[d];
    for (int j = 0; j < 3; ++j) ix.stride[j][d] = ts[j] ? ts[j]->stride[d] : 0;
  }
  finish_indexer(ix);
  return ix;
}

}  // namespace hipq::kernels
