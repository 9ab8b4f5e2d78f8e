// Naive reference computations for the model block tests: plain loops in
// double precision over host vectors, sharing nothing with the backends or the
// blocks under test. Also random weights for a block's parameter list.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/models/device_tensor.h"
#include "engine/models/weight_binder.h"
#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine::testing {

using Vec = std::vector<float>;

inline Vec random_vec(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Random values for every declared parameter (norm weights around 1 so the
// affine part is exercised), held by an InMemoryWeightSource.
inline std::shared_ptr<InMemoryWeightSource> random_weights(const std::vector<ParamSpec>& specs, uint32_t seed) {
  std::mt19937 rng(seed);
  auto src = std::make_shared<InMemoryWeightSource>("random test weights");
  for (const ParamSpec& s : specs) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    Vec v = random_vec(rng, static_cast<size_t>(n), 0.3f);
    if (s.init.kind == ParamInit::Kind::kOnes)
      for (auto& x : v) x = 1.0f + 0.2f * x;
    src->add(s.name, HostTensor::from_f32(std::move(v), s.shape));
  }
  return src;
}

inline Vec param(const WeightSource& w, const std::string& name) { return w.get(name).value().to_f32(); }

inline Vec linear(const Vec& x, int64_t rows, int64_t in, const Vec& w, int64_t out, const Vec* b) {
  Vec y(static_cast<size_t>(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double acc = b ? (*b)[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(x[r * in + i]) * w[o * in + i];
      y[r * out + o] = static_cast<float>(acc);
    }
  return y;
}

inline Vec conv2d(const Vec& x, int64_t n, int64_t c, int64_t h, int64_t w, const Vec& wt, int64_t o, int k,
                  int stride, int pad, const Vec* b, int64_t* ho_out = nullptr, int64_t* wo_out = nullptr) {
  const int64_t ho = (h + 2 * pad - k) / stride + 1, wo = (w + 2 * pad - k) / stride + 1;
  Vec y(static_cast<size_t>(n * o * ho * wo));
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int64_t oc = 0; oc < o; ++oc)
      for (int64_t yy = 0; yy < ho; ++yy)
        for (int64_t xx = 0; xx < wo; ++xx) {
          double acc = b ? (*b)[oc] : 0.0;
          for (int64_t ic = 0; ic < c; ++ic)
            for (int ky = 0; ky < k; ++ky)
              for (int kx = 0; kx < k; ++kx) {
                const int64_t iy = yy * stride - pad + ky, ix = xx * stride - pad + kx;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                acc += static_cast<double>(x[((b0 * c + ic) * h + iy) * w + ix]) * wt[((oc * c + ic) * k + ky) * k + kx];
              }
          y[((b0 * o + oc) * ho + yy) * wo + xx] = static_cast<float>(acc);
        }
  if (ho_out) *ho_out = ho;
  if (wo_out) *wo_out = wo;
  return y;
}

inline Vec group_norm(const Vec& x, int64_t n, int64_t c, int64_t spatial, int groups, float eps, const Vec& g,
                      const Vec& b) {
  Vec y(x.size());
  const int64_t cg = c / groups;
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int gi = 0; gi < groups; ++gi) {
      double mean = 0, var = 0;
      const int64_t cnt = cg * spatial;
      for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch)
        for (int64_t s = 0; s < spatial; ++s) mean += x[(b0 * c + ch) * spatial + s];
      mean /= cnt;
      for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch)
        for (int64_t s = 0; s < spatial; ++s) {
          const double d = x[(b0 * c + ch) * spatial + s] - mean;
          var += d * d;
        }
      var /= cnt;
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t ch = gi * cg; ch < (gi + 1) * cg; ++ch)
        for (int64_t s = 0; s < spatial; ++s) {
          const size_t i = static_cast<size_t>((b0 * c + ch) * spatial + s);
          y[i] = static_cast<float>((x[i] - mean) * inv * g[ch] + b[ch]);
        }
    }
  return y;
}

inline Vec layer_norm(const Vec& x, int64_t d, float eps, const Vec& g, const Vec& b) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < d; ++i) mean += x[r * d + i];
    mean /= d;
    for (int64_t i = 0; i < d; ++i) var += (x[r * d + i] - mean) * (x[r * d + i] - mean);
    var /= d;
    for (int64_t i = 0; i < d; ++i)
      y[r * d + i] = static_cast<float>((x[r * d + i] - mean) / std::sqrt(var + eps) * g[i] + b[i]);
  }
  return y;
}

inline float silu(float v) { return v / (1.0f + std::exp(-v)); }
inline float gelu(float v) { return 0.5f * v * (1.0f + std::erf(v / std::sqrt(2.0f))); }
inline float quick_gelu(float v) { return v / (1.0f + std::exp(-1.702f * v)); }
template <typename F>
inline Vec map(Vec v, F f) {
  for (auto& x : v) x = f(x);
  return v;
}
inline Vec add(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// q [B, Sq, H*D], k/v [B, Sk, H*D].
inline Vec attention(const Vec& q, const Vec& k, const Vec& v, int64_t bsz, int64_t sq, int64_t sk, int heads,
                     int64_t dh, bool causal) {
  const int64_t w = heads * dh;
  Vec o(static_cast<size_t>(bsz * sq * w));
  for (int64_t b = 0; b < bsz; ++b)
    for (int h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        std::vector<double> s(static_cast<size_t>(sk));
        double mx = -1e300;
        for (int64_t j = 0; j < sk; ++j) {
          if (causal && j > i) {
            s[j] = -1e300;
            continue;
          }
          double acc = 0;
          for (int64_t d = 0; d < dh; ++d) acc += static_cast<double>(q[(b * sq + i) * w + h * dh + d]) * k[(b * sk + j) * w + h * dh + d];
          s[j] = acc / std::sqrt(static_cast<double>(dh));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < sk; ++j) {
          s[j] = (causal && j > i) ? 0.0 : std::exp(s[j] - mx);
          sum += s[j];
        }
        for (int64_t d = 0; d < dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < sk; ++j) acc += s[j] / sum * v[(b * sk + j) * w + h * dh + d];
          o[(b * sq + i) * w + h * dh + d] = static_cast<float>(acc);
        }
      }
  return o;
}

// [N, C, S] <-> [N, S, C]
inline Vec transpose12(const Vec& x, int64_t n, int64_t a, int64_t b) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < a; ++p)
      for (int64_t q = 0; q < b; ++q) y[(i * b + q) * a + p] = x[(i * a + p) * b + q];
  return y;
}

inline double max_abs_diff(const Vec& a, const Vec& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  return m;
}

inline std::unique_ptr<kernels::Backend> cpu_backend() { return kernels::make_backend("cpu").value(); }

inline DeviceTensor upload(kernels::Backend& be, const Vec& v, const std::vector<int64_t>& shape,
                           kernels::DType dt = kernels::DType::kF32) {
  return DeviceTensor::from_host(be, v.data(), shape, dt).value();
}
inline Vec download(kernels::Backend& be, const kernels::Tensor& t) { return to_host_f32(be, t).value(); }

}  // namespace hipq::engine::testing
