#include "parity/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::parity::ref {
namespace {

std::vector<int64_t> unflatten(int64_t i, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

double at_vec(const Tensor& t, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  for (int d = 0; d < t.ndim; ++d) off += idx[static_cast<size_t>(d)] * t.stride[d];
  return static_cast<const float*>(t.data)[off];
}

}  // namespace

double at(const Tensor& t, std::initializer_list<int64_t> idx) {
  int64_t off = 0;
  int d = 0;
  for (int64_t i : idx) off += i * t.stride[d++];
  return static_cast<const float*>(t.data)[off];
}

double at_flat(const Tensor& t, int64_t i) {
  if (t.is_contiguous()) return static_cast<const float*>(t.data)[i];
  return at_vec(t, unflatten(i, t.shape_vec()));
}

double activation(Activation a, double x) {
  switch (a) {
    case Activation::kNone: return x;
    case Activation::kGelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case Activation::kGeluTanh:
      return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case Activation::kSilu: return x / (1.0 + std::exp(-x));
    case Activation::kQuickGelu: return x / (1.0 + std::exp(-1.702 * x));
  }
  return x;
}

double unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::kGelu: return activation(Activation::kGelu, x);
    case UnaryOp::kGeluTanh: return activation(Activation::kGeluTanh, x);
    case UnaryOp::kSilu: return activation(Activation::kSilu, x);
    case UnaryOp::kQuickGelu: return activation(Activation::kQuickGelu, x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kExp: return std::exp(x);
  }
  return x;
}

ElementFn matmul(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor* residual,
                 const MatmulOptions& o, const std::vector<int64_t>& out_shape) {
  const Tensor* bias_p = bias;
  const Tensor* res_p = residual;
  Tensor bias_v = bias ? *bias : Tensor{}, res_v = residual ? *residual : Tensor{};
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, out_shape);
    const int64_t n = idx.back(), m = idx[idx.size() - 2];
    const int64_t batch = idx.size() == 3 ? idx[0] : 0;
    const int64_t ba = a.ndim == 3 && a.shape[0] > 1 ? batch : 0;
    const int64_t bb = b.ndim == 3 && b.shape[0] > 1 ? batch : 0;
    const int64_t K = o.trans_a ? a.dim(-2) : a.dim(-1);
    auto column = [&](int64_t c) {  // alpha * (a b)[m][c] + bias[c]
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t ar = o.trans_a ? k : m, ac = o.trans_a ? m : k;
        const int64_t br = o.trans_b ? c : k, bc = o.trans_b ? k : c;
        const double av = a.ndim == 3 ? at(a, {ba, ar, ac}) : at(a, {ar, ac});
        const double bv = b.ndim == 3 ? at(b, {bb, br, bc}) : at(b, {br, bc});
        s += av * bv;
      }
      double v = o.alpha * s;
      if (bias_p) v += at(bias_v, {c});
      return v;
    };
    if (o.geglu_pairs) return column(2 * n) * activation(Activation::kGelu, column(2 * n + 1));
    double v = activation(o.activation, column(n));
    if (res_p) v += at_vec(res_v, idx);
    return v;
  };
}

namespace {

// The finite non-negative e4m3 values in code order 0x00 .. 0x7E (increasing).
const std::vector<double>& e4m3_values() {
  static const std::vector<double> v = [] {
    std::vector<double> t;
    for (int c = 0; c <= 0x7E; ++c) {
      const int e = c >> 3, m = c & 7;
      t.push_back(e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7));
    }
    return t;
  }();
  return v;
}

// The e4m3 value nearest x (ties to the even code), saturating at +-448.
double e4m3_round(double x) {
  if (std::isnan(x)) return x;
  const std::vector<double>& t = e4m3_values();
  const double a = std::fabs(x);
  double r;
  if (a >= t.back()) {
    r = t.back();
  } else {
    const size_t hi = static_cast<size_t>(std::upper_bound(t.begin(), t.end(), a) - t.begin());  // t[hi-1] <= a < t[hi]
    const size_t lo = hi - 1;
    const double dl = a - t[lo], dh = t[hi] - a;
    r = dl < dh ? t[lo] : dh < dl ? t[hi] : (lo % 2 == 0 ? t[lo] : t[hi]);
  }
  return std::signbit(x) ? -r : r;
}

