// conv2d_fp8 on the cpu: x quantized per image by quantize_fp8_rows over
// each image's C * H * W values (the rule every backend follows, so the
// codes are the same bytes), both operands' codes decoded exactly to fp32,
// their convolution by conv2d's fp32 implicit GEMM (every e4m3 x e4m3
// product is exact in fp32; the sums round as any fp32 accumulation does),
// then, in the order the hip kernel applies them: v = acc * w.scales[o] *
// s_n, + bias[o], + residual, rounded once to y's dtype.
#include <vector>

#include "kernels/cpu/e4m3_decode.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {

Status conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, Tensor& y, const Conv2dOptions& o) {
  constexpr std::string_view op = "conv2d_fp8";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_host(op, "w.codes", w.codes));
  HIPQ_RETURN_IF_ERROR(check_host(op, "w.scales", w.scales));
  HIPQ_RETURN_IF_ERROR(check_host(op, "y", y));
  if (o.bias) HIPQ_RETURN_IF_ERROR(check_host(op, "bias", *o.bias));
  if (o.residual) HIPQ_RETURN_IF_ERROR(check_host(op, "residual", *o.residual));
  HIPQ_RETURN_IF_ERROR(check_conv2d_fp8(x, w, y, o));
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.codes.shape[0], KH = w.codes.shape[1], KW = w.codes.shape[2], Cp = w.codes.shape[3];
  const int64_t Ho = y.shape[2], Wo = y.shape[3], P = Ho * Wo;
  if (N == 0 || O == 0) return Status::Ok();

  // Per image: codes and the dequantization factor s_n.
  const int64_t per_image = C * H * W;
  std::vector<uint8_t> xq(static_cast<size_t>(N * per_image));
  std::vector<float> xs(static_cast<size_t>(N));
  Tensor rows = x.reshape({N, per_image});
  Tensor codes = Tensor::contiguous(xq.data(), DType::kU8, {N, per_image});
  Tensor scales = Tensor::contiguous(xs.data(), DType::kF32, {N});
  HIPQ_RETURN_IF_ERROR(quantize_fp8_rows(rows, codes, scales));

  // Both operands' values, exact in fp32: x's codes as [N, C, H, W], the
  // weight's [O, kh, kw, Cp] codes as [O, C, kh, kw] (the padding dropped).
  std::vector<float> xf, wt_f, wf(static_cast<size_t>(O * C * KH * KW));
  decode_e4m3(codes, xf);
  decode_e4m3(w.codes, wt_f);
  for (int64_t oc = 0; oc < O; ++oc)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < KH * KW; ++t)
        wf[static_cast<size_t>((oc * C + c) * KH * KW + t)] =
            wt_f[static_cast<size_t>((oc * KH * KW + t) * Cp + c)];

  std::vector<float> acc(static_cast<size_t>(N * O * P));
  Tensor xt = Tensor::contiguous(xf.data(), DType::kF32, {N, C, H, W});
  Tensor wt = Tensor::contiguous(wf.data(), DType::kF32, {O, C, KH, KW});
  Tensor at = Tensor::contiguous(acc.data(), DType::kF32, {N, O, Ho, Wo});
  Conv2dOptions plain;
  plain.stride = 1;
  plain.padding = o.padding;
  plain.upsample_x2 = o.upsample_x2;
  HIPQ_RETURN_IF_ERROR(conv2d(xt, wt, at, plain));

  std::vector<float> bias_buf, res_buf;
  const float* bias = o.bias ? as_f32(*o.bias, bias_buf) : nullptr;
  const float* res = o.residual ? as_f32(*o.residual, res_buf) : nullptr;
  const auto* ws = static_cast<const float*>(w.scales.data);
  ThreadPool::global().parallel_for(N * O, std::max<int64_t>(1, 16384 / P), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / O, oc = r % O;
      float* a = acc.data() + r * P;
      const float* rr = res ? res + r * P : nullptr;
      for (int64_t p = 0; p < P; ++p) {
        float v = a[p] * ws[oc] * xs[static_cast<size_t>(n)];
        if (bias) v += bias[oc];
        if (rr) v += rr[p];
        a[p] = v;
      }
    }
  });
  scatter_f32(acc.data(), y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
