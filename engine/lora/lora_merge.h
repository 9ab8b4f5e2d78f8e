// LoRA merge: a base model component seen with low-rank deltas folded into
// some of its weights, W' = W + sum_l scale_l * (alpha_l / rank_l) * up_l @ down_l.
//
// Computed on the host in fp32 (each delta accumulated in fp32 over the rank,
// the deltas summed in fp32 in the order given, then added to W as fp32) and
// handed to the model loader as one f32 tensor, which rounds it once to the
// load precision on the backend. A conv pair is the same product on the
// flattened kernel ([out, r] @ [r, in * kh * kw]), so a 3x3 LoCon down with a
// 1x1 up and a 1x1 pair need no special case. The merged model then runs the
// same UNet step as the base: no extra op per step.
//
// Memory: nothing is held beyond the pairs' views into their (mapped) files;
// a merged weight exists as fp32 on the host only while get() returns it to
// the loader, which uploads and drops it. The base stays the base source
// (its mapping), so another LoRA set is merged from the same unmodified base
// bits and gives the same result as a fresh process would.
// Thread safety: immutable after construction; get() may run concurrently.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "engine/weight_source.h"

namespace hipq::engine::lora {

// One pair's contribution to one weight.
struct LoraDelta {
  HostTensor down;          // [r, ...] (flattened to [r, in_features])
  HostTensor up;            // [out, r, (1, 1)]
  float coefficient = 0;    // scale * alpha / rank
  std::string origin;       // "file.safetensors: lora_unet_..._to_q", for messages
};

// W (any float dtype) + the deltas, as an owned f32 tensor of W's shape.
// InvalidArgument naming `name` and the origin when a delta's [out, in] does
// not cover W's numel.
Result<HostTensor> merge_weight(const HostTensor& base, const std::vector<LoraDelta>& deltas,
                                const std::string& name);

class LoraMergedSource : public WeightSource {
 public:
  // `deltas`: weight name -> its deltas in application order.
  LoraMergedSource(std::shared_ptr<WeightSource> base, std::map<std::string, std::vector<LoraDelta>> deltas,
                   std::string label);
  std::string describe() const override;
  std::vector<std::string> names() const override { return base_->names(); }
  bool contains(std::string_view name) const override { return base_->contains(name); }
  // Merged weights report f32 (what get() returns); others the base's meta.
  Result<TensorMeta> meta(std::string_view name) const override;
  Result<HostTensor> get(std::string_view name) const override;
  size_t merged_weights() const { return deltas_.size(); }
  // The names of the weights a delta lands on, sorted.
  std::vector<std::string> merged_names() const;

 private:
  std::shared_ptr<WeightSource> base_;
  std::map<std::string, std::vector<LoraDelta>, std::less<>> deltas_;
  std::string label_;
};

}  // namespace hipq::engine::lora
