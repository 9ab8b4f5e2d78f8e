// copy: strided copy with dtype conversion (the layout transforms and the
// f32/f16/bf16 casts). Same dtype copies move raw bits (any dtype); casts
// go through fp32 and round once.
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
