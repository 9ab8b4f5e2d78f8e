// Synthetic weights: parameters generated on request from a seed, and the
// architectures of hipq's synthetic model names (spec/synthetic_models.h
// lists the names; each has an architecture here). make_synthetic_model
// (synthetic.h) assembles them into ModelComponents.
//
// Every element is a pure function of (seed, component, tensor name, index)
// (a counter-based hash, no sequential RNG state), so a tensor is the same
// whatever the thread count and whichever tensors were asked for before.
// Init scale: PyTorch's default for the owning module (ParamInit).
// Thread safety: SyntheticWeightSource is immutable; get() may be called from
// any thread and uses std::thread workers internally.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "engine/models/clip_text.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"
#include "engine/models/weight_binder.h"
#include "engine/weight_source.h"

namespace hipq::engine {

// The architecture of a synthetic model name (without "@SEED").
struct SyntheticArchitecture {
  std::string family;  // "sdxl" | "sd1" | "sd2"
  // The SDXL refiner has text encoder 2 alone (text_encoder unused).
  bool has_text_encoder_1 = true;
  ClipTextConfig text_encoder;
  bool has_text_encoder_2 = false;
  ClipTextConfig text_encoder_2;
  UNetConfig unet;
  VaeConfig vae;
};
// InvalidArgument listing spec::synthetic_model_names() for an unknown name.
Result<SyntheticArchitecture> synthetic_architecture(std::string_view name);

// Weights generated on request from a parameter list.
class SyntheticWeightSource : public WeightSource {
 public:
  // `component` ("unet", ...) enters every value's hash, so two components
  // with equal tensor names still differ.
  SyntheticWeightSource(std::string label, std::string component, uint64_t seed, std::vector<ParamSpec> specs);

  std::string describe() const override { return label_; }
  std::vector<std::string> names() const override;
  bool contains(std::string_view name) const override;
  Result<TensorMeta> meta(std::string_view name) const override;
  // An f32 tensor, computed now (threads: hardware concurrency).
  Result<HostTensor> get(std::string_view name) const override;

  // The parameter list in module order (for export: the order diffusers writes).
  const std::vector<ParamSpec>& specs() const { return specs_; }
  int64_t parameter_count() const;

 private:
  const ParamSpec* find(std::string_view name) const;
  std::string label_;
  std::string component_;
  uint64_t seed_;
  std::vector<ParamSpec> specs_;
  std::map<std::string, size_t, std::less<>> index_;
};

// Fills `out[0..n)` with the values of parameter `spec` (exposed for tests).
void fill_synthetic(const ParamSpec& spec, std::string_view component, uint64_t seed, float* out, int64_t n);

}  // namespace hipq::engine
