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
#include "kernels/cpu/simd.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {
namespace {

constexpr int64_t kQueryBlock = 4;

// s_r[j] = sum_d q_r[d] * kt[d][j] for four query rows, keys [0, nk).
HIPQ_CPU_HOT void scores4(const float* __restrict q0, const float* __restrict q1, const float* __restrict q2,
                          const float* __restrict q3, const float* __restrict kt, int64_t Sk, int64_t D,
                          int64_t nk, float* __restrict s0, float* __restrict s1, float* __restrict s2,
                          float* __restrict s3) {
  for (int64_t j = 0; j < nk; ++j) s0[j] = s1[j] = s2[j] = s3[j] = 0.0f;
  for (int64_t d = 0; d < D; ++d) {
    const float* __restrict kd = kt + d * Sk;
    const float x0 = q0[d], x1 = q1[d], x2 = q2[d], x3 = q3[d];
    for (int64_t j = 0; j < nk; ++j) {
      const float kv = kd[j];
      s0[j] += x0 * kv;
      s1[j] += x1 * kv;
      s2[j] += x2 * kv;
      s3[j] += x3 * kv;
    }
  }
}

// acc_r[d] = sum_j p_r[j] * v[j][d] for four rows, keys [0, nk).
HIPQ_CPU_HOT void values4(const float* __restrict p0, const float* __restrict p1, const float* __restrict p2,
                          const float* __restrict p3, const float* __restrict v, int64_t D, int64_t nk,
                          float* __restrict a0, float* __restrict a1, float* __restrict a2,
                          float* __restrict a3) {
  for (int64_t d = 0; d < D; ++d) a0[d] = a1[d] = a2[d] = a3[d] = 0.0f;
  for (int64_t j = 0; j < nk; ++j) {
    const float* __restrict vj = v + j * D;
    const float x0 = p0[j], x1 = p1[j], x2 = p2[j], x3 = p3[j];
    for (int64_t d = 0; d < D; ++d) {
      const float vv = vj[d];
      a0[d] += x0 * vv;
      a1[d] += x1 * vv;
      a2[d] += x2 * vv;
      a3[d] += x3 * vv;
    }
  }
}

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

  thread_local std::vector<float> q_buf, k_buf, v_buf;
  const float* Q = as_f32(q, q_buf);
  const float* Kx = as_f32(k, k_buf);
  const float* Vx = as_f32(v, v_buf);
  // Per (b, h): K^T as [D, Sk], V as [Sk, D].
  thread_local std::vector<float> kt_buf, vp_buf;
  kt_buf.resize(static_cast<size_t>(B * H * D * Sk));
  vp_buf.resize(static_cast<size_t>(B * H * Sk * D));
  // Plain pointers: the lambdas run on pool threads, where the thread_local
  // names would refer to those threads' own (empty) buffers.
  float* const kt = kt_buf.data();
  float* const vp = vp_buf.data();
  ThreadPool::global().parallel_for(B * H, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t bh = i0; bh < i1; ++bh) {
      const int64_t b = bh / H, h = bh % H;
      float* ktp = kt + bh * D * Sk;
      float* vpp = vp + bh * Sk * D;
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
    float* acc = scratch(1, static_cast<size_t>(kQueryBlock * D));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bh = t / qblocks, qb = t % qblocks;
      const int64_t b = bh / H, h = bh % H;
      const float* ktp = kt + bh * D * Sk;
      const float* vpp = vp + bh * Sk * D;
      const int64_t i0 = qb * kQueryBlock, rows = std::min(kQueryBlock, Sq - i0);
      // Rows past the end of the sequence repeat the last one; their results are dropped.
      const float* q[kQueryBlock];
      int64_t n_keys[kQueryBlock];
      int64_t nk_max = 0;
      for (int64_t r = 0; r < kQueryBlock; ++r) {
        const int64_t i = i0 + std::min(r, rows - 1);
        q[r] = Q + (b * Sq + i) * HD + h * D;
        n_keys[r] = o.causal ? std::clamp<int64_t>(i + offset + 1, 0, Sk) : Sk;
        nk_max = std::max(nk_max, n_keys[r]);
      }
      float* s[kQueryBlock] = {scores, scores + Sk, scores + 2 * Sk, scores + 3 * Sk};
      float* a[kQueryBlock] = {acc, acc + D, acc + 2 * D, acc + 3 * D};
      scores4(q[0], q[1], q[2], q[3], ktp, Sk, D, nk_max, s[0], s[1], s[2], s[3]);
      float inv[kQueryBlock];
      for (int64_t r = 0; r < kQueryBlock; ++r) {
        float* sr = s[r];
        const int64_t nk = n_keys[r];
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < nk; ++j) mx = std::max(mx, sr[j] * scale);
        float sum = 0.0f;
        for (int64_t j = 0; j < nk; ++j) {
          sr[j] = std::exp(sr[j] * scale - mx);
          sum += sr[j];
        }
        for (int64_t j = nk; j < nk_max; ++j) sr[j] = 0.0f;
        inv[r] = nk > 0 ? 1.0f / sum : 0.0f;  // a fully masked row is all zeros
      }
      values4(s[0], s[1], s[2], s[3], vpp, D, nk_max, a[0], a[1], a[2], a[3]);
      for (int64_t r = 0; r < rows; ++r) {
        float* out_row = O + (b * Sq + i0 + r) * HD + h * D;
        for (int64_t d = 0; d < D; ++d) out_row[d] = a[r][d] * inv[r];
      }
    }
  });
  if (!direct) scatter_f32(O, out);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