struct QuantRows {
  std::vector<double> q;      // [rows, K] e4m3 values
  std::vector<double> scale;  // [rows] dequantization factors
};

QuantRows quantize_rows(const Tensor& x) {
  const int64_t R = x.shape[0], K = x.shape[1];
  QuantRows out;
  out.q.resize(static_cast<size_t>(R * K));
  out.scale.resize(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    double amax = 0;
    for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(at(x, {r, k})));
    const float s = static_cast<float>(448.0 / std::max(amax, 1e-12));
    for (int64_t k = 0; k < K; ++k)
      out.q[static_cast<size_t>(r * K + k)] = e4m3_round(static_cast<float>(at(x, {r, k}) * static_cast<double>(s)));
    out.scale[static_cast<size_t>(r)] = static_cast<float>(1.0 / static_cast<double>(s));
  }
  return out;
}

}  // namespace

ElementFn quantize_fp8_codes(const Tensor& x) {
  auto qx = std::make_shared<QuantRows>(quantize_rows(x));
  Tensor xv = x;
  const int64_t K = x.shape[1];
  return [=](int64_t i) {
    const double q = qx->q[static_cast<size_t>(i)];
    const std::vector<double>& t = e4m3_values();
    const auto code = static_cast<int>(std::lower_bound(t.begin(), t.end(), std::fabs(q)) - t.begin());
    return static_cast<double>(code | (std::signbit(at(xv, {i / K, i % K})) ? 0x80 : 0));
  };
}

ElementFn layer_norm_fp8_codes(const Tensor& x, const Tensor* gamma, const Tensor* beta, double eps) {
  const int64_t D = x.shape[x.ndim - 1], n = x.numel();
  const ElementFn ln = layer_norm(x, gamma, beta, eps);
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = static_cast<float>(ln(i));
  // The rows as the backend's layer_norm stores them (x's dtype), kept alive
  // by the returned function (quantize_fp8_codes reads their signs).
  auto rows = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(n) * kernels::dtype_size(x.dtype));
  const Tensor y = Tensor::contiguous(rows->data(), x.dtype, {n / D, D}, kernels::Location::kHost);
  kernels::cpu::scatter_f32(values.data(), y);
  ElementFn codes = quantize_fp8_codes(y);
  return [rows, codes](int64_t i) { return codes(i); };
}

ElementFn matmul_fp8(const Tensor& a, const Tensor& b, const Tensor* bias, const Tensor* residual,
                     const MatmulOptions& o, const std::vector<int64_t>& out_shape) {
  auto qa = std::make_shared<QuantRows>(quantize_rows(a));
  auto qb = std::make_shared<QuantRows>(quantize_rows(b));
  const int64_t K = a.shape[1];
  const bool has_bias = bias, has_res = residual;
  Tensor bias_v = bias ? *bias : Tensor{}, res_v = residual ? *residual : Tensor{};
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, out_shape);
    const int64_t n = idx[1], m = idx[0];
    auto column = [&](int64_t c) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += qa->q[static_cast<size_t>(m * K + k)] * qb->q[static_cast<size_t>(c * K + k)];
      double v = o.alpha * (s * qa->scale[static_cast<size_t>(m)] * qb->scale[static_cast<size_t>(c)]);
      if (has_bias) v += at(bias_v, {c});
      return v;
    };
    if (o.geglu_pairs) return column(2 * n) * activation(Activation::kGelu, column(2 * n + 1));
    double v = activation(o.activation, column(n));
    if (has_res) v += at_vec(res_v, idx);
    return v;
  };
}

