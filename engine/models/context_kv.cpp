#include "engine/models/context_kv.h"

#include "engine/models/attention.h"

namespace hipq::engine {

Status ContextKV::add(kernels::Backend& be, const Attention& a) {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor kv, a.project_context(be, context_));
  kv_.insert_or_assign(&a, std::move(kv));
  return Status::Ok();
}

const kernels::Tensor* ContextKV::find(const Attention& a, const kernels::Tensor& context) const {
  if (context.data != context_.data || context.dtype != context_.dtype || !context.same_shape(context_))
    return nullptr;
  auto it = kv_.find(&a);
  return it == kv_.end() ? nullptr : &it->second.t;
}

}  // namespace hipq::engine
