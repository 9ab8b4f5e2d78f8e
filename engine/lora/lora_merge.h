// LoRA merge: a base model component seen with low-rank deltas folded into
// some of its weights, W' = W + sum_l scale_l * (alpha_l / rank_l) * up_l @ down_l.
//
// Computed in fp32 by the backend's op (kernels::Backend::lora_merge: each
// delta accumulated over the rank in order, the deltas in the order given,
// then added to W read as fp32; every product and sum rounded on its own, so
// the cpu and hip backends give the same bits) into one f32 tensor, which the
// model loader then rounds once to the load precision on the backend
// (WeightLoader: the cast, the layout, the fp8 codes). A conv pair is the
// same product on the flattened kernel ([out, r] @ [r, in * kh * kw]), so a
// 3x3 LoCon down with a 1x1 up and a 1x1 pair need no special case. The
// merged model then runs the same UNet step as the base: no extra op per step.
//
// Where: get_on_device() merges on the backend the loader writes to, from
// the base bits the base source hands over there (kept on the device by
// RetainedBaseSource, or uploaded as stored) and the factors uploaded as f32;
// fresh loads and LoRA switches alike take this path, so they give the same
// bits. get() merges on the host through the cpu backend's op (the same
// code, the same bits) for readers without a backend.
//
// Memory: nothing is held beyond the pairs' views into their (mapped) files;
// a merged weight exists as f32 only while the loader writes it (device: the
// merged weight, the factors and, when the base bits are not kept there, the
// base's staging). The base stays the base source, so another LoRA set is
// merged from the same unmodified base bits and gives the same result as a
// fresh process would.
// Thread safety: immutable after construction; get() may run concurrently;
// get_on_device() on the backend's thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
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
  // Merged weights: made on `backend` (f32, the caller owns them); others as
  // the base source hands them over.
  Result<std::optional<DeviceWeight>> get_on_device(std::string_view name, kernels::Backend& backend) const override;
  size_t merged_weights() const { return deltas_.size(); }
  // Host-clock milliseconds get_on_device() has spent merging (factors
  // uploaded, Backend::lora_merge issued: the device's time of the merge is
  // in whatever waits for it next), over this object's life.
  double merge_ms() const;
  // The names of the weights a delta lands on, sorted.
  std::vector<std::string> merged_names() const;

 private:
  std::shared_ptr<WeightSource> base_;
  std::map<std::string, std::vector<LoraDelta>, std::less<>> deltas_;
  std::string label_;
  mutable std::mutex time_mu_;
  mutable double merge_ms_ = 0;
};

}  // namespace hipq::engine::lora
