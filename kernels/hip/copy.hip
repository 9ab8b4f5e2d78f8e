// copy: strided copy with dtype conversion (the layout transforms and the
// f32/f16/bf16 casts). Same dtype copies move raw bits (any dtype); casts
// go through fp32 and round once.
#include <algorithm>
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

template <typename E>
__global__ void copy_raw_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t n, dev::Indexer ix) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t os, od, unused;
    ix.offsets(i, os, od, unused);
    dst[od] = src[os];
  }
}

__global__ void copy_cast_kernel(const void* __restrict__ src, int sdt, void* __restrict__ dst, int ddt, int64_t n,
                                 dev::Indexer ix) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t os, od, unused;
    ix.offsets(i, os, od, unused);
    dev::st(dst, ddt, od, dev::ld(src, sdt, os));
  }
}

// dst[b][p][q] = src[b * sb + p + q * sq] (dst contiguous, src contiguous
// along p): the layout transposes (NCHW <-> tokens). A 32 x 32 tile goes
// through shared memory so that src is read and dst written along rows.
constexpr int kTile = 32, kTileRows = 8;
template <typename E>
__global__ void transpose_kernel(const E* __restrict__ src, E* __restrict__ dst, int P, int Q, int64_t sb,
                                 int64_t sq) {
  __shared__ E tile[kTile][kTile + 1];
  const int64_t b = blockIdx.z;
  const int p0 = blockIdx.y * kTile, q0 = blockIdx.x * kTile;
  const E* s = src + b * sb;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int p = p0 + threadIdx.x, q = q0 + k;
    if (p < P && q < Q) tile[k][threadIdx.x] = s[p + q * sq];
  }
  __syncthreads();
  E* d = dst + b * static_cast<int64_t>(P) * Q;
  for (int k = threadIdx.y; k < kTile; k += kTileRows) {
    const int q = q0 + threadIdx.x, p = p0 + k;
    if (p < P && q < Q) d[static_cast<int64_t>(p) * Q + q] = tile[threadIdx.x][k];
  }
}

// The copy is a batched transpose when, with dims merged, dst is [B,] P, Q
// contiguous and src steps by 1 along P. Fills B, P, Q and src's strides.
bool as_transpose(const dev::Indexer& ix, int64_t& B, int64_t& P, int64_t& Q, int64_t& sb, int64_t& sq) {
  if (ix.ndim != 2 && ix.ndim != 3) return false;
  const int o = ix.ndim - 2;  // P's dim
  P = ix.shape[o];
  Q = ix.shape[o + 1];
  B = o ? ix.shape[0] : 1;
  sb = o ? ix.stride[0][0] : 0;
  sq = ix.stride[0][o + 1];
  const bool dst_dense = ix.stride[1][o + 1] == 1 && ix.stride[1][o] == Q && (!o || ix.stride[1][0] == P * Q);
  return dst_dense && ix.stride[0][o] == 1 && P <= INT32_MAX && Q <= INT32_MAX && B <= 65535 &&
         (P + kTile - 1) / kTile <= 65535;
}

template <typename E>
hipError_t launch_transpose(HipContext& ctx, const Tensor& src, Tensor& dst, int64_t B, int64_t P, int64_t Q,
                            int64_t sb, int64_t sq) {
  const dim3 grid(static_cast<unsigned>((Q + kTile - 1) / kTile), static_cast<unsigned>((P + kTile - 1) / kTile),
                  static_cast<unsigned>(B));
  transpose_kernel<E><<<grid, dim3(kTile, kTileRows), 0, ctx.stream>>>(
      static_cast<const E*>(src.data), static_cast<E*>(dst.data), static_cast<int>(P), static_cast<int>(Q), sb, sq);
  return hipGetLastError();
}

