// matmul_fp8: e4m3 codes of a [M, K] and b [N, K] with their row scales,
// out = ep(scale_a[m] * scale_b[n] * sum_k a b) (Backend::matmul_fp8). Only
// where HipContext::fp8 holds (compute capability 9.0 of an sm_90a build);
// elsewhere FailedPrecondition with the device's reason. The route
// (choose_fp8_route, gemm_route.h): the Hopper wgmma kernel fed by TMA
// (gemm/gemm_tma_fp8.h; MatEpilogue16 where out is one 16-bit type), its
// cp.async form (gemm/gemm_wgmma_fp8.h) where the driver declines a tensor
// map or HIPQ_GEMM_TMA=0, or, for operands neither takes, the plain kernel
// below: one thread an output, codes decoded by bit operations.
#include <string>

#include "kernels/fp8_e4m3.h"
#include "kernels/hip/gemm/gemm_tma_fp8.h"
#include "kernels/hip/gemm/gemm_wgmma_fp8.h"
#include "kernels/hip/gemm/mat_epilogue16.h"
#include "kernels/hip/gemm_route.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

constexpr int kSimtTile = 16;

// out(m, n) for one (m, n) a thread, 16 x 16 threads a block, the codes of a
// 16 x 16 piece of both operands decoded into shared memory per k step.
__global__ void __launch_bounds__(kSimtTile * kSimtTile)
    matmul_fp8_simt_kernel(int M, int N, int K, const uint8_t* a, const uint8_t* b, const float* sa, const float* sb,
                           MatEpilogue ep) {
  __shared__ float at[kSimtTile][kSimtTile + 1];
  __shared__ float bt[kSimtTile][kSimtTile + 1];
  const int tx = threadIdx.x % kSimtTile, ty = threadIdx.x / kSimtTile;
  const int m = blockIdx.y * kSimtTile + ty, n = blockIdx.x * kSimtTile + tx;
  const int bn = blockIdx.x * kSimtTile + ty;  // the b row this thread loads
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += kSimtTile) {
    const int k = k0 + tx;
    at[ty][tx] = m < M && k < K ? fp8::f32_from_e4m3(a[static_cast<int64_t>(m) * K + k]) : 0.0f;
    bt[ty][tx] = bn < N && k < K ? fp8::f32_from_e4m3(b[static_cast<int64_t>(bn) * K + k]) : 0.0f;
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSimtTile; ++kk) acc = fmaf(at[ty][kk], bt[tx][kk], acc);
    __syncthreads();
  }
  __shared__ float ct[kSimtTile][kSimtTile + 1];
  const bool in = m < M && n < N;
  const float v = in ? acc * sa[m] * sb[n] : 0.0f;
  ct[ty][tx] = v;
  __syncthreads();
  if (!in) return;
  if (!ep.geglu) {
    ep(0, m, n, v);
    return;
  }
  // geglu_pairs: the even column's thread takes its pair's gate from the next column.
  if (n % 2 == 0 && n + 1 < N) {
    float val = ep.alpha * v, g = ep.alpha * ct[ty][tx + 1];
    if (ep.bias) {
      val += dev::ld(ep.bias, ep.bias_dt, n * ep.bias_s);
      g += dev::ld(ep.bias, ep.bias_dt, (n + 1) * ep.bias_s);
    }
    dev::st(ep.out, ep.dt, m * ep.om + n / 2, val * dev::gelu(g));
  }
}

}  // namespace