ElementFn conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                 int stride, int padding, const std::vector<int64_t>& out_shape, bool upsample_x2) {
  const int up = upsample_x2 ? 1 : 0;
  const bool has_bias = bias, has_res = residual;
  Tensor bias_v = bias ? *bias : Tensor{}, res_v = residual ? *residual : Tensor{};
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, out_shape);
    const int64_t n = idx[0], o = idx[1], oy = idx[2], ox = idx[3];
    // H, W: the input the conv sees (x upsampled 2x, nearest, with upsample_x2).
    const int64_t C = x.shape[1], H = x.shape[2] << up, W = x.shape[3] << up, KH = w.shape[2], KW = w.shape[3];
    double s = 0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx) {
          const int64_t iy = oy * stride - padding + ky, ix = ox * stride - padding + kx;
          if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
          s += at(x, {n, c, iy >> up, ix >> up}) * at(w, {o, c, ky, kx});
        }
    if (has_bias) s += at(bias_v, {o});
    if (has_res) s += at_vec(res_v, idx);
    return s;
  };
}

ElementFn conv2d_fp8(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                     int padding, bool upsample_x2, const std::vector<int64_t>& out_shape) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], KH = w.shape[2], KW = w.shape[3];
  // The rows quantize_rows reads: host views of the whole inputs, which the
  // harness hands over contiguous for this op.
  auto qx = std::make_shared<QuantRows>(quantize_rows(x.reshape({N, C * H * W})));
  auto qw = std::make_shared<QuantRows>(quantize_rows(w.reshape({O, C * KH * KW})));
  const int up = upsample_x2 ? 1 : 0;
  const bool has_bias = bias, has_res = residual;
  Tensor bias_v = bias ? *bias : Tensor{}, res_v = residual ? *residual : Tensor{};
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, out_shape);
    const int64_t n = idx[0], o = idx[1], oy = idx[2], ox = idx[3];
    const double* xq = qx->q.data() + n * C * H * W;
    const double* wq = qw->q.data() + o * C * KH * KW;
    double s = 0;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx) {
          // The conv sees x upsampled 2x (nearest) with upsample_x2: [2H, 2W].
          const int64_t iy = oy - padding + ky, ix = ox - padding + kx;
          if (iy < 0 || iy >= (H << up) || ix < 0 || ix >= (W << up)) continue;
          s += xq[(c * H + (iy >> up)) * W + (ix >> up)] * wq[(c * KH + ky) * KW + kx];
        }
    double v = s * qx->scale[static_cast<size_t>(n)] * qw->scale[static_cast<size_t>(o)];
    if (has_bias) v += at(bias_v, {o});
    if (has_res) v += at_vec(res_v, idx);
    return v;
  };
}

ElementFn group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int groups, double eps,
                     bool silu) {
  const int64_t N = x.shape[0], C = x.shape[1];
  const int64_t spatial = x.numel() / (N * C), cpg = C / groups;
  auto mean = std::make_shared<std::vector<double>>(static_cast<size_t>(N * groups));
  auto rstd = std::make_shared<std::vector<double>>(static_cast<size_t>(N * groups));
  std::vector<int64_t> shape = x.shape_vec();
  // Elements of (n, c) in flat order: channel planes are contiguous in the
  // logical index, spatial positions follow.
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      double s = 0, s2 = 0;
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
        for (int64_t p = 0; p < spatial; ++p) s += at_flat(x, (n * C + c) * spatial + p);
      const double cnt = static_cast<double>(cpg * spatial), m = s / cnt;
      for (int64_t c = g * cpg; c < (g + 1) * cpg; ++c)
        for (int64_t p = 0; p < spatial; ++p) {
          const double d = at_flat(x, (n * C + c) * spatial + p) - m;
          s2 += d * d;
        }
      (*mean)[static_cast<size_t>(n * groups + g)] = m;
      (*rstd)[static_cast<size_t>(n * groups + g)] = 1.0 / std::sqrt(s2 / cnt + eps);
    }
  return [=](int64_t i) {
    const int64_t nc = i / spatial, n = nc / C, c = nc % C, g = c / cpg;
    const size_t k = static_cast<size_t>(n * groups + g);
    double v = (at_flat(x, i) - (*mean)[k]) * (*rstd)[k] * at(gamma, {c}) + at(beta, {c});
    return silu ? v / (1.0 + std::exp(-v)) : v;
  };
}

