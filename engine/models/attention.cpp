#include "engine/models/attention.h"

#include <cmath>

namespace hipq::engine {

Result<Attention> Attention::bind(WeightBinder& b, const std::string& prefix, int64_t query_dim,
                                  int64_t kv_dim, int heads, int64_t head_dim, bool qkv_bias) {
  Attention a;
  a.heads = heads;
  a.head_dim = head_dim;
  const int64_t inner = heads * head_dim;
  HIPQ_ASSIGN_OR_RETURN(a.to_q, Linear::bind(b, join_key(prefix, "to_q"), query_dim, inner, qkv_bias));
  HIPQ_ASSIGN_OR_RETURN(a.to_k, Linear::bind(b, join_key(prefix, "to_k"), kv_dim, inner, qkv_bias));
  HIPQ_ASSIGN_OR_RETURN(a.to_v, Linear::bind(b, join_key(prefix, "to_v"), kv_dim, inner, qkv_bias));
  HIPQ_ASSIGN_OR_RETURN(a.to_out, Linear::bind(b, join_key(prefix, "to_out.0"), inner, query_dim, true));
  return a;
}

Result<DeviceTensor> Attention::forward(kernels::Backend& be, const kernels::Tensor& x,
                                        const kernels::Tensor* context,
                                        const kernels::Tensor* residual) const {
  const kernels::Tensor& kv = context ? *context : x;
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor q, to_q(be, x));  // [B, S, inner]
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor k, to_k(be, kv));  // [B, Sk, inner]
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor v, to_v(be, kv));
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor o, DeviceTensor::make(be, x.dtype, q.t.shape_vec()));
  kernels::AttentionOptions ao;
  ao.heads = heads;
  ao.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  HIPQ_RETURN_IF_ERROR(be.attention(q.t, k.t, v.t, o.t, ao));
  return to_out(be, o.t, kernels::Activation::kNone, residual);
}

}  // namespace hipq::engine
