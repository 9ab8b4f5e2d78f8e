#include "engine/lora/lora_merge.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/thread_pool.h"

namespace hipq::engine::lora {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

// acc [in] += c * up_row [r] @ down [r, in]: each element gets its rank's
// products added in order k = 0, 1, ..., a multiply and an add each (no FMA
// contraction: the AVX2 clone of HIPQ_CPU_HOT has none), so both clones give
// the same bits. Blocks of 32 columns stay in registers over the whole rank.
HIPQ_CPU_HOT void accumulate_row(float* acc, const float* up_row, const float* down, float c, int64_t rank,
                                 int64_t in) {
  constexpr int64_t kBlock = 32;
  int64_t j0 = 0;
  for (; j0 + kBlock <= in; j0 += kBlock) {
    float t[kBlock];
    for (int64_t j = 0; j < kBlock; ++j) t[j] = acc[j0 + j];
    for (int64_t k = 0; k < rank; ++k) {
      const float a = c * up_row[k];
      const float* d = down + k * in + j0;
      for (int64_t j = 0; j < kBlock; ++j) t[j] += a * d[j];
    }
    for (int64_t j = 0; j < kBlock; ++j) acc[j0 + j] = t[j];
  }
  for (int64_t k = 0; k < rank && j0 < in; ++k) {
    const float a = c * up_row[k];
    const float* d = down + k * in;
    for (int64_t j = j0; j < in; ++j) acc[j] += a * d[j];
  }
}

// Each output row is computed by one thread in one fixed order, so the bits
// do not depend on the thread count.
// (The cpu backend's pool; a chunk holds at least 2^20 multiply-adds.)
template <typename Fn>
void parallel_rows(int64_t rows, int64_t work_per_row, Fn fn) {
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, work_per_row));
  kernels::cpu::ThreadPool::global().parallel_for(rows, grain, fn);
}

}  // namespace

Result<HostTensor> merge_weight(const HostTensor& base, const std::vector<LoraDelta>& deltas, const std::string& name) {
  if (!kernels::is_float(base.dtype)) {
    return Status::InvalidArgument("LoRA target '" + name + "' is not a float tensor (" + base.describe() + ")");
  }
  const int64_t numel = base.numel();
  struct Factors {
    std::vector<float> up, down;
    int64_t rank = 0;
    float coefficient = 0;
  };
  std::vector<Factors> factors;
  int64_t in = 0, work = 0;
  for (const LoraDelta& d : deltas) {
    const int64_t out = d.up.shape.at(0);
    const int64_t rank = d.up.shape.at(1);
    in = d.down.numel() / std::max<int64_t>(1, d.down.shape.at(0));
    if (base.shape.empty() || out != base.shape[0] || out * in != numel || d.down.shape[0] != rank) {
      return Status::InvalidArgument(d.origin + ": the LoRA's delta is [" + std::to_string(out) + ", " +
                                     std::to_string(in) + "] but '" + name + "' is " + shape_str(base.shape));
    }
    factors.push_back({d.up.to_f32(), d.down.to_f32(), rank, d.coefficient});
    work += rank * in;
  }
  // Row by row: the deltas summed in fp32 in their order (each over its rank
  // in order), then added to the base row read as fp32. Scratch: one row per
  // thread beside the merged weight.
  std::vector<float> w(static_cast<size_t>(numel));
  const int64_t rows = base.shape.empty() ? 0 : base.shape[0];
  const int64_t cols = rows > 0 ? numel / rows : 0;
  parallel_rows(rows, std::max<int64_t>(work, cols), [&](int64_t b, int64_t e) {
    std::vector<float> acc(static_cast<size_t>(cols));
    for (int64_t o = b; o < e; ++o) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (const Factors& f : factors)
        accumulate_row(acc.data(), f.up.data() + o * f.rank, f.down.data(), f.coefficient, f.rank, cols);
      float* row = w.data() + o * cols;
      if (base.dtype == kernels::DType::kF32) {
        std::memcpy(row, static_cast<const float*>(base.data) + o * cols, static_cast<size_t>(cols) * sizeof(float));
      } else {
        for (int64_t j = 0; j < cols; ++j) row[j] = kernels::load_as_f32(base.data, base.dtype, o * cols + j);
      }
      for (int64_t j = 0; j < cols; ++j) row[j] += acc[static_cast<size_t>(j)];
    }
  });
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
