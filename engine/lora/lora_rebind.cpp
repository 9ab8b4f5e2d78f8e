#include "engine/lora/lora_rebind.h"

#include <chrono>
#include <map>
#include <set>

#include "engine/lora/lora_merge.h"

namespace hipq::engine::lora {

std::map<std::string, std::vector<std::string>> weights_to_rewrite(const WeightSignatures& from,
                                                                   const WeightSignatures& to) {
  static const std::map<std::string, std::string> kNone;
  auto of = [](const WeightSignatures& s, const std::string& component) -> const std::map<std::string, std::string>& {
    auto it = s.find(component);
    return it == s.end() ? kNone : it->second;
  };
  std::set<std::string> components;
  for (const auto& [c, w] : from) components.insert(c);
  for (const auto& [c, w] : to) components.insert(c);
  std::map<std::string, std::vector<std::string>> out;
  for (const std::string& c : components) {
    const auto& a = of(from, c);
    const auto& b = of(to, c);
    std::set<std::string> names;
    for (const auto& [name, sig] : a) {
      auto it = b.find(name);
      if (it == b.end() || it->second != sig) names.insert(name);
    }
    for (const auto& [name, sig] : b)
      if (!a.contains(name)) names.insert(name);
    if (!names.empty()) out[c] = std::vector<std::string>(names.begin(), names.end());
  }
  return out;
}

Result<RebindStats> rebind_weights(const std::vector<BoundParam>& params, const std::vector<std::string>& names,
                                   const WeightSource& source, kernels::Backend& backend, kernels::DType dtype,
                                   Fp8Weights fp8) {
  const std::set<std::string, std::less<>> wanted(names.begin(), names.end());
  // name -> (parameter, part), every name found before anything is written.
  std::map<std::string, std::pair<const BoundParam*, size_t>, std::less<>> where;
  for (const BoundParam& p : params) {
    for (size_t i = 0; i < p.names.size(); ++i)
      if (wanted.contains(p.names[i])) where.emplace(p.names[i], std::make_pair(&p, i));
  }
  for (const std::string& n : wanted) {
    if (!where.contains(n))
      return Status::NotFound(source.describe() + ": no parameter of the loaded model is '" + n +
                              "'; the LoRA switch cannot rewrite it");
  }
  RebindStats stats;
  WeightLoader loader(source, backend, dtype, {}, fp8);
  const auto* merged = dynamic_cast<const LoraMergedSource*>(&source);
  const double merge_before = merged != nullptr ? merged->merge_ms() : 0.0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [name, at] : where) {
    HIPQ_RETURN_IF_ERROR(loader.rewrite(*at.first, at.second));
    ++stats.weights;
    const BoundParam& p = *at.first;
    int64_t numel = 1;
    for (int64_t d : p.part_shape) numel *= d;
    if (p.fp8_conv)
      stats.device_bytes += p.fp8_conv->codes.numel() + p.part_shape[0] * static_cast<int64_t>(sizeof(float));
    else
      stats.device_bytes += p.fp8 ? numel + p.part_shape[0] * static_cast<int64_t>(sizeof(float))
                                  : numel * static_cast<int64_t>(kernels::dtype_size(dtype));
  }
  // One wait for every rewrite's device work (WeightLoader::rewrite waits for none).
  HIPQ_RETURN_IF_ERROR(backend.synchronize());
  const double total = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  stats.merge_ms = merged != nullptr ? merged->merge_ms() - merge_before : 0.0;
  stats.base_ms = loader.fetch_ms() - stats.merge_ms;
  stats.write_ms = total - loader.fetch_ms();
  return stats;
}

}  // namespace hipq::engine::lora
