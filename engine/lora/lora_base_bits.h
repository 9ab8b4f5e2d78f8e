// RetainedBaseSource: a model component's base weights as the pipeline keeps
// them for LoRA switches. Every call is answered by the base source (the
// mapped checkpoint, synthetic weights, ...), except for the weights a LoRA
// set has modified: the first read of such a weight keeps a copy of its base
// bits (the stored dtype, as read), and every later read is served from that
// copy. A switch between LoRA sets so merges, and restores, the weights it
// rewrites from memory: the base checkpoint is read for a weight at most once
// after the model's load (the first set that modifies it), never again,
// whatever the page cache holds (docs/adapters.md, "Switching").
//
// Where a copy lives: on the backend's device while the shared
// DeviceBitsBudget has room for it (get_on_device: the merge and the restore
// then read it there, with no upload), else on the host (get()). The pipeline
// sets the budget from its memory plan and counts what is held there
// (ModelShapes::lora_base_bits); evict_to_host() moves the device copies to
// the host when a job's plan needs the room.
// The backend must outlive the source (its device copies go back to the
// backend's pool when it dies).
// Thread safety: every const method may be called concurrently (a mutex
// guards the copies); retain() too; the device methods on the backend's
// thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "engine/weight_source.h"
#include "kernels/backend.h"

namespace hipq::engine::lora {

// Device bytes the base bits of a pipeline's models may take (all of its
// RetainedBaseSources together), in the backend's blocks. Thread-safe.
class DeviceBitsBudget {
 public:
  // The cap; 0 keeps nothing new on the device. Held bytes stay held.
  void set_limit(int64_t bytes) { limit_.store(bytes); }
  int64_t limit() const { return limit_.load(); }
  int64_t used() const { return used_.load(); }
  // Takes `bytes` when they fit under the cap.
  bool take(int64_t bytes);
  void give(int64_t bytes) { used_.fetch_sub(bytes); }

 private:
  std::atomic<int64_t> limit_{0};
  std::atomic<int64_t> used_{0};
};

class RetainedBaseSource : public WeightSource {
 public:
  // `budget`: where device copies are counted; null keeps every copy on the host.
  explicit RetainedBaseSource(std::shared_ptr<WeightSource> base, std::shared_ptr<DeviceBitsBudget> budget = nullptr);
  ~RetainedBaseSource() override;
  // From now on the base bits of `names` are kept once read.
  void retain(const std::vector<std::string>& names);
  std::string describe() const override { return base_->describe(); }
  std::vector<std::string> names() const override { return base_->names(); }
  bool contains(std::string_view name) const override { return base_->contains(name); }
  Result<TensorMeta> meta(std::string_view name) const override { return base_->meta(name); }
  // A device copy is read back (copy_to_host) on the backend's thread.
  Result<HostTensor> get(std::string_view name) const override;
  // A retained weight's device copy: kept from before, or made now when the
  // budget has room (from the host copy, which is then dropped, or from the
  // base source on the first read); nullopt when the budget has none or the
  // weight is not retained.
  Result<std::optional<DeviceWeight>> get_on_device(std::string_view name, kernels::Backend& backend) const override;
  // Moves every device copy to the host (and its bytes out of the budget).
  Status evict_to_host();
  // Weights kept and their stored bytes (host and device together), and
  // those on the device in the backend's blocks.
  size_t retained() const;
  int64_t retained_bytes() const;
  size_t device_copies() const;
  int64_t device_bytes() const;

 private:
  struct OnDevice {
    kernels::Buffer buffer;
    kernels::Tensor tensor;
    int64_t charged = 0;  // block bytes taken from the budget
  };
  std::shared_ptr<WeightSource> base_;
  std::shared_ptr<DeviceBitsBudget> budget_;
  mutable std::mutex mu_;
  std::set<std::string, std::less<>> wanted_;
  mutable std::map<std::string, HostTensor, std::less<>> held_;
  mutable std::map<std::string, OnDevice, std::less<>> on_device_;
  mutable kernels::Backend* backend_ = nullptr;  // of the device copies
};

}  // namespace hipq::engine::lora
