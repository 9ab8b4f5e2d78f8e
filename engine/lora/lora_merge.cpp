#include "engine/lora/lora_merge.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include "kernels/cpu/ops.h"

namespace hipq::engine::lora {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// The deltas' [out, in] against W's shape: InvalidArgument naming `name` and the origin.
Status check_deltas(const std::vector<int64_t>& shape, int64_t numel, const std::vector<LoraDelta>& deltas,
                    const std::string& name) {
  for (const LoraDelta& d : deltas) {
    const int64_t out = d.up.shape.at(0);
    const int64_t rank = d.up.shape.at(1);
    const int64_t in = d.down.numel() / std::max<int64_t>(1, d.down.shape.at(0));
    if (shape.empty() || out != shape[0] || out * in != numel || d.down.shape[0] != rank ||
        d.up.numel() != out * rank) {
      return Status::InvalidArgument(d.origin + ": the LoRA's delta is [" + std::to_string(out) + ", " +
                                     std::to_string(in) + "] but '" + name + "' is " + shape_str(shape));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<HostTensor> merge_weight(const HostTensor& base, const std::vector<LoraDelta>& deltas, const std::string& name) {
  if (!kernels::is_float(base.dtype) || base.dtype == kernels::DType::kF64) {
    return Status::InvalidArgument("LoRA target '" + name + "' is not an f32/f16/bf16 tensor (" + base.describe() +
                                   ")");
  }
  const int64_t numel = base.numel();
  HIPQ_RETURN_IF_ERROR(check_deltas(base.shape, numel, deltas, name));
  // The cpu backend's op over host views: the bits get_on_device() gives.
  const int64_t rows = base.shape[0];
  const int64_t cols = rows > 0 ? numel / rows : 0;
  std::vector<std::vector<float>> factors;
  std::vector<kernels::LoraFactors> views;
  factors.reserve(2 * deltas.size());
  for (const LoraDelta& d : deltas) {
    factors.push_back(d.up.to_f32());
    factors.push_back(d.down.to_f32());
    const int64_t rank = d.up.shape[1];
    views.push_back({kernels::Tensor::contiguous(factors[factors.size() - 2].data(), kernels::DType::kF32, {rows, rank}),
                     kernels::Tensor::contiguous(factors.back().data(), kernels::DType::kF32, {rank, cols}),
                     d.coefficient});
  }
  std::vector<float> w(static_cast<size_t>(numel));
  const kernels::Tensor b =
      kernels::Tensor::contiguous(const_cast<void*>(base.data), base.dtype, {rows, cols});
  kernels::Tensor out = kernels::Tensor::contiguous(w.data(), kernels::DType::kF32, {rows, cols});
  HIPQ_RETURN_IF_ERROR(kernels::cpu::lora_merge(b, views, out).WithContext("LoRA merge of '" + name + "'"));
  return HostTensor::from_f32(std::move(w), base.shape);
}

LoraMergedSource::LoraMergedSource(std::shared_ptr<WeightSource> base,
                                   std::map<std::string, std::vector<LoraDelta>> deltas, std::string label)
    : base_(std::move(base)), label_(std::move(label)) {
  for (auto& [k, v] : deltas) deltas_.emplace(k, std::move(v));
}

std::vector<std::string> LoraMergedSource::merged_names() const {
  std::vector<std::string> out;
  for (const auto& [name, d] : deltas_) out.push_back(name);
  return out;
}

std::string LoraMergedSource::describe() const { return base_->describe() + " with " + label_; }

Result<TensorMeta> LoraMergedSource::meta(std::string_view name) const {
  HIPQ_ASSIGN_OR_RETURN(TensorMeta m, base_->meta(name));
  if (deltas_.find(name) != deltas_.end()) m.dtype = kernels::DType::kF32;
  return m;
}

Result<HostTensor> LoraMergedSource::get(std::string_view name) const {
  HIPQ_ASSIGN_OR_RETURN(HostTensor w, base_->get(name));
  auto it = deltas_.find(name);
  if (it == deltas_.end()) return w;
  return merge_weight(w, it->second, std::string(name));
}

Result<std::optional<DeviceWeight>> LoraMergedSource::get_on_device(std::string_view name,
                                                                     kernels::Backend& backend) const {
  auto it = deltas_.find(name);
  if (it == deltas_.end()) return base_->get_on_device(name, backend);
  const std::string n(name);
  const std::vector<LoraDelta>& deltas = it->second;
  // The base bits on the device: kept there, or uploaded as stored.
  HIPQ_ASSIGN_OR_RETURN(std::optional<DeviceWeight> base, base_->get_on_device(name, backend));
  HostTensor host;  // alive until the upload is done
  if (!base) {
    HIPQ_ASSIGN_OR_RETURN(host, base_->get(name));
    if (!kernels::is_float(host.dtype) || host.dtype == kernels::DType::kF64)
      return Status::InvalidArgument("LoRA target '" + n + "' is not an f32/f16/bf16 tensor (" + host.describe() +
                                     ")");
    base.emplace();
    HIPQ_ASSIGN_OR_RETURN(base->owned, backend.allocate(host.nbytes));
    base->tensor = base->owned.tensor(host.dtype, host.shape);
    HIPQ_RETURN_IF_ERROR(backend.copy_to_device(host.data, base->tensor.data, host.nbytes));
  }
  if (host.data != nullptr) {
    HIPQ_RETURN_IF_ERROR(backend.synchronize());  // the upload belongs to the base's time
  }
  const auto merge_start = std::chrono::steady_clock::now();
  const std::vector<int64_t> shape = base->tensor.shape_vec();
  const int64_t numel = base->tensor.numel();
  HIPQ_RETURN_IF_ERROR(check_deltas(shape, numel, deltas, n));
  const int64_t rows = shape[0];
  const int64_t cols = rows > 0 ? numel / rows : 0;
  // The factors as f32, in one device block.
  std::vector<std::vector<float>> factors;
  factors.reserve(2 * deltas.size());
  size_t floats = 0;
  for (const LoraDelta& d : deltas) {
    factors.push_back(d.up.to_f32());
    factors.push_back(d.down.to_f32());
    floats += factors[factors.size() - 2].size() + factors.back().size();
  }
  kernels::Buffer factor_block;
  std::vector<kernels::LoraFactors> views;
  if (floats > 0) {
    HIPQ_ASSIGN_OR_RETURN(factor_block, backend.allocate(floats * sizeof(float)));
  }
  size_t at = 0;
  for (size_t l = 0; l < deltas.size(); ++l) {
    const int64_t rank = deltas[l].up.shape[1];
    kernels::Tensor t[2];
    for (int f = 0; f < 2; ++f) {
      const std::vector<float>& v = factors[2 * l + static_cast<size_t>(f)];
      float* dst = static_cast<float*>(factor_block.data()) + at;
      HIPQ_RETURN_IF_ERROR(backend.copy_to_device(v.data(), dst, v.size() * sizeof(float)));
      t[f] = kernels::Tensor::contiguous(dst, kernels::DType::kF32,
                                         f == 0 ? std::vector<int64_t>{rows, rank} : std::vector<int64_t>{rank, cols},
                                         backend.info().name == "cpu" ? kernels::Location::kHost
                                                                      : kernels::Location::kDevice);
      at += v.size();
    }
    views.push_back({t[0], t[1], deltas[l].coefficient});
  }
  DeviceWeight merged;
  HIPQ_ASSIGN_OR_RETURN(merged.owned, backend.allocate(static_cast<size_t>(numel) * sizeof(float)));
  merged.tensor = merged.owned.tensor(kernels::DType::kF32, shape);
  kernels::Tensor out = merged.tensor.reshape({rows, cols});
  HIPQ_RETURN_IF_ERROR(
      backend.lora_merge(base->tensor.reshape({rows, cols}), views, out).WithContext("LoRA merge of '" + n + "'"));
  // The host factors and staging, and the pool blocks freed below, outlive the work.
  HIPQ_RETURN_IF_ERROR(backend.synchronize());
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - merge_start).count();
  {
    std::lock_guard<std::mutex> lock(time_mu_);
    merge_ms_ += ms;
  }
  return std::optional<DeviceWeight>(std::move(merged));
}

double LoraMergedSource::merge_ms() const {
  std::lock_guard<std::mutex> lock(time_mu_);
  return merge_ms_;
}

}  // namespace hipq::engine::lora
