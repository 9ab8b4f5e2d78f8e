// matmul: out[b] = act(alpha * op(a[b]) @ op(b[b]) + bias) + residual[b] (or,
// with geglu_pairs, GEGLU over the product's (value, gate) column pairs). Any
// strides on a and b (transposes are stride swaps); leading dims of out are
// batch dims, and a/b either match them or broadcast (all 1 or absent).
// hip_matmul checks the call and sets up the epilogue; choose_gemm_route
// (gemm_route.h, host code) picks the kernel family; one launcher a family
// below (launch_route) starts it.
#include <string>

#include "kernels/hip/gemm/gemm_3xtf32.h"
#include "kernels/hip/gemm/gemm_tile.h"
#include "kernels/hip/gemm/gemm_tma.h"
#include "kernels/hip/gemm/gemm_tma_3xtf32.h"
#include "kernels/hip/gemm/gemm_wgmma.h"
#include "kernels/hip/gemm/mat_epilogue16.h"
#include "kernels/hip/gemm_route.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {
namespace {

struct MatLoader {
  const void* p;
  int dt;
  int64_t sb, sm, sk;
  __device__ float operator()(int b, int m, int k) const { return dev::ld(p, dt, b * sb + m * sm + k * sk); }
};

// Batch stride of `t` over the leading dims (all but the last two), or 0 when
// they broadcast. Fails when they neither match `lead` nor are all 1, or
// cannot be flattened into one stride.
bool batch_stride(const Tensor& t, const std::vector<int64_t>& lead, int64_t& sb) {
  const int tl = t.ndim - 2;
  int64_t prod = 1;
  for (int d = 0; d < tl; ++d) prod *= t.shape[d];
  if (prod == 1) {
    sb = 0;
    return true;
  }
  if (tl != static_cast<int>(lead.size())) return false;
  for (int d = 0; d < tl; ++d)
    if (t.shape[d] != lead[d]) return false;
  for (int d = 0; d + 1 < tl; ++d)
    if (t.shape[d] != 1 && t.stride[d] != t.stride[d + 1] * t.shape[d + 1]) return false;
  sb = t.stride[tl - 1];
  return true;
}

#if HIPQ_VENDOR_NVIDIA
// fp32 C = A B on the Hopper 3xTF32 kernel: both operands split into
// K-major big / small copies (split_tf32_rows_kernel; any strides), then
// gemm_tma_3xtf32_kernel. `launched` stays false, and nothing is queued,
// when the pool cannot hold the copies or TMA cannot describe them (the
// caller then takes the mma.sync kernel).
Status matmul_3xtf32_wgmma(HipContext& ctx, const dev::F32Operand& a, const dev::F32Operand& b, int batch, int M,
                           int N, int K, const MatEpilogue& ep, bool& launched) {
  launched = false;
  const int ldk = dev::tf32_ldk(K);
  const int a_batches = a.sb != 0 ? batch : 1, b_batches = b.sb != 0 ? batch : 1;
  const size_t a_elems = static_cast<size_t>(a_batches) * M * ldk, b_elems = static_cast<size_t>(b_batches) * N * ldk;
  Result<Buffer> ab = ctx.backend->allocate(2 * a_elems * sizeof(float));
  if (!ab.ok()) return ab.status().code() == StatusCode::kResourceExhausted ? Status::Ok() : ab.status();
  Result<Buffer> bb = ctx.backend->allocate(2 * b_elems * sizeof(float));
  if (!bb.ok()) return bb.status().code() == StatusCode::kResourceExhausted ? Status::Ok() : bb.status();
  float* a_big = static_cast<float*>(ab->data());
  float* b_big = static_cast<float*>(bb->data());
  dev::GemmTf32Plan plan;
  plan.a_batch = a_batches > 1 ? 1 : 0;
  if (!dev::set_tf32_grid(plan, batch, M, N, ctx.multiprocessors) ||
      !dev::encode_f32_rows_map(plan.a_big, a_big, M, ldk, a_batches, 128) ||
      !dev::encode_f32_rows_map(plan.a_small, a_big + a_elems, M, ldk, a_batches, 128) ||
      !dev::encode_f32_rows_map(plan.b_big, b_big, N, ldk, b_batches, 128) ||
      !dev::encode_f32_rows_map(plan.b_small, b_big + b_elems, N, ldk, b_batches, 128))
    return Status::Ok();
  // A(m, k) = a.p[b * sb + m * si + k * sj]; B(n, k) = b.p[b * sb + k * si + n * sj].
  dev::split_tf32_rows_kernel<<<ctx.grid_for(static_cast<int64_t>(a_elems), 256), 256, 0, ctx.stream>>>(
      a.p, a.sb, a.si, a.sj, M, K, ldk, static_cast<int64_t>(a_elems), a_big, a_big + a_elems);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  dev::split_tf32_rows_kernel<<<ctx.grid_for(static_cast<int64_t>(b_elems), 256), 256, 0, ctx.stream>>>(
      b.p, b.sb, b.sj, b.si, N, K, ldk, static_cast<int64_t>(b_elems), b_big, b_big + b_elems);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  dev::TmaRowsLoad bl;
  bl.b_batch = b_batches > 1 ? 1 : 0;
  bl.bk = dev::Tma3xTf32Shape::BK;
  HIPQ_HIP_RETURN_IF_ERROR(dev::launch_gemm_tma_3xtf32(ctx.stream, plan, batch, M, N, K, bl, ep));
  launched = true;
  return Status::Ok();
}
#endif

// One matmul as its launchers take it: sizes, loaders, epilogue and route.
struct MatmulCall {
  int batch = 1, M = 0, N = 0, K = 0;
  MatLoader la{}, lb{};  // la(batch, m, k); lb(batch, k, n): lb.sm is the k stride, lb.sk the n stride
  MatEpilogue ep{};
  GemmRoute route;
  // The operands the 16-bit kernels copy straight to shared memory (route.a / route.b).
  dev::PlainOperand pa() const {
    return route.a.plain ? dev::PlainOperand{la.p, la.sb, route.a.ld} : dev::PlainOperand{};
  }
  dev::PlainOperand pb() const {
    return route.b.plain ? dev::PlainOperand{lb.p, lb.sb, route.b.ld} : dev::PlainOperand{};
  }
};

GemmDevice gemm_device(const HipContext& ctx) {
  GemmDevice d;
  d.multiprocessors = ctx.multiprocessors;
  d.matrix_units = ctx.matrix_units;
  d.wgmma = ctx.wgmma;
  d.fp32_3xtf32 = ctx.fp32_3xtf32;
  d.dot2_f16 = ctx.dot2_f16;
  d.fp32_wgmma = ctx.switches.fp32_wgmma;
  d.gemm_tma = ctx.switches.gemm_tma;
  return d;
}

GemmProblem gemm_problem(const Tensor& a, const Tensor& b, const MatmulCall& c, bool geglu_pairs) {
  GemmProblem p;
  p.a_dtype = a.dtype;
  p.b_dtype = b.dtype;
  p.batch = c.batch;
  p.M = c.M;
  p.N = c.N;
  p.K = c.K;
  p.a_sb = c.la.sb;
  p.a_sm = c.la.sm;
  p.a_sk = c.la.sk;
  p.b_sb = c.lb.sb;
  p.b_sk = c.lb.sm;
  p.b_sn = c.lb.sk;
  p.a_aligned16 = a.data != nullptr && aligned16(a.data);
  p.b_aligned16 = b.data != nullptr && aligned16(b.data);
  p.geglu_pairs = geglu_pairs;
  return p;
}

// ---- one launcher a route (GemmKernel) ----

[[maybe_unused]] Status not_in_this_build(GemmKernel k) {
  return Status::Internal(std::string("matmul: route ") + gemm_kernel_name(k) + " is not in this build");
}

#if HIPQ_VENDOR_NVIDIA
// The plain K-major operands of the wgmma kernels.
void rows_fills(const MatmulCall& c, dev::RowsFill& fa, dev::RowsFill& fb) {
  const dev::PlainOperand pa = c.pa(), pb = c.pb();
  fa = dev::RowsFill{};
  fa.p = static_cast<const uint16_t*>(pa.p);
  fa.sb = pa.sb;
  fa.ld = pa.ld;
  fa.rows = c.M;
  fa.K = c.K;
  fb = dev::RowsFill{};
  fb.p = static_cast<const uint16_t*>(pb.p);
  fb.sb = pb.sb;
  fb.ld = pb.ld;
  fb.rows = c.N;
  fb.K = c.K;
}
#endif

// kWgmma: the cp.async wgmma kernel (gemm/gemm_wgmma.h).
Status launch_wgmma(HipContext& ctx, const MatmulCall& c) {
#if HIPQ_VENDOR_NVIDIA
  dev::RowsFill fa, fb;
  rows_fills(c, fa, fb);
  const hipError_t e = c.la.dt == dev::kDtF16
                           ? dev::launch_gemm_wgmma<__half>(ctx.stream, c.batch, c.M, c.N, c.K, fa, fb, c.ep)
                           : dev::launch_gemm_wgmma<__nv_bfloat16>(ctx.stream, c.batch, c.M, c.N, c.K, fa, fb, c.ep);
  HIPQ_HIP_RETURN_IF_ERROR(e);
  return Status::Ok();
#else
  (void)ctx;
  (void)c;
  return not_in_this_build(GemmKernel::kWgmma);
#endif
}

// kTmaWgmma: the warp-specialised TMA kernel (gemm/gemm_tma.h) with the
// compact epilogue where the case allows (MatEpilogue16; RegisterEpilogue16
// for GEGLU), else the general one; the cp.async kernel where the driver
// declines a tensor map.
Status launch_tma_wgmma(HipContext& ctx, const MatmulCall& c) {
#if HIPQ_VENDOR_NVIDIA
  dev::RowsFill fa, fb;
  rows_fills(c, fa, fb);
  dev::GemmTmaPlan plan;
  if (!dev::prepare_gemm_tma(plan, c.la.dt == dev::kDtBF16, fa, fb, c.batch, c.M, c.N, c.K, ctx.multiprocessors,
                             c.route.tile_n))
    return launch_wgmma(ctx, c);
  const auto launch = [&](auto tc, const auto& epilogue) {
    return dev::launch_gemm_tma<decltype(tc)>(ctx.stream, plan, c.batch, c.M, c.N, c.K, epilogue);
  };
  // The register epilogue for GEGLU, one column pair's loads at a time.
  const hipError_t e =
      c.la.dt == dev::kDtF16
          ? launch_with_epilogue16<dev::kDtF16, RegisterUse::kGegluOnly, 1>(
                c.ep, [&](const auto& ep) { return launch(__half{}, ep); })
          : launch_with_epilogue16<dev::kDtBF16, RegisterUse::kGegluOnly, 1>(
                c.ep, [&](const auto& ep) { return launch(__nv_bfloat16{}, ep); });
  HIPQ_HIP_RETURN_IF_ERROR(e);
  return Status::Ok();
#else
  (void)ctx;
  (void)c;
  return not_in_this_build(GemmKernel::kTmaWgmma);
#endif
}

#if HIPQ_VENDOR_NVIDIA
// The fp32 operands as the 3xTF32 kernels take them: A (m, k), B (k, n).
dev::F32Operand f32_operand(const MatLoader& l) {
  return dev::F32Operand{static_cast<const float*>(l.p), l.sb, l.sm, l.sk};
}
#endif

// kTf32Mma: 3xTF32 on mma.sync (gemm/gemm_3xtf32.h).
Status launch_tf32_mma(HipContext& ctx, const MatmulCall& c) {
#if HIPQ_VENDOR_NVIDIA
  HIPQ_HIP_RETURN_IF_ERROR(
      dev::launch_gemm_3xtf32(ctx.stream, c.batch, c.M, c.N, c.K, f32_operand(c.la), f32_operand(c.lb), c.ep));
  return Status::Ok();
#else
  (void)ctx;
  (void)c;
  return not_in_this_build(GemmKernel::kTf32Mma);
#endif
}

// kTf32Wgmma: 3xTF32 on wgmma over split copies (gemm/gemm_tma_3xtf32.h);
// the mma.sync kernel where the pool cannot hold the copies or the driver
// declines their tensor maps.
Status launch_tf32_wgmma(HipContext& ctx, const MatmulCall& c) {
#if HIPQ_VENDOR_NVIDIA
  bool launched = false;
  HIPQ_RETURN_IF_ERROR(
      matmul_3xtf32_wgmma(ctx, f32_operand(c.la), f32_operand(c.lb), c.batch, c.M, c.N, c.K, c.ep, launched));
  return launched ? Status::Ok() : launch_tf32_mma(ctx, c);
#else
  (void)ctx;
  (void)c;
  return not_in_this_build(GemmKernel::kTf32Wgmma);
#endif
}

// kMma: f16/bf16 on mma.sync (gemm/gemm_mma.h).
Status launch_mma(HipContext& ctx, const MatmulCall& c) {
#if HIPQ_VENDOR_NVIDIA
  if (c.la.dt == dev::kDtF16)
    dev::launch_gemm_mma<__half>(ctx.stream, c.batch, c.M, c.N, c.K, c.la, c.route.a_k_fast, c.pa(), c.lb,
                                 c.route.b_k_fast, c.pb(), c.ep);
  else
    dev::launch_gemm_mma<__nv_bfloat16>(ctx.stream, c.batch, c.M, c.N, c.K, c.la, c.route.a_k_fast, c.pa(), c.lb,
                                        c.route.b_k_fast, c.pb(), c.ep);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
#else
  (void)ctx;
  (void)c;
  return not_in_this_build(GemmKernel::kMma);
#endif
}

// kDot2: f16 on the packed-half kernel (gemm/gemm_dot2.h).
Status launch_dot2(HipContext& ctx, const MatmulCall& c) {
  dev::launch_gemm_dot2(ctx.stream, ctx.multiprocessors, c.batch, c.M, c.N, c.K, c.la, c.route.a_k_fast, c.lb,
                        c.route.b_k_fast, c.ep, c.pa(), c.pb());
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

// kSimt: the fp32 SIMT core (gemm/gemm_tile.h), tile 128 or 64.
Status launch_simt(HipContext& ctx, const MatmulCall& c) {
  dev::launch_gemm_simt(ctx.stream, c.route.tile_n == 128, c.batch, c.M, c.N, c.K, c.la, c.route.a_k_fast, c.lb,
                        c.route.b_k_fast, c.ep);
  HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status launch_route(HipContext& ctx, const MatmulCall& c) {
  switch (c.route.kernel) {
    case GemmKernel::kTmaWgmma: return launch_tma_wgmma(ctx, c);
    case GemmKernel::kWgmma: return launch_wgmma(ctx, c);
    case GemmKernel::kTf32Wgmma: return launch_tf32_wgmma(ctx, c);
    case GemmKernel::kTf32Mma: return launch_tf32_mma(ctx, c);
    case GemmKernel::kMma: return launch_mma(ctx, c);
    case GemmKernel::kDot2: return launch_dot2(ctx, c);
    case GemmKernel::kSimt: return launch_simt(ctx, c);
    case GemmKernel::kFp8TmaWgmma:
    case GemmKernel::kFp8Wgmma:
    case GemmKernel::kFp8Simt: break;  // matmul_fp8's routes (matmul_fp8.hip)
  }
  return not_in_this_build(c.route.kernel);
}

// The checks of a matmul call and its epilogue: fills everything of `c` but
// the route. `lead`: out's batch dims.
Status describe_matmul(const Tensor& a, const Tensor& b, const Tensor& out, const MatmulOptions& o,
                       std::vector<int64_t>& lead, MatmulCall& c) {
  HIPQ_RETURN_IF_ERROR(require_device_float(a, "matmul", "a"));
  HIPQ_RETURN_IF_ERROR(require_device_float(b, "matmul", "b"));
  HIPQ_RETURN_IF_ERROR(require_device_float(out, "matmul", "out"));
  HIPQ_RETURN_IF_ERROR(require_contiguous_out(out, "matmul", "out"));
  if (a.ndim < 2 || b.ndim < 2 || out.ndim < 2)
    return Status::InvalidArgument("matmul: operands need at least 2 dims: a " + a.describe() + ", b " +
                                   b.describe() + ", out " + out.describe());
  const int64_t M = o.trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t K = o.trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t Kb = o.trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t N = o.trans_b ? b.dim(-2) : b.dim(-1);
  if (K != Kb) return shape_mismatch("matmul", "inner dimensions differ (a, b)", a, b);
  HIPQ_RETURN_IF_ERROR(check_matmul_options(o, N, b));
  const int64_t out_n = o.geglu_pairs ? N / 2 : N;
  if (out.dim(-2) != M || out.dim(-1) != out_n)
    return Status::InvalidArgument("matmul: out " + out.describe() + " must be [..., " + std::to_string(M) + ", " +
                                   std::to_string(out_n) + "] for a " + a.describe() + " and b " + b.describe() +
                                   (o.geglu_pairs ? " (geglu_pairs halves N)" : ""));
  lead.assign(out.shape.begin(), out.shape.begin() + out.ndim - 2);
  int64_t batch = 1;
  for (int64_t d : lead) batch *= d;
  int64_t a_sb = 0, b_sb = 0, r_sb = 0;
  if (!batch_stride(a, lead, a_sb)) return shape_mismatch("matmul", "batch dims of a do not match out", a, out);
  if (!batch_stride(b, lead, b_sb)) return shape_mismatch("matmul", "batch dims of b do not match out", b, out);
  if (batch > 65535 || M > (int64_t{1} << 30) || N > (int64_t{1} << 30) || K > (int64_t{1} << 30))
    return Status::InvalidArgument("matmul: problem too large for one launch: out " + out.describe());

  MatEpilogue& ep = c.ep;
  ep = MatEpilogue{};
  ep.out = out.data;
  ep.dt = static_cast<int>(out.dtype);
  ep.ob = M * out_n;
  ep.om = out_n;
  ep.geglu = o.geglu_pairs ? 1 : 0;
  ep.alpha = o.alpha;
  ep.act = static_cast<int>(o.activation);
  if (o.bias) {
    HIPQ_RETURN_IF_ERROR(require_device_float(*o.bias, "matmul", "bias"));
    if (o.bias->numel() != N) return shape_mismatch("matmul", "bias must have N elements (bias, out)", *o.bias, out);
    ep.bias = o.bias->data;
    ep.bias_dt = static_cast<int>(o.bias->dtype);
    ep.bias_s = o.bias->stride[o.bias->ndim - 1];
  }
  if (o.residual) {
    const Tensor& r = *o.residual;
    HIPQ_RETURN_IF_ERROR(require_device_float(r, "matmul", "residual"));
    if (!r.same_shape(out)) return shape_mismatch("matmul", "residual must have out's shape", r, out);
    if (!batch_stride(r, lead, r_sb))
      return shape_mismatch("matmul", "residual batch dims cannot be flattened", r, out);
    ep.res = r.data;
    ep.res_dt = static_cast<int>(r.dtype);
    ep.rb = r_sb;
    ep.rm = r.stride[r.ndim - 2];
    ep.rn = r.stride[r.ndim - 1];
  }

  c.batch = static_cast<int>(batch);
  c.M = static_cast<int>(M);
  c.N = static_cast<int>(N);
  c.K = static_cast<int>(K);
  c.la = MatLoader{a.data, static_cast<int>(a.dtype), a_sb, 0, 0};
  c.la.sm = o.trans_a ? a.stride[a.ndim - 1] : a.stride[a.ndim - 2];
  c.la.sk = o.trans_a ? a.stride[a.ndim - 2] : a.stride[a.ndim - 1];
  c.lb = MatLoader{b.data, static_cast<int>(b.dtype), b_sb, 0, 0};
  // For b the loader is called (batch, k, n): sm is the k stride, sk the n stride.
  c.lb.sm = o.trans_b ? b.stride[b.ndim - 1] : b.stride[b.ndim - 2];
  c.lb.sk = o.trans_b ? b.stride[b.ndim - 2] : b.stride[b.ndim - 1];
  return Status::Ok();
}

}  // namespace

Status hip_matmul(HipContext& ctx, const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o) {
  std::vector<int64_t> lead;
  MatmulCall c;
  HIPQ_RETURN_IF_ERROR(describe_matmul(a, b, out, o, lead, c));
  if (c.M == 0 || c.N == 0 || c.batch == 0) return Status::Ok();
  c.route = choose_gemm_route(gemm_problem(a, b, c, o.geglu_pairs), gemm_device(ctx));
  if (o.geglu_pairs && !c.route.geglu_fused) {
    // Only the wgmma epilogues take the pairs (row8): elsewhere the product
    // goes through a scratch [..., M, N] in out's dtype, then the pairs kernel.
    std::vector<int64_t> full_shape = lead;
    full_shape.push_back(c.M);
    full_shape.push_back(c.N);
    Buffer hold;
    HIPQ_ASSIGN_OR_RETURN(
        hold, ctx.backend->allocate(static_cast<size_t>(int64_t{c.batch} * c.M * c.N) * dtype_size(out.dtype)));
    Tensor full = Tensor::contiguous(hold.data(), out.dtype, full_shape, Location::kDevice);
    MatmulOptions plain = o;
    plain.geglu_pairs = false;
    HIPQ_RETURN_IF_ERROR(hip_matmul(ctx, a, b, full, plain));
    return hip_geglu_pairs(ctx, full, out);
  }
  return launch_route(ctx, c);
}

}  // namespace hipq::kernels
