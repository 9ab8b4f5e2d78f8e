// Independent fp64 references for the parity harness: straightforward loops
// over host views (f32 data, any strides) written from the op definitions in
// docs/kernels.md, sharing no code with any backend. Each returns the value of
// one output element by flat index; per-row statistics are precomputed.
#pragma once

#include <vector>

#include "kernels/backend.h"
#include "parity/parity_case.h"

namespace hipq::kernels::parity::ref {

// Element of a host view by multi-index.
double at(const Tensor& t, std::initializer_list<int64_t> idx);
// Element by row-major logical flat index.
double at_flat(const Tensor& t, int64_t i);

double activation(Activation a, double x);
double unary(UnaryOp op, double x);

ElementFn matmul(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor* residual,
                 const MatmulOptions& o, const std::vector<int64_t>& out_shape);
// matmul_fp8 of a [M, K] and b [N, K] (host views of the 16-bit inputs)
// after quantizing both per row as docs/kernels.md "fp8" defines it: the
// e4m3 rounding by a search of the sorted code values (ties to the even
// code), the sums and scales in fp64. o: alpha, activation, geglu_pairs.
ElementFn matmul_fp8(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor* residual,
                     const MatmulOptions& o, const std::vector<int64_t>& out_shape);
// The e4m3 codes (as numbers 0 .. 255) of x [R, K] quantized per row as
// matmul_fp8's reference does: the code of the nearest value, the sign of x.
ElementFn quantize_fp8_codes(const Tensor& x);
// upsample_x2: x is read as its nearest 2x upsample (Conv2dOptions::upsample_x2).
ElementFn conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                 int stride, int padding, const std::vector<int64_t>& out_shape, bool upsample_x2 = false);
// conv2d_fp8 (stride 1): x [N, C, H, W] quantized per image (one row of
// C * H * W values an image) and w [O, C, kh, kw] per output channel (one row
// of C * kh * kw values: the channel padding of the backend's layout adds only
// zeros, which change no amax), both by matmul_fp8's reference rule, then the
// sum of the e4m3 products in fp64, times both scales, + bias, + residual.
ElementFn conv2d_fp8(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                     int padding, bool upsample_x2, const std::vector<int64_t>& out_shape);
ElementFn group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, double eps,
                     bool silu);
ElementFn layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, double eps);
// layer_norm_fp8: layer_norm's values rounded to x's dtype, then the codes
// quantize_fp8_codes gives of those rows ([R, D], x's last dim D).
ElementFn layer_norm_fp8_codes(const Tensor& x, const Tensor* gamma, const Tensor* beta, double eps);
ElementFn softmax(const Tensor& x, double scale, bool causal);
ElementFn attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, double scale,
                    bool causal);
ElementFn geglu(const Tensor& x);
ElementFn binary(BinaryOp op, const Tensor& a, const Tensor& b);
ElementFn concat(const std::vector<Tensor>& xs, int dim, const std::vector<int64_t>& out_shape);
ElementFn upsample_nearest2x(const Tensor& x);
ElementFn timestep_embedding(const Tensor& t, const TimestepEmbeddingOptions& o);
ElementFn embedding(const Tensor& ids, const Tensor& table);
// lora_merge: base [O, I] (a view) + sum over l of coefficients[l] * ups[l] @ downs[l], in fp64.
ElementFn lora_merge(const Tensor& base, const std::vector<Tensor>& ups, const std::vector<Tensor>& downs,
                     const std::vector<double>& coefficients);
// Flat [8]: dot, norm_a2, norm_b2, sum_sq_diff, max_abs_diff, nonfinite_a, nonfinite_b, count.
ElementFn parity_sums(const Tensor& a, const Tensor& b);

}  // namespace hipq::kernels::parity::ref
