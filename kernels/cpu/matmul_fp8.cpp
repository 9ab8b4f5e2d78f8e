// matmul_fp8 on the cpu: the e4m3 codes of both operands decoded exactly to
// fp32, their product by matmul's tiled fp32 GEMM (every e4m3 x e4m3 product
// is exact in fp32; the sums round as any fp32 accumulation does), then the
// scales and matmul's epilogue in the order the hip kernels apply them:
// v = acc * scale_a[m] * scale_b[n], then alpha, bias, activation, residual
// (or geglu_pairs).
#include <cstring>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/e4m3_decode.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o) {
  constexpr std::string_view op = "matmul_fp8";
  HIPQ_RETURN_IF_ERROR(check_host(op, "a.codes", a.codes));
  HIPQ_RETURN_IF_ERROR(check_host(op, "a.scales", a.scales));
  HIPQ_RETURN_IF_ERROR(check_host(op, "b.codes", b.codes));
  HIPQ_RETURN_IF_ERROR(check_host(op, "b.scales", b.scales));
  HIPQ_RETURN_IF_ERROR(check_host(op, "out", out));
  if (o.bias) HIPQ_RETURN_IF_ERROR(check_host(op, "bias", *o.bias));
  if (o.residual) HIPQ_RETURN_IF_ERROR(check_host(op, "residual", *o.residual));
  HIPQ_RETURN_IF_ERROR(check_matmul_fp8(a, b, out, o));
  const int64_t M = a.codes.shape[0], K = a.codes.shape[1], N = b.codes.shape[0];
  if (M == 0 || N == 0) return Status::Ok();

  thread_local std::vector<float> a_buf, b_buf, c_buf, bias_buf, res_buf;
  decode_e4m3(a.codes, a_buf);
  decode_e4m3(b.codes, b_buf);
  c_buf.resize(static_cast<size_t>(M * N));
  Tensor af = Tensor::contiguous(a_buf.data(), DType::kF32, {M, K});
  Tensor bf = Tensor::contiguous(b_buf.data(), DType::kF32, {N, K});
  Tensor cf = Tensor::contiguous(c_buf.data(), DType::kF32, {M, N});
  MatmulOptions plain;
  plain.trans_b = true;
  HIPQ_RETURN_IF_ERROR(matmul(af, bf, cf, plain));

  const float* sa = static_cast<const float*>(a.scales.data);
  const float* sb = static_cast<const float*>(b.scales.data);
  const float* bias = o.bias ? as_f32(*o.bias, bias_buf) : nullptr;
  const float* res = o.residual ? as_f32(*o.residual, res_buf) : nullptr;
  const int64_t out_n = o.geglu_pairs ? N / 2 : N;
  float* C = c_buf.data();
  ThreadPool::global().parallel_for(M, std::max<int64_t>(1, 16384 / N), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* c = C + r * N;
      const float* rr = res ? res + r * out_n : nullptr;
      for (int64_t j = 0; j < N; ++j) {
        float v = o.alpha * (c[j] * sa[r] * sb[j]);
        if (bias) v += bias[j];
        if (!o.geglu_pairs) {
          v = apply_activation(o.activation, v);
          if (rr) v += rr[j];
        }
        c[j] = v;
      }
      if (o.geglu_pairs)
        for (int64_t j = 0; j < out_n; ++j) c[j] = c[2 * j] * gelu_erf(c[2 * j + 1]);
    }
  });
  if (o.geglu_pairs)
    for (int64_t r = 1; r < M; ++r) std::memmove(C + r * out_n, C + r * N, static_cast<size_t>(out_n) * sizeof(float));
  scatter_f32(C, out);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