ElementFn layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, double eps) {
  const int64_t D = x.dim(-1), rows = x.numel() / D;
  auto mean = std::make_shared<std::vector<double>>(static_cast<size_t>(rows));
  auto rstd = std::make_shared<std::vector<double>>(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < D; ++j) s += at_flat(x, r * D + j);
    const double m = s / static_cast<double>(D);
    for (int64_t j = 0; j < D; ++j) {
      const double d = at_flat(x, r * D + j) - m;
      s2 += d * d;
    }
    (*mean)[static_cast<size_t>(r)] = m;
    (*rstd)[static_cast<size_t>(r)] = 1.0 / std::sqrt(s2 / static_cast<double>(D) + eps);
  }
  const bool has_g = gamma, has_b = beta;
  Tensor gv = gamma ? *gamma : Tensor{}, bv = beta ? *beta : Tensor{};
  return [=](int64_t i) {
    const int64_t r = i / D, j = i % D;
    double v = (at_flat(x, i) - (*mean)[static_cast<size_t>(r)]) * (*rstd)[static_cast<size_t>(r)];
    if (has_g) v *= at(gv, {j});
    if (has_b) v += at(bv, {j});
    return v;
  };
}

ElementFn softmax(const Tensor& x, double scale, bool causal) {
  const int64_t C = x.dim(-1), rows = x.numel() / C, R = causal ? x.dim(-2) : 1;
  auto mx = std::make_shared<std::vector<double>>(static_cast<size_t>(rows));
  auto sum = std::make_shared<std::vector<double>>(static_cast<size_t>(rows));
  auto keep = [=](int64_t r) { return causal ? std::clamp<int64_t>(r % R + (C - R) + 1, 0, C) : C; };
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < keep(r); ++j) m = std::max(m, scale * at_flat(x, r * C + j));
    for (int64_t j = 0; j < keep(r); ++j) s += std::exp(scale * at_flat(x, r * C + j) - m);
    (*mx)[static_cast<size_t>(r)] = m;
    (*sum)[static_cast<size_t>(r)] = s;
  }
  return [=](int64_t i) {
    const int64_t r = i / C, j = i % C;
    if (j >= keep(r)) return 0.0;
    return std::exp(scale * at_flat(x, i) - (*mx)[static_cast<size_t>(r)]) / (*sum)[static_cast<size_t>(r)];
  };
}

ElementFn attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads, double scale,
                    bool causal) {
  const int64_t Sq = q.shape[1], Sk = k.shape[1], HD = q.shape[2], D = HD / heads;
  if (scale == 0) scale = 1.0 / std::sqrt(static_cast<double>(D));
  // One query row of one head yields D outputs; keep the last row computed.
  struct Memo {
    std::mutex mu;
    int64_t key = -1;
    std::vector<double> row;
  };
  auto memo = std::make_shared<Memo>();
  return [=](int64_t i) {
    const int64_t b = i / (Sq * HD), s = (i / HD) % Sq, h = (i % HD) / D, d = i % D;
    const int64_t key = (b * Sq + s) * heads + h;
    std::lock_guard<std::mutex> lock(memo->mu);
    if (memo->key != key) {
      const int64_t n_keys = causal ? std::clamp<int64_t>(s + (Sk - Sq) + 1, 0, Sk) : Sk;
      std::vector<double> logits(static_cast<size_t>(n_keys));
      double m = -INFINITY;
      for (int64_t j = 0; j < n_keys; ++j) {
        double dot = 0;
        for (int64_t e = 0; e < D; ++e) dot += at(q, {b, s, h * D + e}) * at(k, {b, j, h * D + e});
        logits[static_cast<size_t>(j)] = dot * scale;
        m = std::max(m, dot * scale);
      }
      double z = 0;
      for (auto& l : logits) z += (l = std::exp(l - m));
      memo->row.assign(static_cast<size_t>(D), 0.0);
      for (int64_t j = 0; j < n_keys; ++j)
        for (int64_t e = 0; e < D; ++e)
          memo->row[static_cast<size_t>(e)] += logits[static_cast<size_t>(j)] / z * at(v, {b, j, h * D + e});
      memo->key = key;
    }
    return memo->row[static_cast<size_t>(d)];
  };
}

ElementFn geglu(const Tensor& x) {
  const int64_t F = x.dim(-1) / 2;
  return [=](int64_t i) {
    const int64_t r = i / F, j = i % F;
    const double a = at_flat(x, r * 2 * F + j), g = at_flat(x, r * 2 * F + F + j);
    return a * activation(Activation::kGelu, g);
  };
}

