// Synthetic model names: the models whose weights hipq generates from a seed
// instead of reading files, named in a model spec as "synthetic:NAME[@SEED]".
//
// This is the one list of them: the manifest (hipq submit) checks names
// against it without linking the engine, and the engine
// (engine/synthetic_weights.h, synthetic_architecture) has an architecture
// for each.
// Thread safety: constants and pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hipq::spec {

// What a synthetic model spec starts with: "synthetic:tiny-sdxl@3".
inline constexpr std::string_view kSyntheticModelPrefix = "synthetic:";

// tiny-sdxl, tiny-sd15, tiny-sd2, tiny-sdxl-refiner (test sizes), sdxl, sd15,
// sd21, sdxl-refiner (full sizes).
const std::vector<std::string>& synthetic_model_names();

}  // namespace hipq::spec
