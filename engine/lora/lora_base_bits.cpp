#include "engine/lora/lora_base_bits.h"

#include <cstring>

namespace hipq::engine::lora {

RetainedBaseSource::RetainedBaseSource(std::shared_ptr<WeightSource> base) : base_(std::move(base)) {}

void RetainedBaseSource::retain(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mu_);
  wanted_.insert(names.begin(), names.end());
}

Result<HostTensor> RetainedBaseSource::get(std::string_view name) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = held_.find(name); it != held_.end()) return it->second;
    if (!wanted_.contains(name)) return base_->get(name);
  }
  HIPQ_ASSIGN_OR_RETURN(HostTensor t, base_->get(name));
  // An owned copy: the mapping's pages (or the synthetic buffer) are not what is kept.
  HostTensor copy = HostTensor::owned(t.dtype, t.shape);
  if (copy.nbytes != t.nbytes)
    return Status::Internal(base_->describe() + ": tensor '" + std::string(name) + "' is " + t.describe() + " in " +
                            std::to_string(t.nbytes) + " bytes");
  if (t.nbytes > 0) std::memcpy(copy.mutable_data(), t.data, t.nbytes);
  std::lock_guard<std::mutex> lock(mu_);
  return held_.emplace(std::string(name), std::move(copy)).first->second;
}

size_t RetainedBaseSource::retained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

int64_t RetainedBaseSource::retained_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [name, t] : held_) n += static_cast<int64_t>(t.nbytes);
  return n;
}

}  // namespace hipq::engine::lora
