// Synthetic models: deterministic weights from a seed for any config, so
// tests and benchmarks run without downloading a checkpoint.
//
// Names (spec "synthetic:NAME[@SEED]", seed 0 when omitted):
//   tiny-sdxl  SDXL layout at toy width (UNet channels 32/64, text encoders 32
//              wide, 2 layers, VAE 32..64): a 64x64 px image in well under a
//              second on the cpu backend.
//   tiny-sd15  SD 1.x layout at the same toy width.
//   sdxl       the full SDXL base 1.0 architecture (2.6 B UNet parameters).
//   sd15       the full SD 1.5 architecture.
// Values follow PyTorch's default initialisation of each module (Linear and
// Conv: U(±1/sqrt(fan_in)) for weight and bias; norms: weight 1, bias 0;
// token embeddings N(0, 0.02²), position embeddings N(0, 0.01²) as transformers'
// CLIP init), so activations keep the reference's scale. Every element is a
// pure function of (seed, component, tensor name, index): tensors are made on
// request (get()), in parallel, identical whatever the thread count, and never
// all at once (the full SDXL would not fit in host memory as f32 twice).
//
// ModelComponents carries every component's config (json as diffusers /
// transformers write it), the scheduler config (EulerDiscreteScheduler),
// model_index, the CLIP vocabulary (find_default_clip_vocab()) and
// weights_sha256 = sha256 of (name, seed, configs).
// Errors: InvalidArgument for an unknown name or a bad seed (listing the
// known names); NotFound when the CLIP vocabulary cannot be found.
// Thread safety: make_synthetic_model is reentrant; the sources it returns are
// immutable and may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "engine/model_files.h"
#include "engine/models/clip_text.h"
#include "engine/models/unet.h"
#include "engine/models/vae.h"
#include "engine/models/weight_binder.h"
#include "engine/weight_source.h"

namespace hipq::engine {

Result<ModelComponents> make_synthetic_model(std::string_view name);

// The architecture of a synthetic model name (without "@SEED").
struct SyntheticArchitecture {
  std::string family;  // "sdxl" | "sd1"
  ClipTextConfig text_encoder;
  bool has_text_encoder_2 = false;
  ClipTextConfig text_encoder_2;
  UNetConfig unet;
  VaeConfig vae;
};
Result<SyntheticArchitecture> synthetic_architecture(std::string_view name);
std::vector<std::string> synthetic_model_names();

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
