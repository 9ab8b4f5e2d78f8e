// The hip backend's route switches: environment variables that move a
// problem off its default kernel onto another one the build also has, so
// that a GPU at hand can run the other routes' parity cases and time them
// (docs/kernels-hip.md, kernels/dev/README.md). Read once when a backend
// starts and kept in HipContext::switches; nothing reads the environment
// per call. Plain C++ (no HIP): built and tested on the cpu.
//
// The product modes HIPQ_FP32_MATH (kernels/fp32_math.h) and HIPQ_DOT2
// (kernels/f16_math.h) are not switches of this kind: they change the
// arithmetic, are reported in BackendInfo and have modules of their own.
#pragma once

#include <functional>

namespace hipq::kernels {

struct RouteSwitches {
  // HIPQ_NO_WGMMA set (any value) -> false: a compute capability 9.0 device
  // takes the sm_80 routes (mma.sync) instead of the Hopper wgmma kernels.
  bool wgmma = true;
  // HIPQ_GEMM_TMA: "0" -> 0 (16-bit Hopper GEMMs on the cp.async wgmma
  // kernel, gemm/gemm_wgmma.h, instead of the TMA one; matmul_fp8 on
  // gemm/gemm_wgmma_fp8.h instead of gemm/gemm_tma_fp8.h), "128" / "160" /
  // "192" / "256" -> that TMA tile width for every GEMM and conv it takes,
  // else -1 (the width by gemm_tma_tile_n). For the parity runs of each
  // width and of the cp.async kernel.
  int gemm_tma = -1;
  // HIPQ_GEMM_TMA_FP8: the fp8 TMA GEMM's tile width: 160 (128 x 160, every
  // SDXL N a multiple of 160; the default since it passed the light table
  // and beat 128 on an H100, docs/benchmarks.md) or "128" -> 128 x 128, the
  // earlier tile, for parity runs and comparisons.
  int gemm_tma_fp8_n = 160;
  // HIPQ_FP32_WGMMA=0 -> false: 3xTF32 products on the mma.sync kernels
  // (gemm/gemm_3xtf32.h, the sm_80 route) instead of the Hopper wgmma ones
  // (gemm/gemm_tma_3xtf32.h).
  bool fp32_wgmma = true;
  // HIPQ_CONV_NHWC=0 -> false: fp32 3xTF32 convs gather the NCHW input
  // (implicit im2col) instead of reading an NHWC copy: slower, but no
  // transient copy of the input (0.5 GB less peak at 1024 px).
  bool conv_nhwc = true;
  // HIPQ_ATTN_WGMMA=0 -> false: f16/bf16 attention of head dim 64 on the
  // mma.sync kernel instead of the Hopper wgmma one
  // (attention/attention_wgmma.h). Its consumer warpgroups a block:
  // HIPQ_ATTN_WGMMA=3 -> 3, "auto" -> 0 (2 or 3 by
  // dev::attention_wgmma_consumers), else 2. HIPQ_ATTN_WGMMA_KEYS=any ->
  // the wgmma kernel also takes key counts that are not a multiple of its
  // 128-key tile (SDXL's 77-key cross attention), else those run on
  // mma.sync. Three consumers and key tails are off by default, pending a
  // GPU run (kernels/dev/README.md).
  bool attention_wgmma = true;
  int attention_wgmma_consumers = 2;
  bool attention_wgmma_key_tails = false;
};

// The switches for the variables `lookup` gives (nullptr: unset).
RouteSwitches route_switches(const std::function<const char*(const char*)>& lookup);
// route_switches of the process environment.
RouteSwitches route_switches_from_env();

}  // namespace hipq::kernels
