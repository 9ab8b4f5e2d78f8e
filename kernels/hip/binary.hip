// binary: y = a (op) b with b broadcast to a's shape (numpy rules, b's dims
// right-aligned; a size-1 dim of b repeats). a and b may be strided.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__device__ __forceinline__ float binary_apply(int op, float va, float vb) {
  switch (op) {
    case static_cast<int>(BinaryOp::kAdd): return va + vb;
    case static_cast<int>(BinaryOp::kSub): return va - vb;
    case static_cast<int>(BinaryOp::kMul): return va * vb;
    default: return va / vb;
  }
}

// a, b and y contiguous in one 16-bit type, 8 elements a thread in 16-byte
// loads and stores. b is either a's shape or, with `inner` > 0, one value
// per run of `inner` elements of a (inner a multiple of 8: a [N, C, H, W]
// plus [N, C, 1, 1]).
__global__ void binary16_vec8_kernel(int op, const uint4* __restrict__ a, const void* __restrict__ b,
                                     uint4* __restrict__ y, int dt, int64_t n8, int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 av = a[i];
    uint4 bv = make_uint4(0, 0, 0, 0);
    float vb_row = 0.0f;
    if (inner > 0) {
      vb_row = dev::ld(b, dt, i * 8 / inner);
    } else {
      bv = static_cast<const uint4*>(b)[i];
    }
    const uint16_t* ah = reinterpret_cast<const uint16_t*>(&av);
    const uint16_t* bh = reinterpret_cast<const uint16_t*>(&bv);
    float r[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      r[e] = binary_apply(op, dev::from_16bit(dt, ah[e]), inner > 0 ? vb_row : dev::from_16bit(dt, bh[e]));
    dev::st8_16bit(y, dt, i * 8, r);
  }
}

__global__ void binary_kernel(int op, const void* __restrict__ a, int adt, const void* __restrict__ b, int bdt,
                              void* __restrict__ y, int ydt, int64_t n, dev::Indexer ix) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t oa, ob, oy;
    ix.offsets(i, oa, ob, oy);
    const float va = dev::ld(a, adt, oa);
    const float vb = dev::ld(b, bdt, ob);
    dev::st(y, ydt, oy, binary_apply(op, va, vb));
  }
}

}  // namespace

Status hip_binary(HipContext& ctx, BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(a, "binary", "a"));
  HIPQ_RETURN_IF_ERROR(require_device_float(b, "binary", "b"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "binary", "y"));
  if (!a.same_shape(y)) return shape_mismatch("binary", "y must have a's shape", a, y);
  if (b.ndim > a.ndim) return shape_mismatch("binary", "b has more dims than a (cannot broadcast)", b, a);
  if (static_cast<int>(op) > static_cast<int>(BinaryOp::kDiv))
    return Status::InvalidArgument("binary: unknown op code " + std::to_string(static_cast<int>(op)));
  dev::Indexer ix;
  ix.ndim = a.ndim;
  const int off = a.ndim - b.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    ix.shape[d] = a.shape[d];
    ix.stride[0][d] = a.stride[d];
    ix.stride[2][d] = y.stride[d];
    const int bd = d - off;
    if (bd < 0 || b.shape[bd] == 1) {
      ix.stride[1][d] = 0;
    } else if (b.shape[bd] == a.shape[d]) {
      ix.stride[1][d] = b.stride[bd];
    } else {
      return shape_mismatch("binary", "b does not broadcast to a", b, a);
    }
  }
  finish_indexer(ix);
  const int64_t n = a.numel();
  if (n == 0) return Status::Ok();
  const int block = ctx.tuning->elementwise_block;
  // The residual and per-channel adds: contiguous 16-bit operands of one type.
  const bool one_16bit_type =
      a.dtype == b.dtype && a.dtype == y.dtype && (a.dtype == DType::kF16 || a.dtype == DType::kBF16);
  if (one_16bit_type && n % 8 == 0 && a.is_contiguous() && y.is_contiguous() && aligned16(a.data) &&
      aligned16(y.data)) {
    int64_t inner = -1;
    if (ix.ndim == 1 && ix.stride[1][0] == 1 && aligned16(b.data)) {
      inner = 0;  // b has a's shape
    } else if (ix.ndim == 2 && ix.stride[1][0] == 1 && ix.stride[1][1] == 0 && ix.shape[1] % 8 == 0) {
      inner = ix.shape[1];  // one b value per row of a
    }
    if (inner >= 0) {
      const int64_t n8 = n / 8;
      binary16_vec8_kernel<<<ctx.grid_for(n8, block), block, 0, ctx.stream>>>(
          static_cast<int>(op), static_cast<const uint4*>(a.data), b.data, static_cast<uint4*>(y.data),
          static_cast<int>(a.dtype), n8, inner);
      HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
      return Status::Ok();
    }
  }
  binary_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      static_cast<int>(op), a.data, static_cast<int>(a.dtype), b.data, static_cast<int>(b.dtype), y.data,
      static_cast<int>(y.dtype), n, ix);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
