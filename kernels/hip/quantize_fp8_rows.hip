// quantize_fp8_rows: the row's largest magnitude (a NaN anywhere makes the
// row NaN, as torch's amax does), then the row's multiplier and the codes
// through kernels/fp8_e4m3.h, the functions the cpu backend runs: both write
// the same bytes (a maximum does not depend on the order it is taken in).
// Two kernels: 16-bit rows of a multiple of 8 elements on 16-byte boundaries
// (every fp8 linear layer's input) take one warp a row, 16-byte loads and
// 8-byte code stores, reading the row twice (the second time from cache),
// the codes of a row without NaN from the hardware's e4m3 conversion;
// any other row takes one block a row, an element a thread.
#include <string>

#include "kernels/fp8_e4m3.h"
#include "kernels/hip/e4m3x2.h"
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) quantize_fp8_rows_kernel(const void* x, int dt, int64_t rows, int64_t K,
                                                                      int64_t ld, uint8_t* codes, float* scales) {
  __shared__ float red[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * ld;
    float amax = 0.0f;
    int nan = 0;
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) {
      const float v = dev::ld(x, dt, base + k);
      nan |= isnan(v) ? 1 : 0;
      amax = fmaxf(amax, fabsf(v));
    }
    const float any_nan = dev::block_reduce_max(nan ? 1.0f : 0.0f, red);
    amax = dev::block_reduce_max(amax, red);
    const float s = fp8::row_scale(any_nan > 0.0f ? dev::f32_from_bits(0x7fc00000u) : amax);
    for (int64_t k = threadIdx.x; k < K; k += blockDim.x) codes[r * K + k] = fp8::quantize(dev::ld(x, dt, base + k), s);
    if (threadIdx.x == 0) scales[r] = fp8::dequant_scale(s);
    __syncthreads();  // red is reused by the next row
  }
}

// One warp a row (grid-stride over rows), 8 elements a lane at a time.
__global__ void __launch_bounds__(kThreads) quantize_fp8_rows16_kernel(const uint16_t* __restrict__ x, int dt,
                                                                        int64_t rows, int64_t K, int64_t ld,
                                                                        uint8_t* __restrict__ codes,
                                                                        float* __restrict__ scales) {
  const int lane = threadIdx.x % warpSize;
  const int warps = blockDim.x / warpSize;
  const int64_t chunks = K / 8;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * warps + threadIdx.x / warpSize; r < rows;
       r += static_cast<int64_t>(gridDim.x) * warps) {
    const uint16_t* row = x + r * ld;
    float amax = 0.0f;
    float nan = 0.0f;
    // Unrolled so that a lane's loads of a row (3 at K = 640) are in flight together.
#pragma unroll 4
    for (int64_t c = lane; c < chunks; c += warpSize) {
      float v[8];
      dev::ld8_16bit(row, dt, c * 8, v);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        nan = isnan(v[e]) ? 1.0f : nan;
        amax = fmaxf(amax, fabsf(v[e]));
      }
    }
    nan = dev::warp_reduce_max(nan);
    amax = dev::warp_reduce_max(amax);
    const float s = fp8::row_scale(nan > 0.0f ? dev::f32_from_bits(0x7fc00000u) : amax);
    uint8_t* out = codes + r * K;
    const bool finite_row = nan == 0.0f;
#pragma unroll 4
    for (int64_t c = lane; c < chunks; c += warpSize) {
      float v[8];
      dev::ld8_16bit(row, dt, c * 8, v);
      *reinterpret_cast<uint2*>(out + c * 8) = dev::e4m3x8(v, s, finite_row);
    }
    if (lane == 0) scales[r] = fp8::dequant_scale(s);
  }
}

}  // namespace

Status hip_quantize_fp8_rows(HipContext& ctx, const Tensor& x, Tensor& codes, Tensor& scales) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x, "quantize_fp8_rows", "x"));
  for (const Tensor* t : {&codes, &scales})
    if (t->location != Location::kDevice)
      return Status::InvalidArgument("quantize_fp8_rows: " + t->describe() +
                                     " is not device memory (allocate it from the hip backend)");
  HIPQ_RETURN_IF_ERROR(check_quantize_fp8_rows(x, codes, scales));
  const int64_t rows = x.shape[0], K = x.shape[1];
  if (rows == 0) return Status::Ok();
  const bool vec16 = (x.dtype == DType::kF16 || x.dtype == DType::kBF16) && K % 8 == 0 && x.stride[0] % 8 == 0 &&
                     reinterpret_cast<uintptr_t>(x.data) % 16 == 0 && reinterpret_cast<uintptr_t>(codes.data) % 8 == 0;
  if (vec16) {
    const int64_t warps = kThreads / ctx.warp_size;
    const int64_t blocks = (rows + warps - 1) / warps;
    const unsigned grid16 = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);
    quantize_fp8_rows16_kernel<<<grid16, kThreads, 0, ctx.stream>>>(
        static_cast<const uint16_t*>(x.data), static_cast<int>(x.dtype), rows, K, x.stride[0],
        static_cast<uint8_t*>(codes.data), static_cast<float*>(scales.data));
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  }
  const unsigned grid = static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
  quantize_fp8_rows_kernel<<<grid, kThreads, 0, ctx.stream>>>(x.data, static_cast<int>(x.dtype), rows, K, x.stride[0],
                                                              static_cast<uint8_t*>(codes.data),
                                                              static_cast<float*>(scales.data));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