template <typename E>
hipError_t launch_raw(HipContext& ctx, const Tensor& src, Tensor& dst, int64_t n, const dev::Indexer& ix) {
  const int block = ctx.tuning->elementwise_block;
  copy_raw_kernel<E><<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(static_cast<const E*>(src.data),
                                                                        static_cast<E*>(dst.data), n, ix);
  return hipGetLastError();
}

}  // namespace

Status hip_copy(HipContext& ctx, const Tensor& src, Tensor& dst) {
  if (src.location != Location::kDevice || dst.location != Location::kDevice)
    return Status::InvalidArgument("copy: src " + src.describe() + " and dst " + dst.describe() +
                                   " must both be device tensors");
  if (!src.same_shape(dst)) return shape_mismatch("copy", "src and dst shapes differ", src, dst);
  const int64_t n = src.numel();
  if (n == 0) return Status::Ok();
  const dev::Indexer ix = make_indexer(src, &src, &dst);
  if (src.dtype == dst.dtype) {
    if (src.is_contiguous() && dst.is_contiguous()) {
      HIPQ_HIP_RETURN_IF_ERROR(hipMemcpyAsync(dst.data, src.data, src.nbytes(), hipMemcpyDeviceToDevice, ctx.stream));
      return Status::Ok();
    }
    // Rows contiguous in both, each row's start strided (one part of a
    // channel concat, a slice): one 2-D copy at copy bandwidth.
    const int64_t es = static_cast<int64_t>(dtype_size(src.dtype));
    if (ix.ndim == 2 && ix.stride[0][1] == 1 && ix.stride[1][1] == 1 && ix.stride[0][0] >= ix.shape[1] &&
        ix.stride[1][0] >= ix.shape[1] && std::max(ix.stride[0][0], ix.stride[1][0]) * es <= INT32_MAX) {
      HIPQ_HIP_RETURN_IF_ERROR(hipMemcpy2DAsync(dst.data, static_cast<size_t>(ix.stride[1][0] * es), src.data,
                                                static_cast<size_t>(ix.stride[0][0] * es),
                                                static_cast<size_t>(ix.shape[1] * es),
                                                static_cast<size_t>(ix.shape[0]), hipMemcpyDeviceToDevice,
                                                ctx.stream));
      return Status::Ok();
    }
    int64_t B = 0, P = 0, Q = 0, sb = 0, sq = 0;
    if (dst.is_contiguous() && as_transpose(ix, B, P, Q, sb, sq)) {
      switch (dtype_size(src.dtype)) {
        case 2: HIPQ_HIP_RETURN_IF_ERROR(launch_transpose<uint16_t>(ctx, src, dst, B, P, Q, sb, sq)); return Status::Ok();
        case 4: HIPQ_HIP_RETURN_IF_ERROR(launch_transpose<uint32_t>(ctx, src, dst, B, P, Q, sb, sq)); return Status::Ok();
        default: break;
      }
    }
    switch (dtype_size(src.dtype)) {
      case 1: HIPQ_HIP_RETURN_IF_ERROR(launch_raw<uint8_t>(ctx, src, dst, n, ix)); break;
      case 2: HIPQ_HIP_RETURN_IF_ERROR(launch_raw<uint16_t>(ctx, src, dst, n, ix)); break;
      case 4: HIPQ_HIP_RETURN_IF_ERROR(launch_raw<uint32_t>(ctx, src, dst, n, ix)); break;
      case 8: HIPQ_HIP_RETURN_IF_ERROR(launch_raw<uint64_t>(ctx, src, dst, n, ix)); break;
      default: return Status::InvalidArgument("copy: unsupported dtype of " + src.describe());
    }
    return Status::Ok();
  }
  HIPQ_RETURN_IF_ERROR(require_device_float(src, "copy (cast)", "src"));
  HIPQ_RETURN_IF_ERROR(require_device_float(dst, "copy (cast)", "dst"));
  const int block = ctx.tuning->elementwise_block;
  copy_cast_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(src.data, static_cast<int>(src.dtype), dst.data,
                                                                      static_cast<int>(dst.dtype), n, ix);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
