// Per-architecture constants of the hip backend: launch shapes and the peak
// numbers used for roofline percentages. Plain C++ (no HIP includes).
//
// Peaks are datasheet leads, not measurements; 0 means "derive from the
// device's clocks" (see hip_backend.hip). Tile shapes are compile-time in the
// kernels; these constants only choose between the compiled variants.
#pragma once

#include <string_view>

namespace hipq::kernels {

struct ArchTuning {
  std::string_view arch_prefix;     // matched against BackendInfo::arch ("sm_90", "gfx1030")
  std::string_view name_contains;   // and the device name ("" = any)
  double peak_fp32_tflops;          // non-tensor fp32
  double peak_fp16_tflops;          // dense fp16/bf16 matrix units
  double peak_bandwidth_gbs;        // device memory
  int elementwise_block;            // threads per block of elementwise kernels
  int blocks_per_sm;                // grid-stride kernels launch SMs * this many blocks
  int gemm_big_tile_min_blocks;     // use the 128x128 GEMM tile when it yields >= this many blocks (× SMs)
};

inline constexpr ArchTuning kArchTunings[] = {
    {"sm_90", "H200", 67.0, 989.0, 4800.0, 256, 16, 1},
    {"sm_90", "H100", 67.0, 989.0, 3350.0, 256, 16, 1},
    {"sm_90", "", 67.0, 989.0, 3350.0, 256, 16, 1},
    {"gfx1030", "", 20.7, 41.4, 512.0, 256, 16, 1},
    {"", "", 0.0, 0.0, 0.0, 256, 8, 1},  // fallback: peaks derived from clocks
};

inline const ArchTuning& find_arch_tuning(std::string_view arch, std::string_view device_name) {
  for (const ArchTuning& t : kArchTunings) {
    if (!t.arch_prefix.empty() && arch.substr(0, t.arch_prefix.size()) != t.arch_prefix) continue;
    if (!t.name_contains.empty() && device_name.find(t.name_contains) == std::string_view::npos) continue;
    return t;
  }
  return kArchTunings[sizeof(kArchTunings) / sizeof(kArchTunings[0]) - 1];
}

}  // namespace hipq::kernels
