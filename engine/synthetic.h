// Synthetic models: deterministic weights from a seed for any config, so
// tests and benchmarks run without downloading a checkpoint.
//
// Names (spec "synthetic:NAME[@SEED]", seed 0 when omitted):
//   tiny-sdxl  SDXL layout at toy width (UNet channels 32/64, text encoders 32
//              wide, 2 layers, VAE 32..64): a 64x64 px image in well under a
//              second on the cpu backend.
//   tiny-sd15  SD 1.x layout at the same toy width.
//   tiny-sd2   SD 2.x layout (OpenCLIP-style gelu text encoder, linear
//              projections, v_prediction) at the same toy width.
//   sdxl       the full SDXL base 1.0 architecture (2.6 B UNet parameters).
//   sd15       the full SD 1.5 architecture.
//   sd21       the full SD 2.1 (768 px, v_prediction) architecture.
//   tiny-sdxl-refiner  the SDXL refiner's layout (text encoder 2 alone, five
//              time ids, no attention in the outer levels) at toy width, with
//              tiny-sdxl's text encoder 2 and VAE (same values for the same
//              seed): the refiner of a tiny-sdxl base in tests.
//   sdxl-refiner  the full SDXL refiner 1.0 architecture (2.26 B UNet parameters).
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
#include "engine/model_components.h"
#include "engine/synthetic_weights.h"

namespace hipq::engine {

Result<ModelComponents> make_synthetic_model(std::string_view name);

}  // namespace hipq::engine
