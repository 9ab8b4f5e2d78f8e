#include "engine/weight_source.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/fs.h"

namespace hipq::engine {
namespace {

// Shards of one component; each name lives in exactly one file.
class SafetensorsSource : public WeightSource {
 public:
  SafetensorsSource(std::string label, std::vector<std::shared_ptr<SafetensorsFile>> files,
                    std::map<std::string, size_t, std::less<>> index)
      : label_(std::move(label)), files_(std::move(files)), index_(std::move(index)) {}

  std::string describe() const override { return label_; }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    out.reserve(index_.size());
    for (const auto& [n, i] : index_) out.push_back(n);
    return out;
  }
  bool contains(std::string_view name) const override { return index_.find(name) != index_.end(); }
  Result<TensorMeta> meta(std::string_view name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return not_found(name);
    HIPQ_ASSIGN_OR_RETURN(TensorInfo info, files_[it->second]->info(name));
    return TensorMeta{info.dtype, info.shape};
  }
  Result<HostTensor> get(std::string_view name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return not_found(name);
    return files_[it->second]->get(name);
  }

 private:
  Status not_found(std::string_view name) const {
    return Status::NotFound(label_ + ": no tensor '" + std::string(name) + "'");
  }
  std::string label_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace

Result<std::shared_ptr<WeightSource>> open_safetensors_source(const std::vector<std::filesystem::path>& files,
                                                               std::string label) {
  if (files.empty()) return Status::InvalidArgument("open_safetensors_source: no files given");
  std::vector<std::shared_ptr<SafetensorsFile>> opened;
  std::map<std::string, size_t, std::less<>> index;
  for (size_t i = 0; i < files.size(); ++i) {
    HIPQ_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(files[i]));
    for (const auto& name : f->names()) {
      auto [it, inserted] = index.emplace(name, i);
      if (!inserted)
        return Status::Corruption("tensor '" + name + "' is in both '" + files[it->second].string() + "' and '" +
                                  files[i].string() + "'");
    }
    opened.push_back(std::move(f));
  }
  if (label.empty()) {
    label = std::string("'") + files[0].string() + "'";
    if (files.size() > 1) label += " (+" + std::to_string(files.size() - 1) + " shards)";
  }
  return std::shared_ptr<WeightSource>(std::make_shared<SafetensorsSource>(std::move(label), std::move(opened),
                                                                           std::move(index)));
}

Result<std::shared_ptr<WeightSource>> open_safetensors_index(const std::filesystem::path& index_json,
                                                              std::string label) {
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_file(index_json));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("'") + index_json.string() + "' is not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return Status::Corruption(std::string("'") + index_json.string() + "': no \"weight_map\" object");
  std::vector<std::filesystem::path> shards;
  std::map<std::string, std::string> expected;  // tensor -> shard file name
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it.value().is_string())
      return Status::Corruption(std::string("'") + index_json.string() + "': weight_map['" + it.key() + "'] is not a string");
    const std::string shard = it.value().get<std::string>();
    if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
      return Status::Corruption(std::string("'") + index_json.string() + "': shard name '" + shard + "' is not a plain file name");
    auto p = index_json.parent_path() / shard;
    if (std::find(shards.begin(), shards.end(), p) == shards.end()) shards.push_back(p);
    expected[it.key()] = shard;
  }
  if (shards.empty()) return Status::Corruption(std::string("'") + index_json.string() + "': empty weight_map");
  if (label.empty()) label = std::string("'") + index_json.string() + "'";
  HIPQ_ASSIGN_OR_RETURN(auto src, open_safetensors_source(shards, label));
  for (const auto& [name, shard] : expected) {
    if (!src->contains(name))
      return Status::Corruption(std::string("'") + index_json.string() + "' lists tensor '" + name + "' in '" + shard +
                                "', which does not hold it");
  }
  return src;
}

void InMemoryWeightSource::add(std::string name, HostTensor tensor) { tensors_[std::move(name)] = std::move(tensor); }

std::vector<std::string> InMemoryWeightSource::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [n, t] : tensors_) out.push_back(n);
  return out;
}

bool InMemoryWeightSource::contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

Result<TensorMeta> InMemoryWeightSource::meta(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::NotFound(label_ + ": no tensor '" + std::string(name) + "'");
  return TensorMeta{it->second.dtype, it->second.shape};
}

Result<HostTensor> InMemoryWeightSource::get(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return Status::NotFound(label_ + ": no tensor '" + std::string(name) + "'");
  return it->second;
}

}  // namespace hipq::engine
