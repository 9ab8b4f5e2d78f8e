#include "engine/lora/lora_merge.h"

#include <algorithm>
#include <sstream>
#include <thread>

namespace hipq::engine::lora {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// Rows [begin, end) of acc [out, in] += c * up [out, r] @ down [r, in].
void accumulate_rows(float* acc, const float* up, const float* down, float c, int64_t rank, int64_t in,
                     int64_t begin, int64_t end) {
  for (int64_t o = begin; o < end; ++o) {
    float* row = acc + o * in;
    for (int64_t k = 0; k < rank; ++k) {
      const float a = c * up[o * rank + k];
      const float* d = down + k * in;
      for (int64_t j = 0; j < in; ++j) row[j] += a * d[j];
    }
  }
}

// Each output row is computed by one thread in one fixed order, so the bits
// do not depend on the thread count.
template <typename Fn>
void parallel_rows(int64_t rows, int64_t work_per_row, Fn fn) {
  const int64_t hw = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::clamp<int64_t>(rows * work_per_row / (1 << 20), 1, std::min<int64_t>(hw, 16));
  if (threads <= 1) {
    fn(int64_t{0}, rows);
    return;
  }
  std::vector<std::thread> pool;
  const int64_t chunk = (rows + threads - 1) / threads;
  for (int64_t b = 0; b < rows; b += chunk) pool.emplace_back(fn, b, std::min(rows, b + chunk));
  for (auto& t : pool) t.join();
}

}  // namespace

Result<HostTensor> merge_weight(const HostTensor& base, const std::vector<LoraDelta>& deltas, const std::string& name) {
  if (!kernels::is_float(base.dtype)) {
    return Status::InvalidArgument("LoRA target '" + name + "' is not a float tensor (" + base.describe() + ")");
  }
  const int64_t numel = base.numel();
  std::vector<float> acc(static_cast<size_t>(numel), 0.0f);
  for (const LoraDelta& d : deltas) {
    const int64_t out = d.up.shape.at(0);
    const int64_t rank = d.up.shape.at(1);
    const int64_t in = d.down.numel() / std::max<int64_t>(1, d.down.shape.at(0));
    if (base.shape.empty() || out != base.shape[0] || out * in != numel || d.down.shape[0] != rank) {
      return Status::InvalidArgument(d.origin + ": the LoRA's delta is [" + std::to_string(out) + ", " +
                                     std::to_string(in) + "] but '" + name + "' is " + shape_str(base.shape));
    }
    const std::vector<float> up = d.up.to_f32();
    const std::vector<float> down = d.down.to_f32();
    parallel_rows(out, rank * in, [&](int64_t b, int64_t e) {
      accumulate_rows(acc.data(), up.data(), down.data(), d.coefficient, rank, in, b, e);
    });
  }
  std::vector<float> w = base.to_f32();
  for (int64_t i = 0; i < numel; ++i) w[i] += acc[i];
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

}  // namespace hipq::engine::lora
