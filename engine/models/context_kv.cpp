#include "engine/models/context_kv.h"

#include "engine/models/attention.h"

namespace hipq::engine {

Status ContextKV::add(kernels::Backend& be, const Attention& a) {
  if (a.kind != AttentionKind::kCross)
    return Status::InvalidArgument("ContextKV: only a cross attention reads a context");
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor kv, a.project_context(be, context_));
  kv_.insert_or_assign(&a, std::move(kv));
  return Status::Ok();
}

const kernels::Tensor* ContextKV::find(const Attention& a, const kernels::Tensor& context) const {
  if (context.data != context_.data || context.dtype != context_.dtype ||
      context.shape_vec() != context_.shape_vec())
    return nullptr;
  auto it = kv_.find(&a);
  return it == kv_.end() ? nullptr : &it->second.t;
}

}  // namespace hipq::engine
