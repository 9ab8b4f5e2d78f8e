// upsample_nearest2x: [N, C, H, W] -> [N, C, 2H, 2W], each input pixel
// repeated in a 2x2 block. x may be strided. Contiguous 16-bit x and y of
// one type with W a multiple of 4 take a vector kernel: 4 input pixels (8
// bytes) a thread, written as one 16-byte piece to each of the two rows.
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void upsample2x_kernel(const void* __restrict__ x, int xdt, int64_t sn, int64_t sc, int64_t sh,
                                  int64_t sw, void* __restrict__ y, int ydt, int64_t n, int64_t C, int64_t Ho,
                                  int64_t Wo) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t r = i;
    const int64_t wo = r % Wo;
    r /= Wo;
    const int64_t ho = r % Ho;
    r /= Ho;
    const int64_t c = r % C;
    const int64_t b = r / C;
    dev::st(y, ydt, i, dev::ld(x, xdt, b * sn + c * sc + (ho >> 1) * sh + (wo >> 1) * sw));
  }
}

// rows4: N * C * H * (W / 4) pieces of 4 input pixels; W4 = W / 4.
__global__ void upsample2x16_vec_kernel(const uint2* __restrict__ x, uint4* __restrict__ y, uint32_t rows4,
                                        uint32_t W4) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < rows4; i += gridDim.x * blockDim.x) {
    const uint2 v = x[i];
    const uint32_t row = i / W4, w4 = i - row * W4;  // input row (n, c, h), piece in it
    const uint32_t lo = (v.x & 0xffffu) | (v.x << 16), hi = (v.x >> 16) | (v.x & 0xffff0000u);
    const uint32_t lo2 = (v.y & 0xffffu) | (v.y << 16), hi2 = (v.y >> 16) | (v.y & 0xffff0000u);
    const uint4 out = make_uint4(lo, hi, lo2, hi2);
    // Output rows 2 * row and 2 * row + 1, each 2W wide: W4 pieces of 16 bytes.
    const uint64_t o = static_cast<uint64_t>(row) * 2 * W4 + w4;
    y[o] = out;
    y[o + W4] = out;
  }
}

}  // namespace

Status hip_upsample_nearest2x(HipContext& ctx, const Tensor& x, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(x, "upsample_nearest2x", "x"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "upsample_nearest2x", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "upsample_nearest2x", "y"));
  if (x.ndim != 4 || y.ndim != 4 || y.shape[0] != x.shape[0] || y.shape[1] != x.shape[1] ||
      y.shape[2] != 2 * x.shape[2] || y.shape[3] != 2 * x.shape[3])
    return shape_mismatch("upsample_nearest2x", "y must be [N, C, 2H, 2W] of x [N, C, H, W]", x, y);
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  const bool same16 = x.dtype == y.dtype && (x.dtype == DType::kF16 || x.dtype == DType::kBF16);
  if (same16 && x.is_contiguous() && x.shape[3] % 4 == 0 && aligned16(x.data) && aligned16(y.data) &&
      x.numel() / 4 < 0x7fffffffLL) {
    const int64_t rows4 = x.numel() / 4;
    upsample2x16_vec_kernel<<<ctx.grid_for(rows4, block), block, 0, ctx.stream>>>(
        static_cast<const uint2*>(x.data), static_cast<uint4*>(y.data), static_cast<uint32_t>(rows4),
        static_cast<uint32_t>(x.shape[3] / 4));
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
    return Status::Ok();
  }
  upsample2x_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      x.data, static_cast<int>(x.dtype), x.stride[0], x.stride[1], x.stride[2], x.stride[3], y.data,
      static_cast<int>(y.dtype), n, y.shape[1], y.shape[2], y.shape[3]);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
