// WeightSource: named tensors of one model component (unet, vae, text
// encoder), whatever their storage — one or several safetensors files, a
// single-file checkpoint seen through a key mapping, synthetic weights in
// memory. Models bind to diffusers key names through this interface only.
//
// Errors name the source (describe(): usually the file) and the tensor:
// NotFound for an unknown name, Corruption/IOError from the storage.
// Thread safety: implementations are immutable after construction; every
// const method may be called concurrently. HostTensors returned stay valid on
// their own (they hold their storage alive).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/safetensors.h"
#include "kernels/backend.h"

namespace hipq::engine {

// dtype and shape of a tensor without reading its data.
struct TensorMeta {
  kernels::DType dtype = kernels::DType::kF32;
  std::vector<int64_t> shape;

  // The stored bytes: elements times the stored dtype's size.
  int64_t bytes() const {
    int64_t n = static_cast<int64_t>(kernels::dtype_size(dtype));
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// A tensor a source hands over on a backend's device (get_on_device):
// contiguous, of the tensor's shape, in the dtype meta() reports. `owned`
// holds its memory when the caller takes it (dropped after use); empty when
// the source keeps the memory (valid until the source changes or dies).
struct DeviceWeight {
  kernels::Tensor tensor;
  kernels::Buffer owned;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // "unet weights in /models/x/unet/diffusion_pytorch_model.safetensors".
  virtual std::string describe() const = 0;
  // Every tensor name, sorted.
  virtual std::vector<std::string> names() const = 0;
  virtual bool contains(std::string_view name) const = 0;
  virtual Result<TensorMeta> meta(std::string_view name) const = 0;
  virtual Result<HostTensor> get(std::string_view name) const = 0;
  // The tensor `name` already on `backend`'s device, or made there, where a
  // source can do better than get() and an upload (a LoRA merge on the
  // device, base bits kept there: engine/lora/); nullopt otherwise, and the
  // caller uses get(). The backend's thread only. Errors as get()'s.
  virtual Result<std::optional<DeviceWeight>> get_on_device(std::string_view /*name*/,
                                                            kernels::Backend& /*backend*/) const {
    return std::optional<DeviceWeight>();
  }
};

// One or more safetensors files (shards) seen as one namespace. A name found in
// two files is Corruption naming both files.
Result<std::shared_ptr<WeightSource>> open_safetensors_source(const std::vector<std::filesystem::path>& files,
                                                               std::string label = {});
// A diffusers "*.safetensors.index.json": {"weight_map": {name: shard file}}.
Result<std::shared_ptr<WeightSource>> open_safetensors_index(const std::filesystem::path& index_json,
                                                              std::string label = {});

// Tensors held in memory (synthetic weights, tests). Not thread-safe while
// being filled with add(); immutable (and shareable) afterwards.
class InMemoryWeightSource : public WeightSource {
 public:
  explicit InMemoryWeightSource(std::string label) : label_(std::move(label)) {}
  // Replaces an existing tensor of the same name.
  void add(std::string name, HostTensor tensor);

  std::string describe() const override { return label_; }
  std::vector<std::string> names() const override;
  bool contains(std::string_view name) const override;
  Result<TensorMeta> meta(std::string_view name) const override;
  Result<HostTensor> get(std::string_view name) const override;

 private:
  std::string label_;
  std::map<std::string, HostTensor, std::less<>> tensors_;
};

}  // namespace hipq::engine
