// ContextKV: the keys and values each cross attention of a model reads from
// one context (the text embeddings), projected once for a whole generation.
//
// The context does not change between the steps of a generation, so neither
// does any cross attention's k | v projection of it (Attention::to_kv). UNetStep
// makes them before its first step (UNet::project_context) and every forward
// reads them instead of projecting the same 77 tokens 70 times a step; the
// captured step graph so holds no such product. The values are those the
// forward would compute (the same GEMM on the same input).
//
// A projection is served only for the context it was made from (same memory,
// shape and dtype); for any other context the attention projects its own.
// Ownership: holds device memory of the backend that made it; the context
// tensor and the Attentions must outlive it (entries are keyed by address),
// and the context's values must not change while it is used (a projection
// made from other values would be served: UNetStep's conditioning tensors
// are fixed for its whole generation).
// Thread safety: immutable once made; the backend's thread.
#pragma once

#include <unordered_map>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "kernels/backend.h"

namespace hipq::engine {

struct Attention;

class ContextKV {
 public:
  explicit ContextKV(const kernels::Tensor& context) : context_(context) {}

  // Projects the context through a's k | v (Attention::project_context:
  // InvalidArgument for a self attention).
  Status add(kernels::Backend& be, const Attention& a);
  // a's projection ([B, Sk, 2 * inner]) when made for `context`, else nullptr.
  const kernels::Tensor* find(const Attention& a, const kernels::Tensor& context) const;
  size_t size() const { return kv_.size(); }

 private:
  kernels::Tensor context_;
  std::unordered_map<const Attention*, DeviceTensor> kv_;
};

}  // namespace hipq::engine
