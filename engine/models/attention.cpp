#include "engine/models/attention.h"

#include <cmath>

namespace hipq::engine {

Result<Attention> Attention::bind(WeightBinder& b, const std::string& prefix, AttentionKind kind,
                                  int64_t query_dim, int64_t kv_dim, int heads, int64_t head_dim,
                                  bool qkv_bias) {
  if (kind == AttentionKind::kSelf && kv_dim != query_dim)
    return Status::InvalidArgument("attention '" + prefix +
                                   "': a self attention reads keys of its own width " +
                                   std::to_string(query_dim) + ", not " + std::to_string(kv_dim));
  Attention a;
  a.kind = kind;
  a.heads = heads;
  a.head_dim = head_dim;
  const int64_t inner = heads * head_dim;
  const std::string q = join_key(prefix, "to_q"), k = join_key(prefix, "to_k"), v = join_key(prefix, "to_v");
  if (kind == AttentionKind::kSelf) {
    HIPQ_ASSIGN_OR_RETURN(a.to_qkv, Linear::bind_stacked(b, {q, k, v}, query_dim, inner, qkv_bias));
  } else {
    HIPQ_ASSIGN_OR_RETURN(a.to_q, Linear::bind(b, q, query_dim, inner, qkv_bias));
    HIPQ_ASSIGN_OR_RETURN(a.to_kv, Linear::bind_stacked(b, {k, v}, kv_dim, inner, qkv_bias));
  }
  HIPQ_ASSIGN_OR_RETURN(a.to_out, Linear::bind(b, join_key(prefix, "to_out.0"), inner, query_dim, true));
  return a;
}

Result<DeviceTensor> Attention::project_context(kernels::Backend& be, const kernels::Tensor& context) const {
  if (kind != AttentionKind::kCross)
    return Status::InvalidArgument("attention: a self attention has no context to project");
  if (context.ndim != 3)
    return Status::InvalidArgument("attention: context " + context.describe() + " is not [B, S, features]");
  return to_kv(be, context);
}

Result<DeviceTensor> Attention::forward(kernels::Backend& be, const kernels::Tensor& x,
                                        const kernels::Tensor* context, const kernels::Tensor* residual,
                                        const ContextKV* made, const kernels::Fp8Rows* x_codes) const {
  const bool self = kind == AttentionKind::kSelf;
  if (self != (context == nullptr))
    return Status::InvalidArgument(self ? "attention: a self attention takes no context"
                                        : "attention: a cross attention needs its context");
  if (x.ndim != 3)
    return Status::InvalidArgument("attention: input " + x.describe() + " is not [B, S, features]");
  const int64_t inner = heads * head_dim;
  // q, k and v: column ranges of the stacked products, [B, S, inner] views
  // whose sequence stride is the product's width.
  DeviceTensor qkv, q_only, kv;
  kernels::Tensor q, k, v;
  if (self) {
    HIPQ_ASSIGN_OR_RETURN(qkv, to_qkv(be, x, kernels::Activation::kNone, nullptr, x_codes));  // [B, S, 3 * inner]
    q = qkv.t.slice(2, 0, inner);
    k = qkv.t.slice(2, inner, inner);
    v = qkv.t.slice(2, 2 * inner, inner);
  } else {
    HIPQ_ASSIGN_OR_RETURN(q_only, to_q(be, x, kernels::Activation::kNone, nullptr, x_codes));  // [B, S, inner]
    const kernels::Tensor* kv_t = made ? made->find(*this, *context) : nullptr;
    if (!kv_t) {
      HIPQ_ASSIGN_OR_RETURN(kv, project_context(be, *context));  // [B, Sk, 2 * inner]
      kv_t = &kv.t;
    }
    q = q_only.t;
    k = kv_t->slice(2, 0, inner);
    v = kv_t->slice(2, inner, inner);
  }
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor o, DeviceTensor::make(be, x.dtype, {x.dim(0), x.dim(1), inner}));
  kernels::AttentionOptions ao;
  ao.heads = heads;
  ao.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  HIPQ_RETURN_IF_ERROR(be.attention(q, k, v, o.t, ao));
  return to_out(be, o.t, kernels::Activation::kNone, residual);
}

}  // namespace hipq::engine
