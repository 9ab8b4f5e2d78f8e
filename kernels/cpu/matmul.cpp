// matmul on the cpu: out[b] = act(alpha * op(a[b]) @ op(b[b]) + bias) + residual[b],
// or with geglu_pairs value * gelu(gate) over the product's column pairs.
// Operands are packed to contiguous fp32 ([M, K] and [K, N]) and multiplied
// in blocks (columns of 256, depth of 128) by a 4 x 16 register-tile kernel,
// with an i-k-j loop the compiler vectorises for the edges; row blocks are
// spread over the pool.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::kernels::cpu {
namespace {

constexpr int64_t kBlockN = 256;
constexpr int64_t kBlockK = 128;

// c_r[j] += a_r * b[j] for four rows at once over one depth block.
HIPQ_CPU_HOT void kernel4(const float* __restrict a0, const float* __restrict a1, const float* __restrict a2,
             const float* __restrict a3, const float* __restrict b, int64_t ldb,
             float* __restrict c0, float* __restrict c1, float* __restrict c2,
             float* __restrict c3, int64_t kb, int64_t nb) {
  for (int64_t k = 0; k < kb; ++k) {
    const float* __restrict bk = b + k * ldb;
    const float x0 = a0[k], x1 = a1[k], x2 = a2[k], x3 = a3[k];
    for (int64_t j = 0; j < nb; ++j) {
      const float bv = bk[j];
      c0[j] += x0 * bv;
      c1[j] += x1 * bv;
      c2[j] += x2 * bv;
      c3[j] += x3 * bv;
    }
  }
}

HIPQ_CPU_HOT void kernel1(const float* __restrict a0, const float* __restrict b, int64_t ldb,
             float* __restrict c0, int64_t kb, int64_t nb) {
  for (int64_t k = 0; k < kb; ++k) {
    const float* __restrict bk = b + k * ldb;
    const float x0 = a0[k];
    for (int64_t j = 0; j < nb; ++j) c0[j] += x0 * bk[j];
  }
}

// C[i0:i1, :] = A[i0:i1, :] @ B, all row-major contiguous fp32.
void gemm_rows(const float* A, const float* B, float* C, int64_t N, int64_t K, int64_t i0,
               int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) std::memset(C + i * N, 0, static_cast<size_t>(N) * sizeof(float));
  for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
    const int64_t nb = std::min(kBlockN, N - j0);
    for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
      const int64_t kb = std::min(kBlockK, K - k0);
      const float* b = B + k0 * N + j0;
      int64_t i = i0;
      // 16-column strips of the B block packed contiguously ([strip][k][16]):
      // rows of B N floats apart would fight over the same cache sets.
      // The register-tile kernel needs 16 vector registers (AVX2); with SSE
      // only, the i-k-j kernel is faster.
      static const bool use_tile = tile_kernel_available();
      const int64_t nb16 = use_tile ? nb / 16 * 16 : 0;
      float* panel = scratch(3, static_cast<size_t>(kBlockK * kBlockN));
      if (i1 - i0 >= 4)
        for (int64_t jj = 0; jj < nb16; jj += 16)
          for (int64_t k = 0; k < kb; ++k)
            std::memcpy(panel + (jj * kb) + k * 16, b + k * N + jj, 16 * sizeof(float));
      for (; i + 4 <= i1; i += 4) {
        const float* a = A + i * K + k0;
        for (int64_t jj = 0; jj < nb16; jj += 16) micro_4x16(a, K, panel + jj * kb, 16, C + i * N + j0 + jj, N, kb);
        if (nb16 < nb)
          kernel4(a, a + K, a + 2 * K, a + 3 * K, b + nb16, N, C + i * N + j0 + nb16,
                  C + (i + 1) * N + j0 + nb16, C + (i + 2) * N + j0 + nb16, C + (i + 3) * N + j0 + nb16, kb,
                  nb - nb16);
      }
      for (; i < i1; ++i) kernel1(A + i * K + k0, b, N, C + i * N + j0, kb, nb);
    }
  }
}

void gemm(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K) {
  const int64_t blocks = (M + 3) / 4;
  const int64_t flops_per_block = std::max<int64_t>(1, 8 * N * K);
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 21) / flops_per_block);
  ThreadPool::global().parallel_for(blocks, grain, [&](int64_t b, int64_t e) {
    gemm_rows(A, B, C, N, K, b * 4, std::min(M, e * 4));
  });
}

// The [rows, cols] matrix of batch `bi` of t (2 or 3 dims), transposed if asked.
Tensor matrix_view(const Tensor& t, int64_t bi, bool trans) {
  Tensor m = t;
  if (t.ndim == 3) {
    m = t.slice(0, bi, 1);
    m.ndim = 2;
    m.shape[0] = t.shape[1];
    m.shape[1] = t.shape[2];
    m.stride[0] = t.stride[1];
    m.stride[1] = t.stride[2];
  }
  return trans ? m.transpose(0, 1) : m;
}

}  // namespace