ElementFn binary(BinaryOp op, const Tensor& a, const Tensor& b) {
  const std::vector<int64_t> shape = a.shape_vec();
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, shape);
    std::vector<int64_t> bidx(static_cast<size_t>(b.ndim));
    const int lead = a.ndim - b.ndim;
    for (int d = 0; d < b.ndim; ++d) bidx[static_cast<size_t>(d)] = b.shape[d] == 1 ? 0 : idx[static_cast<size_t>(d + lead)];
    const double x = at_vec(a, idx), y = at_vec(b, bidx);
    switch (op) {
      case BinaryOp::kAdd: return x + y;
      case BinaryOp::kSub: return x - y;
      case BinaryOp::kMul: return x * y;
      case BinaryOp::kDiv: return x / y;
    }
    return 0.0;
  };
}

ElementFn concat(const std::vector<Tensor>& xs, int dim, const std::vector<int64_t>& out_shape) {
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, out_shape);
    int64_t pos = idx[static_cast<size_t>(dim)];
    for (const Tensor& x : xs) {
      if (pos < x.shape[dim]) {
        idx[static_cast<size_t>(dim)] = pos;
        return at_vec(x, idx);
      }
      pos -= x.shape[dim];
    }
    return static_cast<double>(NAN);
  };
}

ElementFn upsample_nearest2x(const Tensor& x) {
  const std::vector<int64_t> out = {x.shape[0], x.shape[1], 2 * x.shape[2], 2 * x.shape[3]};
  return [=](int64_t i) {
    std::vector<int64_t> idx = unflatten(i, out);
    return at(x, {idx[0], idx[1], idx[2] / 2, idx[3] / 2});
  };
}

ElementFn timestep_embedding(const Tensor& t, const TimestepEmbeddingOptions& o) {
  const int64_t dim = o.dim, half = dim / 2;
  return [=](int64_t i) {
    const int64_t n = i / dim, j = i % dim;
    if (j >= 2 * half) return 0.0;  // odd dim: zero pad
    const bool first = j < half;
    const int64_t f = first ? j : j - half;
    const double freq = std::exp(-std::log(static_cast<double>(o.max_period)) * static_cast<double>(f) /
                                 (static_cast<double>(half) - o.downscale_freq_shift));
    const double arg = at(t, {n}) * freq;
    const bool is_sin = o.flip_sin_to_cos ? !first : first;
    return is_sin ? std::sin(arg) : std::cos(arg);
  };
}

ElementFn embedding(const Tensor& ids, const Tensor& table) {
  const int64_t D = table.shape[1];
  return [=](int64_t i) {
    const auto id = static_cast<int64_t>(at_flat(ids, i / D));
    return at(table, {id, i % D});
  };
}

ElementFn lora_merge(const Tensor& base, const std::vector<Tensor>& ups, const std::vector<Tensor>& downs,
                     const std::vector<double>& coefficients) {
  const int64_t I = base.shape[1];
  return [=](int64_t i) {
    const int64_t o = i / I, col = i % I;
    double v = at(base, {o, col});
    for (size_t l = 0; l < ups.size(); ++l) {
      double s = 0;
      for (int64_t k = 0; k < ups[l].shape[1]; ++k) s += at(ups[l], {o, k}) * at(downs[l], {k, col});
      v += coefficients[l] * s;
    }
    return v;
  };
}

ElementFn parity_sums(const Tensor& a, const Tensor& b) {
  auto r = std::make_shared<std::vector<double>>(8, 0.0);
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = at_flat(a, i), y = at_flat(b, i);
    if (!std::isfinite(x)) (*r)[5] += 1;
    if (!std::isfinite(y)) (*r)[6] += 1;
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    (*r)[0] += x * y;
    (*r)[1] += x * x;
    (*r)[2] += y * y;
    (*r)[3] += (x - y) * (x - y);
    (*r)[4] = std::max((*r)[4], std::fabs(x - y));
  }
  (*r)[7] = static_cast<double>(n);
  return [=](int64_t i) { return (*r)[static_cast<size_t>(i)]; };
}

}  // namespace hipq::kernels::parity::ref
