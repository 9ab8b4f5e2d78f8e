#include "engine/lora/lora_base_bits.h"

#include <cstring>

namespace hipq::engine::lora {

bool DeviceBitsBudget::take(int64_t bytes) {
  int64_t used = used_.load();
  do {
    if (used + bytes > limit_.load()) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return true;
}

RetainedBaseSource::RetainedBaseSource(std::shared_ptr<WeightSource> base, std::shared_ptr<DeviceBitsBudget> budget)
    : base_(std::move(base)), budget_(std::move(budget)) {}

RetainedBaseSource::~RetainedBaseSource() {
  for (auto& [name, d] : on_device_)
    if (budget_) budget_->give(d.charged);
}

void RetainedBaseSource::retain(const std::vector<std::string>& names) {
  std::lock_guard<std::mutex> lock(mu_);
  wanted_.insert(names.begin(), names.end());
}

namespace {

// An owned copy of `t`: the mapping's pages (or the synthetic buffer) are not what is kept.
Result<HostTensor> owned_copy(const HostTensor& t, const std::string& what) {
  HostTensor copy = HostTensor::owned(t.dtype, t.shape);
  if (copy.nbytes != t.nbytes)
    return Status::Internal(what + " is " + t.describe() + " in " + std::to_string(t.nbytes) + " bytes");
  if (t.nbytes > 0) std::memcpy(copy.mutable_data(), t.data, t.nbytes);
  return copy;
}

}  // namespace

Result<HostTensor> RetainedBaseSource::get(std::string_view name) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = held_.find(name); it != held_.end()) return it->second;
    if (auto it = on_device_.find(name); it != on_device_.end()) {
      const kernels::Tensor& t = it->second.tensor;
      HostTensor h = HostTensor::owned(t.dtype, t.shape_vec());
      HIPQ_RETURN_IF_ERROR(backend_->copy_to_host(t.data, h.mutable_data(), h.nbytes));
      return h;
    }
    if (!wanted_.contains(name)) return base_->get(name);
  }
  HIPQ_ASSIGN_OR_RETURN(HostTensor t, base_->get(name));
  HIPQ_ASSIGN_OR_RETURN(HostTensor copy, owned_copy(t, base_->describe() + ": tensor '" + std::string(name) + "'"));
  std::lock_guard<std::mutex> lock(mu_);
  return held_.emplace(std::string(name), std::move(copy)).first->second;
}

Result<std::optional<DeviceWeight>> RetainedBaseSource::get_on_device(std::string_view name,
                                                                       kernels::Backend& backend) const {
  auto view = [](const OnDevice& d) { return std::optional<DeviceWeight>(DeviceWeight{d.tensor, {}}); };
  HostTensor host;
  bool from_host_copy = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = on_device_.find(name); it != on_device_.end()) return view(it->second);
    if (budget_ == nullptr || !wanted_.contains(name)) return std::optional<DeviceWeight>();
    if (backend_ != nullptr && backend_ != &backend) return std::optional<DeviceWeight>();
    if (auto it = held_.find(name); it != held_.end()) {
      host = it->second;
      from_host_copy = true;
    }
  }
  if (!from_host_copy) {
    HIPQ_ASSIGN_OR_RETURN(host, base_->get(name));
  }
  if (!kernels::is_float(host.dtype) || host.dtype == kernels::DType::kF64) return std::optional<DeviceWeight>();
  const int64_t charged = static_cast<int64_t>(backend.block_bytes(host.nbytes));
  // No room: the host keeps the bits (read from the base source just now:
  // kept so it is not read again).
  auto on_host = [&]() -> Result<std::optional<DeviceWeight>> {
    if (!from_host_copy) {
      HIPQ_ASSIGN_OR_RETURN(HostTensor copy,
                            owned_copy(host, base_->describe() + ": tensor '" + std::string(name) + "'"));
      std::lock_guard<std::mutex> lock(mu_);
      held_.emplace(std::string(name), std::move(copy));
    }
    return std::optional<DeviceWeight>();
  };
  if (!budget_->take(charged)) return on_host();
  OnDevice d;
  d.charged = charged;
  auto made = backend.allocate(host.nbytes);
  if (!made.ok()) {
    budget_->give(charged);
    // The device is fuller than the plan said (another process): the host keeps it.
    if (made.status().code() == StatusCode::kResourceExhausted) return on_host();
    return made.status();
  }
  d.buffer = std::move(made).value();
  d.tensor = d.buffer.tensor(host.dtype, host.shape);
  if (Status st = backend.copy_to_device(host.data, d.tensor.data, host.nbytes); !st.ok()) {
    budget_->give(charged);
    return st;
  }
  // The host bytes (a mapping's pages or the host copy) must outlive the copy.
  if (Status st = backend.synchronize(); !st.ok()) {
    budget_->give(charged);
    return st;
  }
  std::lock_guard<std::mutex> lock(mu_);
  backend_ = &backend;
  held_.erase(std::string(name));
  auto [it, inserted] = on_device_.emplace(std::string(name), std::move(d));
  if (!inserted) budget_->give(charged);  // made twice: the first copy stays
  return view(it->second);
}

Status RetainedBaseSource::evict_to_host() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = on_device_.begin(); it != on_device_.end();) {
    const kernels::Tensor& t = it->second.tensor;
    HostTensor h = HostTensor::owned(t.dtype, t.shape_vec());
    HIPQ_RETURN_IF_ERROR(backend_->copy_to_host(t.data, h.mutable_data(), h.nbytes));
    held_.insert_or_assign(it->first, std::move(h));
    if (budget_) budget_->give(it->second.charged);
    it = on_device_.erase(it);
  }
  return Status::Ok();
}

size_t RetainedBaseSource::retained() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size() + on_device_.size();
}

int64_t RetainedBaseSource::retained_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [name, t] : held_) n += static_cast<int64_t>(t.nbytes);
  for (const auto& [name, d] : on_device_) n += static_cast<int64_t>(d.tensor.nbytes());
  return n;
}

size_t RetainedBaseSource::device_copies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return on_device_.size();
}

int64_t RetainedBaseSource::device_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  for (const auto& [name, d] : on_device_) n += d.charged;
  return n;
}

}  // namespace hipq::engine::lora