Status matmul(const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o) {
  constexpr std::string_view op = "matmul";
  HIPQ_RETURN_IF_ERROR(check_host(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_float(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_like(op, "b", b, "a", a));
  HIPQ_RETURN_IF_ERROR(check_like(op, "out", out, "a", a));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "a", a, 2, 3));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "b", b, 2, 3));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "out", out, 2, 3));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "out", out));
  const int64_t M = o.trans_a ? a.dim(-1) : a.dim(-2);
  const int64_t K = o.trans_a ? a.dim(-2) : a.dim(-1);
  const int64_t Kb = o.trans_b ? b.dim(-1) : b.dim(-2);
  const int64_t N = o.trans_b ? b.dim(-2) : b.dim(-1);
  if (K != Kb)
    return invalid(op, "inner dims differ: a " + a.describe() + (o.trans_a ? " (transposed)" : "") +
                           " has K = " + std::to_string(K) + ", b " + b.describe() +
                           (o.trans_b ? " (transposed)" : "") + " has K = " + std::to_string(Kb));
  const int64_t Ba = a.ndim == 3 ? a.shape[0] : 1;
  const int64_t Bb = b.ndim == 3 ? b.shape[0] : 1;
  if (Ba != 1 && Bb != 1 && Ba != Bb)
    return invalid(op, "batch dims differ: a " + a.describe() + ", b " + b.describe());
  const int64_t batch = std::max(Ba, Bb);
  HIPQ_RETURN_IF_ERROR(check_matmul_options(o, N, b));
  const int64_t out_n = o.geglu_pairs ? N / 2 : N;
  std::vector<int64_t> want = {M, out_n};
  if (out.ndim == 3 || batch > 1) want.insert(want.begin(), batch);
  HIPQ_RETURN_IF_ERROR(check_shape(op, "out", out, want));
  if (o.bias) {
    HIPQ_RETURN_IF_ERROR(check_like(op, "bias", *o.bias, "a", a));
    HIPQ_RETURN_IF_ERROR(check_shape(op, "bias", *o.bias, {N}));
  }
  if (o.residual) {
    HIPQ_RETURN_IF_ERROR(check_like(op, "residual", *o.residual, "a", a));
    HIPQ_RETURN_IF_ERROR(check_shape(op, "residual", *o.residual, out.shape_vec()));
  }
  if (M == 0 || N == 0) return Status::Ok();

  // A batch of a's against one b is one tall GEMM.
  const bool fold = batch > 1 && Bb == 1 && !o.trans_a && a.is_contiguous();
  const int64_t rows = fold ? batch * M : M;
  const int64_t gemms = fold ? 1 : batch;
  const size_t out_numel = static_cast<size_t>(batch * M * N);

  // Accumulate straight into an f32 out unless out shares memory with an input.
  const bool direct = out.dtype == DType::kF32 && !o.geglu_pairs && !overlaps(out, a) && !overlaps(out, b);
  float* C = direct ? static_cast<float*>(out.data) : scratch(2, out_numel);
  thread_local std::vector<float> bias_buf, res_buf, a_buf, b_buf;
  const float* bias = o.bias ? as_f32(*o.bias, bias_buf) : nullptr;
  const float* res = nullptr;
  if (o.residual) {
    if (direct && overlaps(out, *o.residual)) {
      res_buf.resize(out_numel);
      gather_f32(*o.residual, res_buf.data());
      res = res_buf.data();
    } else {
      res = as_f32(*o.residual, res_buf);
    }
  }

  const float* B = nullptr;
  for (int64_t g = 0; g < gemms; ++g) {
    const float* A = fold ? as_f32(a, a_buf) : as_f32(matrix_view(a, Ba > 1 ? g : 0, o.trans_a), a_buf);
    if (g == 0 || Bb > 1) B = as_f32(matrix_view(b, Bb > 1 ? g : 0, o.trans_b), b_buf);
    gemm(A, B, C + g * M * N, rows, N, K);
  }

  const float alpha = o.alpha;
  const Activation act = o.activation;
  const int64_t total_rows = batch * M;
  ThreadPool::global().parallel_for(total_rows, std::max<int64_t>(1, 16384 / N), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* c = C + r * N;
      const float* rr = res ? res + r * N : nullptr;
      for (int64_t j = 0; j < N; ++j) {
        float v = alpha * c[j];
        if (bias) v += bias[j];
        v = apply_activation(act, v);
        if (rr) v += rr[j];
        c[j] = v;
      }
      // (value, gate) pairs -> value * gelu(gate), packed at the row's start.
      if (o.geglu_pairs)
        for (int64_t j = 0; j < N / 2; ++j) c[j] = c[2 * j] * gelu_erf(c[2 * j + 1]);
    }
  });
  if (o.geglu_pairs)  // rows of N / 2 outputs, N apart -> contiguous (row r moves down onto rows < r)
    for (int64_t r = 1; r < total_rows; ++r)
      std::memmove(C + r * out_n, C + r * N, static_cast<size_t>(out_n) * sizeof(float));
  if (!direct) scatter_f32(C, out);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
