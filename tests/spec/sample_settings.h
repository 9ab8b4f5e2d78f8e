// Small generation settings the golden tests share (engine and spec): 64x48,
// 3 steps, the defaults otherwise.
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

}  // namespace hipq::spec::testing
