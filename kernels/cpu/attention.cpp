// attention on the cpu: out = softmax(scale * q k^T [+ causal mask]) v per
// head, on [B, S, H*D] layouts. K is packed transposed per head ([D, Sk]) and
// V as [Sk, D], both fp32; each task scores a block of query rows against all
// keys (one row of Sk scores per query, never an Sq x Sk matrix), normalises
// with a max-subtracted exp, and accumulates the weighted values.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {
namespace {
constexpr int64_t kQueryBlock = 4;
}  // namespace

Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                 const AttentionOptions& o) {
  constexpr std::string_view op = "attention";
  HIPQ_RETURN_IF_ERROR(check_host(op, "q", q));
  HIPQ_RETURN_IF_ERROR(check_float(op, "q", q));
  HIPQ_RETURN_IF_ERROR(check_like(op, "k", k, "q", q));
  HIPQ_RETURN_IF_ERROR(check_like(op, "v", v, "q", q));
  HIPQ_RETURN_IF_ERROR(check_like(op, "out", out, "q", q));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "q", q, 3, 3));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "k", k, 3, 3));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "v", v, 3, 3));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "out", out));
  const int64_t B = q.shape[0], Sq = q.shape[1], HD = q.shape[2], Sk = k.shape[1];
  if (o.heads < 1 || HD % o.heads != 0)
    return invalid(op, "heads = " + std::to_string(o.heads) + " does not divide the last dim of 'q' " +
                           q.describe());
  const int64_t H = o.heads, D = HD / H;
  HIPQ_RETURN_IF_ERROR(check_shape(op, "k", k, {B, Sk, HD}));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "v", v, {B, Sk, HD}));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "out", out, {B, Sq, HD}));
  if (out.numel() == 0) return Status::Ok();
  const float scale = o.scale != 0.0f ? o.scale : static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));

  std::vector<float> q_buf, k_buf, v_buf;
  const float* Q = as_f32(q, q_buf);
  const float* Kx = as_f32(k, k_buf);
  const float* Vx = as_f32(v, v_buf);
  // Per (b, h): K^T as [D, Sk], V as [Sk, D].
  std::vector<float> kt(static_cast<size_t>(B * H * D * Sk));
  std::vector<float> vp(static_cast<size_t>(B * H * Sk * D));
  ThreadPool::global().parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      float* ktp = kt.data() + bh * D * Sk;
      float* vpp = vp.data() + bh * Sk * D;
      for (int64_t j = 0; j < Sk; ++j) {
        const float* kr = Kx + (b * Sk + j) * HD + h * D;
        const float* vr = Vx + (b * Sk + j) * HD + h * D;
        for (int64_t d = 0; d < D; ++d) ktp[d * Sk + j] = kr[d];
        std::memcpy(vpp + j * D, vr, static_cast<size_t>(D) * sizeof(float));
      }
    }
  });

  const bool direct = out.dtype == DType::kF32 && !overlaps(out, q) && !overlaps(out, k) && !overlaps(out, v);
  float* O = direct ? static_cast<float*>(out.data) : scratch(2, static_cast<size_t>(out.numel()));
  const int64_t qblocks = (Sq + kQueryBlock - 1) / kQueryBlock;
  const int64_t offset = Sk - Sq;  // causal: query i sees keys j <= i + offset
  const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, Sk * D));
  ThreadPool::global().parallel_for(B * H * qblocks, grain, [&](int64_t t0, int64_t t1) {
    float* scores = scratch(0, static_cast<size_t>(kQueryBlock * Sk));
    float* acc = scratch(1, static_cast<size_t>(D));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / qblocks, qb = t % qblocks;
      const int64_t b = bh / H, h = bh % H;
      const float* ktp = kt.data() + bh * D * Sk;
      const float* vpp = vp.data() + bh * Sk * D;
      const int64_t i0 = qb * kQueryBlock, i1 = std::min(Sq, i0 + kQueryBlock);
      for (int64_t i = i0; i < i1; ++i) std::memset(scores + (i - i0) * Sk, 0, static_cast<size_t>(Sk) * sizeof(float));
      for (int64_t d = 0; d < D; ++d) {
        const float* kd = ktp + d * Sk;
        for (int64_t i = i0; i < i1; ++i) {
          const float qv = Q[(b * Sq + i) * HD + h * D + d];
          float* __restrict s = scores + (i - i0) * Sk;
          for (int64_t j = 0; j < Sk; ++j) s[j] += qv * kd[j];
        }
      }
      for (int64_t i = i0; i < i1; ++i) {
        float* s = scores + (i - i0) * Sk;
        const int64_t n_keys = o.causal ? std::clamp<int64_t>(i + offset + 1, 0, Sk) : Sk;
        float* out_row = O + (b * Sq + i) * HD + h * D;
        if (n_keys == 0) {
          std::memset(out_row, 0, static_cast<size_t>(D) * sizeof(float));
          continue;
        }
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < n_keys; ++j) mx = std::max(mx, s[j] * scale);
        float sum = 0.0f;
        for (int64_t j = 0; j < n_keys; ++j) {
          s[j] = std::exp(s[j] * scale - mx);
          sum += s[j];
        }
        std::memset(acc, 0, static_cast<size_t>(D) * sizeof(float));
        for (int64_t j = 0; j < n_keys; ++j) {
          const float p = s[j];
          const float* __restrict vr = vpp + j * D;
          for (int64_t d = 0; d < D; ++d) acc[d] += p * vr[d];
        }
        const float inv = 1.0f / sum;
        for (int64_t d = 0; d < D; ++d) out_row[d] = acc[d] * inv;
      }
    }
  });
  if (!direct) scatter_f32(O, out);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