Status hip_matmul_fp8(HipContext& ctx, const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o) {
  const Tensor* all[] = {&a.codes, &a.scales, &b.codes, &b.scales, &out, o.bias, o.residual};
  for (const Tensor* t : all)
    if (t && t->location != Location::kDevice)
      return Status::InvalidArgument("matmul_fp8: " + t->describe() +
                                     " is not device memory (allocate it from the hip backend)");
  HIPQ_RETURN_IF_ERROR(check_matmul_fp8(a, b, out, o));
  if (!ctx.fp8) return Status::FailedPrecondition("matmul_fp8: " + ctx.fp8_refusal);
  const int64_t M = a.codes.shape[0], K = a.codes.shape[1], N = b.codes.shape[0];
  if (M == 0 || N == 0) return Status::Ok();
  if (M > (int64_t{1} << 30) || N > (int64_t{1} << 30) || K > (int64_t{1} << 30))
    return Status::InvalidArgument("matmul_fp8: problem too large for one launch: out " + out.describe());
  const int64_t out_n = o.geglu_pairs ? N / 2 : N;

  MatEpilogue ep{};
  ep.out = out.data;
  ep.dt = static_cast<int>(out.dtype);
  ep.ob = M * out_n;
  ep.om = out_n;
  ep.geglu = o.geglu_pairs ? 1 : 0;
  ep.alpha = o.alpha;
  ep.act = static_cast<int>(o.activation);
  if (o.bias) {
    ep.bias = o.bias->data;
    ep.bias_dt = static_cast<int>(o.bias->dtype);
    ep.bias_s = o.bias->stride[0];
  }
  if (o.residual) {
    ep.res = o.residual->data;
    ep.res_dt = static_cast<int>(o.residual->dtype);
    ep.rm = o.residual->stride[0];
    ep.rn = o.residual->stride[1];
  }

  GemmProblem p;
  p.a_dtype = DType::kU8;
  p.b_dtype = DType::kU8;
  p.M = M;
  p.N = N;
  p.K = K;
  p.a_sm = K;
  p.a_sk = 1;
  p.b_sk = 1;
  p.b_sn = K;
  p.a_aligned16 = aligned16(a.codes.data);
  p.b_aligned16 = aligned16(b.codes.data);
  p.geglu_pairs = o.geglu_pairs;
  GemmDevice d;
  d.multiprocessors = ctx.multiprocessors;
  d.matrix_units = ctx.matrix_units;
  d.wgmma = ctx.wgmma;
  d.fp8 = ctx.fp8;
  d.gemm_tma = ctx.switches.gemm_tma;
  [[maybe_unused]] const GemmRoute route = choose_fp8_route(p, d);
  const auto* sa = static_cast<const float*>(a.scales.data);
  const auto* sb = static_cast<const float*>(b.scales.data);
#if HIPQ_VENDOR_NVIDIA
  if (route.kernel == GemmKernel::kFp8TmaWgmma || route.kernel == GemmKernel::kFp8Wgmma) {
    dev::CodeRowsFill fa, fb;
    fa.p = static_cast<const uint8_t*>(a.codes.data);
    fa.ld = K;
    fa.rows = static_cast<int>(M);
    fa.K = static_cast<int>(K);
    fb.p = static_cast<const uint8_t*>(b.codes.data);
    fb.ld = K;
    fb.rows = static_cast<int>(N);
    fb.K = static_cast<int>(K);
    if (route.kernel == GemmKernel::kFp8TmaWgmma) {
      dev::GemmTmaFp8Plan plan;
      if (dev::prepare_gemm_tma_fp8(plan, fa, fb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K),
                                    ctx.multiprocessors, ctx.switches.gemm_tma_fp8_n)) {
        // The compact epilogue, in registers (RegisterEpilogue16), where out
        // (and bias, residual) are one 16-bit type: the general one's
        // per-element dtype switches cost the f16 TMA kernel half its speed
        // at K = 640 (kernels/dev/README.md).
        const auto launch = [&](const auto& epilogue) {
          return dev::launch_gemm_tma_fp8(ctx.stream, plan, static_cast<int>(M), static_cast<int>(N),
                                          static_cast<int>(K), sa, sb, epilogue);
        };
        hipError_t e;
        if (out.dtype == DType::kF16)
          e = launch_with_epilogue16<dev::kDtF16, RegisterUse::kEveryCase, 0>(ep, launch);
        else if (out.dtype == DType::kBF16)
          e = launch_with_epilogue16<dev::kDtBF16, RegisterUse::kEveryCase, 0>(ep, launch);
        else
          e = launch(ep);
        HIPQ_HIP_RETURN_IF_ERROR(e);
        return Status::Ok();
      }
    }
    HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm_wgmma_fp8(ctx.stream, 1, static_cast<int>(M), static_cast<int>(N),
                                                        static_cast<int>(K), fa, fb, sa, sb, ep));
    return Status::Ok();
  }
#endif
  const dim3 grid(static_cast<unsigned>((N + kSimtTile - 1) / kSimtTile),
                  static_cast<unsigned>((M + kSimtTile - 1) / kSimtTile));
  if (grid.y > 65535) return Status::InvalidArgument("matmul_fp8: too many rows for the plain kernel: " + out.describe());
  matmul_fp8_simt_kernel<<<grid, kSimtTile * kSimtTile, 0, ctx.stream>>>(
      static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), static_cast<const uint8_t*>(a.codes.data),
      static_cast<const uint8_t*>(b.codes.data), sa, sb, ep);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace hipq::kernels
