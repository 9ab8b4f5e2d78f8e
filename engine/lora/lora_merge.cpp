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

// A LoRA merge reads f32, f16 or bf16 (a weight or a factor): InvalidArgument otherwise.
Status check_merge_dtype(const HostTensor& t, const std::string& what) {
  if (kernels::is_float(t.dtype) && t.dtype != kernels::DType::kF64) return Status::Ok();
  return Status::InvalidArgument(what + " is not an f32/f16/bf16 tensor (" + t.describe() + ")");
}

}  // namespace

Result<HostTensor> merge_weight(const HostTensor& base, const std::vector<LoraDelta>& deltas, const std::string& name) {
  HIPQ_RETURN_IF_ERROR(check_merge_dtype(base, "LoRA target '" + name + "'"));
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
    HIPQ_RETURN_IF_ERROR(check_merge_dtype(host, "LoRA target '" + n + "'"));
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
  // The factors as stored, uploaded in one block, then cast to f32 on the
  // device into another (exact: f16 and bf16 widen to f32 without rounding).
  struct Factor {
    const HostTensor* host;
    std::vector<int64_t> shape;  // as the op reads it: up [O, r], down [r, I]
    size_t raw_at = 0, f32_at = 0;
  };
  std::vector<Factor> list;
  size_t raw_bytes = 0, f32_floats = 0;
  for (const LoraDelta& d : deltas) {
    const int64_t rank = d.up.shape[1];
    list.push_back({&d.up, {rows, rank}});
    list.push_back({&d.down, {rank, cols}});
  }
  for (Factor& f : list) {
    HIPQ_RETURN_IF_ERROR(check_merge_dtype(*f.host, "LoRA factor for '" + n + "'"));
    f.raw_at = raw_bytes;
    f.f32_at = f32_floats;
    raw_bytes += (f.host->nbytes + 255) / 256 * 256;
    f32_floats += static_cast<size_t>(f.host->numel());
  }
  kernels::Buffer raw_block, f32_block;
  if (f32_floats > 0) {
    HIPQ_ASSIGN_OR_RETURN(raw_block, backend.allocate(raw_bytes));
    HIPQ_ASSIGN_OR_RETURN(f32_block, backend.allocate(f32_floats * sizeof(float)));
  }
  const kernels::Location loc = f32_block.location();
  std::vector<kernels::Tensor> f32_views;
  for (const Factor& f : list) {
    char* raw = static_cast<char*>(raw_block.data()) + f.raw_at;
    float* wide = static_cast<float*>(f32_block.data()) + f.f32_at;
    kernels::Tensor dst = kernels::Tensor::contiguous(wide, kernels::DType::kF32, f.shape, loc);
    if (f.host->dtype == kernels::DType::kF32) {
      HIPQ_RETURN_IF_ERROR(backend.copy_to_device(f.host->data, wide, f.host->nbytes));
    } else {
      HIPQ_RETURN_IF_ERROR(backend.copy_to_device(f.host->data, raw, f.host->nbytes));
      HIPQ_RETURN_IF_ERROR(backend.copy(kernels::Tensor::contiguous(raw, f.host->dtype, f.shape, loc), dst));
    }
    f32_views.push_back(dst);
  }
  std::vector<kernels::LoraFactors> views;
  for (size_t l = 0; l < deltas.size(); ++l)
    views.push_back({f32_views[2 * l], f32_views[2 * l + 1], deltas[l].coefficient});
  DeviceWeight merged;
  HIPQ_ASSIGN_OR_RETURN(merged.owned, backend.allocate(static_cast<size_t>(numel) * sizeof(float)));
  merged.tensor = merged.owned.tensor(kernels::DType::kF32, shape);
  kernels::Tensor out = merged.tensor.reshape({rows, cols});
  HIPQ_RETURN_IF_ERROR(
      backend.lora_merge(base->tensor.reshape({rows, cols}), views, out).WithContext("LoRA merge of '" + n + "'"));
  // No wait here: the factors' uploads took their host bytes when issued,
  // and the staging blocks freed below go back to the pool in the stream's
  // order (the backend's one stream), so a later allocation's work runs
  // after this merge. The caller waits once for a whole switch
  // (rebind_weights); a wait a weight cost a switch 722 round trips.
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
