// Generation settings the tests share: sample_settings() small (64x48, 3
// steps, the defaults otherwise) for the golden tests, every_field_set() with
// no field at its default (quotes, a newline, the largest seed) for the round
// trips through JSON, the wire and the database.
#pragma once

#include "spec/generation_settings.h"

namespace hipq::spec::testing {

inline GenerationSettings sample_settings() {
  GenerationSettings s;
  s.prompt = "a lighthouse at dusk";
  s.negative_prompt = "";
  s.seed = 42;
  s.width = 64;
  s.height = 48;
  s.steps = 3;
  s.guidance = 5.0f;
  return s;
}

inline GenerationSettings every_field_set() {
  GenerationSettings s;
  s.prompt = "a red fox, \"quoted\"\nnew line";
  s.negative_prompt = "blurry";
  s.seed = 18446744073709551615ull;
  s.width = 768;
  s.height = 512;
  s.steps = 4;
  s.guidance = 7.1f;
  s.sampler = "dpmpp_2m_karras";
  s.precision = "bf16";
  s.rng = "torch-cuda";
  s.timestep_spacing = "trailing";
  s.guidance_rescale = 0.7f;
  s.loras = {{"/loras/watercolor style.safetensors", 0.75f}, {"/loras/detail.safetensors", -0.5f}};
  s.init_image = "/inits/fox \"1\".png";
  s.strength = 0.6f;
  s.refiner = "synthetic:sdxl-refiner";
  s.refiner_switch_at = 0.75f;
  s.aesthetic_score = 7.0f;
  s.negative_aesthetic_score = 2.0f;
  s.vae_precision = "fp32";
  return s;
}

}  // namespace hipq::spec::testing
