// The cpu ops: one free function per op, one file per op (kernels/cpu/<op>.cpp),
// with the names the hip backend uses. Semantics are those documented on
// Backend (kernels/backend.h) and in docs/kernels.md. Each checks shapes,
// dtypes and locations first (InvalidArgument naming op, operand and shapes)
// and then computes on the host, in fp32 (fp64 for statistics and
// parity_sums), reading and writing f32/f16/bf16 through dtype.h.
// Work is spread over ThreadPool::global().
// Thread safety: ops on disjoint outputs may run concurrently.
#pragma once

#include <span>

#include "base/result.h"
#include "base/status.h"
#include "kernels/backend.h"
#include "kernels/tensor.h"

namespace hipq::kernels::cpu {

Status matmul(const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o);
Status lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out);
Status quantize_fp8_rows(const Tensor& x, Tensor& codes, Tensor& scales);
Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o);
Status conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, Tensor& y, const Conv2dOptions& o);
Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o);
Status group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                  const GroupNormOptions& o);
Status layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y, float eps);
Status layer_norm_fp8(const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps, Tensor& codes,
                      Tensor& scales);
Status softmax(const Tensor& x, Tensor& y, float scale, bool causal);
Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                 const AttentionOptions& o);
Status unary(UnaryOp op, const Tensor& x, Tensor& y);
Status geglu(const Tensor& x, Tensor& y);
Status binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y);
Status scale(const Tensor& x, Tensor& y, float alpha, float beta);
Status concat(std::span<const Tensor> xs, int dim, Tensor& y);
Status upsample_nearest2x(const Tensor& x, Tensor& y);
Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o);
Status embedding(const Tensor& ids, const Tensor& table, Tensor& y);
Status copy(const Tensor& src, Tensor& dst);
Status fill(Tensor& y, float value);
Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b);

}  // namespace hipq::kernels::cpu
