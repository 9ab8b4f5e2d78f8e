// embedding: ids [N...] (i32/i64) index rows of table [V, D] -> y [N..., D].
// Out-of-range ids are clamped to [0, V-1] (checking them would need a host
// sync; the parity harness reports the cpu backend's error instead).
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

__global__ void embedding_kernel(const void* __restrict__ ids, bool ids64, const void* __restrict__ table, int tdt,
                                 int64_t tr, int64_t tc, void* __restrict__ y, int ydt, int64_t n, int64_t V,
                                 int64_t D) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / D, c = i - r * D;
    int64_t id = ids64 ? static_cast<const int64_t*>(ids)[r] : static_cast<const int32_t*>(ids)[r];
    id = id < 0 ? 0 : (id >= V ? V - 1 : id);
    dev::st(y, ydt, i, dev::ld(table, tdt, id * tr + c * tc));
  }
}

}  // namespace

Status hip_embedding(HipContext& ctx, const Tensor& ids_in, const Tensor& table, Tensor& y) {
  HIPQ_RETURN_IF_ERROR(require_device_float(table, "embedding", "table"));
  HIPQ_RETURN_IF_ERROR(require_device_float(y, "embedding", "y"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(y, "embedding", "y"));
  if (ids_in.location != Location::kDevice || (ids_in.dtype != DType::kI32 && ids_in.dtype != DType::kI64))
    return Status::InvalidArgument("embedding: ids " + ids_in.describe() + " must be i32 or i64 device memory");
  bool ok = table.ndim == 2 && y.ndim == ids_in.ndim + 1 && y.dim(-1) == table.shape[1];
  for (int d = 0; ok && d < ids_in.ndim; ++d) ok = y.shape[d] == ids_in.shape[d];
  if (!ok)
    return Status::InvalidArgument("embedding: y " + y.describe() + " must be ids.shape + [D] for ids " +
                                   ids_in.describe() + " and table " + table.describe());
  const int64_t n = y.numel();
  if (n == 0) return Status::Ok();
  if (table.shape[0] == 0) return Status::InvalidArgument("embedding: empty table " + table.describe());
  Buffer hold;
  HIPQ_ASSIGN_OR_RETURN(Tensor ids, contiguous_or_copy(ctx, ids_in, hold));
  const int block = ctx.tuning->elementwise_block;
  embedding_kernel<<<ctx.grid_for(n, block), block, 0, ctx.stream>>>(
      ids.data, ids.dtype == DType::kI64, table.data, static_cast<int>(table.dtype), table.stride[0],
      table.stride[1], y.data, static_cast<int>(y.dtype), n, table.shape[0], table.shape[1]);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
