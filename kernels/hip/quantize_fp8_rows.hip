// quantize_fp8_rows: one block a row (grid-stride over rows). The block's
// largest magnitude (a NaN anywhere makes the row NaN, as torch's amax does),
// then the row's multiplier and the codes through kernels/fp8_e4m3.h, the
// functions the cpu backend runs: both write the same bytes.
#include <string>

#include "kernels/fp8_e4m3.h"
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
  const unsigned grid = static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16);
  quantize_fp8_rows_kernel<<<grid, kThreads, 0, ctx.stream>>>(x.data, static_cast<int>(x.dtype), rows, K, x.stride[0],
                                                              static_cast<uint8_t*>(codes.data),
                                                              static_cast<float*>(scales.data));
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
