// parity_sums: fp64 sums over two same-shape tensors for parity metrics
// (dot, norms, squared difference, max |a-b|, non-finite counts). Each block
// reduces a grid-stride share into one row of partials; a single block then
// sums the rows in a fixed order, so the result is deterministic. Elements
// where a or b is NaN/Inf are counted and left out of the sums and the max.
// This op returns host values, so it waits for its own result.
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

constexpr int kFields = 7;  // dot, na2, nb2, ssd, maxabs, nonfinite_a, nonfinite_b
constexpr int kBlock = 256;

__global__ void __launch_bounds__(kBlock) parity_partial_kernel(const void* __restrict__ a, int adt,
                                                                const void* __restrict__ b, int bdt, int64_t n,
                                                                dev::Indexer ix, double* __restrict__ partial) {
  __shared__ double scratch[32];
  double f[kFields] = {0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t oa, ob, u;
    ix.offsets(i, oa, ob, u);
    const double va = dev::ld(a, adt, oa);
    const double vb = dev::ld(b, bdt, ob);
    const bool fa = isfinite(va), fb = isfinite(vb);
    if (!fa) f[5] += 1;
    if (!fb) f[6] += 1;
    if (!fa || !fb) continue;
    f[0] += va * vb;
    f[1] += va * va;
    f[2] += vb * vb;
    const double d = va - vb;
    f[3] += d * d;
    f[4] = fmax(f[4], fabs(d));
  }
  for (int k = 0; k < kFields; ++k) {
    const double v = k == 4 ? dev::block_reduce_max(f[k], scratch) : dev::block_reduce_sum(f[k], scratch);
    if (threadIdx.x == 0) partial[blockIdx.x * kFields + k] = v;
  }
}

__global__ void __launch_bounds__(kBlock) parity_final_kernel(const double* __restrict__ partial, int rows,
                                                              double* __restrict__ result) {
  __shared__ double scratch[32];
  for (int k = 0; k < kFields; ++k) {
    double v = 0;
    for (int r = threadIdx.x; r < rows; r += blockDim.x)
      v = k == 4 ? fmax(v, partial[r * kFields + k]) : v + partial[r * kFields + k];
    v = k == 4 ? dev::block_reduce_max(v, scratch) : dev::block_reduce_sum(v, scratch);
    if (threadIdx.x == 0) result[k] = v;
  }
}

}  // namespace

Result<ParitySums> hip_parity_sums(HipContext& ctx, const Tensor& a, const Tensor& b) {
  HIPQ_RETURN_IF_ERROR(require_device_float(a, "parity_sums", "a"));
  HIPQ_RETURN_IF_ERROR(require_device_float(b, "parity_sums", "b"));
  if (!a.same_shape(b)) return shape_mismatch("parity_sums", "a and b shapes differ", a, b);
  ParitySums out;
  const int64_t n = a.numel();
  out.count = n;
  if (n == 0) return out;
  const unsigned blocks = ctx.grid_for(n, kBlock);
  HIPQ_ASSIGN_OR_RETURN(Buffer scratch, ctx.backend->allocate((static_cast<size_t>(blocks) + 1) * kFields * sizeof(double)));
  double* partial = static_cast<double*>(scratch.data());
  double* result = partial + static_cast<size_t>(blocks) * kFields;
  parity_partial_kernel<<<blocks, kBlock, 0, ctx.stream>>>(a.data, static_cast<int>(a.dtype), b.data,
                                                            static_cast<int>(b.dtype), n, make_indexer(a, &a, &b),
                                                            partial);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  parity_final_kernel<<<1, kBlock, 0, ctx.stream>>>(partial, static_cast<int>(blocks), result);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  double host[kFields];
  HIPQ_HIP_RETURN_IF_ERROR(hipMemcpyAsync(host, result, sizeof(host), hipMemcpyDeviceToHost, ctx.stream));
  HIPQ_HIP_RETURN_IF_ERROR(hipStreamSynchronize(ctx.stream));
  out.dot = host[0];
  out.norm_a2 = host[1];
  out.norm_b2 = host[2];
  out.sum_sq_diff = host[3];
  out.max_abs_diff = host[4];
  out.nonfinite_a = static_cast<int64_t>(host[5]);
  out.nonfinite_b = static_cast<int64_t>(host[6]);
  return out;
}

}  // namespace hipq::kernels
