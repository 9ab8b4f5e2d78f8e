// RetainedBaseSource: a model component's base weights as the pipeline keeps
// them for LoRA switches. Every call is answered by the base source (the
// mapped checkpoint, synthetic weights, ...), except for the weights a LoRA
// set has modified: the first read of such a weight keeps an owned host copy
// of its base bits (the stored dtype, as read), and every later read is
// served from that copy. A switch between LoRA sets so merges, and restores,
// the weights it rewrites from host memory: the base checkpoint is read for a
// weight at most once after the model's load (the first set that modifies
// it), never again, whatever the page cache holds. Host memory: the modified
// weights' stored bytes (docs/adapters.md, "Switching").
// Thread safety: every const method may be called concurrently (a mutex
// guards the copies); retain() too.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/weight_source.h"

namespace hipq::engine::lora {

class RetainedBaseSource : public WeightSource {
 public:
  explicit RetainedBaseSource(std::shared_ptr<WeightSource> base);
  // From now on the base bits of `names` are kept once read.
  void retain(const std::vector<std::string>& names);
  std::string describe() const override { return base_->describe(); }
  std::vector<std::string> names() const override { return base_->names(); }
  bool contains(std::string_view name) const override { return base_->contains(name); }
  Result<TensorMeta> meta(std::string_view name) const override { return base_->meta(name); }
  Result<HostTensor> get(std::string_view name) const override;
  // Weights kept and their bytes.
  size_t retained() const;
  int64_t retained_bytes() const;

 private:
  std::shared_ptr<WeightSource> base_;
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> wanted_;
  mutable std::map<std::string, HostTensor, std::less<>> held_;
};

}  // namespace hipq::engine::lora
