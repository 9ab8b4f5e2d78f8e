// choose_gemm_route (kernels/hip/gemm_route.h) over every GEMM shape SDXL
// runs at 1024 px, for each device kind the hip backend routes for and each
// dtype. The expected routes are the ones matmul.hip took before the choice
// became a function of its own; the tile widths were worked out from the
// rules (gemm_tma_tile_n, the SIMT core's big-tile test) by hand, not by
// calling them. A change of route shows here first.
#include "kernels/hip/gemm_route.h"

#include <gtest/gtest.h>

#include <string>

namespace hipq::kernels {
namespace {

// A linear layer as engine/models/layers.cpp runs it: x [rows, K] contiguous
// times weight [N, K] with trans_b, both from the device pool (aligned); with
// batch > 1, x is [batch, rows, K] and the weight broadcasts.
struct SdxlGemm {
  const char* name;
  int64_t batch, M, N, K;
  bool geglu;
  int sm90_tma_tile;    // 132 SMs (H200)
  int sm80_simt_tile;   // 108 SMs (A100), fp32 with HIPQ_FP32_MATH=fma
  int rdna2_simt_tile;  // 36 (RX 6800 XT as HIP counts them)
};

// UNet at 128 x 128 latents with the CFG batch of 2 (level 1: 640 channels,
// 64 x 64 = 4096 tokens; level 2: 1280 channels, 32 x 32 = 1024 tokens;
// self attention q, k, v stacked; cross attention k, v stacked from the
// 2 x 77 x 2048 context; FF in as fused GEGLU pairs), the time and added
// embeddings (2 rows), the VAE decoder's mid attention (512 channels at
// 128 x 128, one image), the two text encoders (CLIP ViT-L: 768 wide, FF
// 3072; OpenCLIP bigG: 1280 wide, FF 5120; 77 tokens of one prompt, or 154
// with the negative one) and the parity table's SDXL matmul cases
// (tests/kernels/parity/parity_cases.cpp).
constexpr SdxlGemm kSdxlGemms[] = {
    {"unet_time_linear_1", 1, 2, 1280, 320, false, 128, 64, 64},
    {"unet_time_linear_2", 1, 2, 1280, 1280, false, 128, 64, 64},
    {"unet_add_linear_1", 1, 2, 1280, 2816, false, 128, 64, 64},
    {"unet_resnet_temb_320", 1, 2, 320, 1280, false, 128, 64, 64},
    {"unet_resnet_temb_640", 1, 2, 640, 1280, false, 128, 64, 64},
    {"unet_l1_proj_q_out_8192x640x640", 1, 8192, 640, 640, false, 160, 128, 128},
    {"unet_l1_qkv_8192x1920x640", 1, 8192, 1920, 640, false, 192, 128, 128},
    {"unet_l1_cross_kv_154x1280x2048", 1, 154, 1280, 2048, false, 128, 64, 64},
    {"unet_l1_ff_geglu_8192x5120x640", 1, 8192, 5120, 640, true, 256, 128, 128},
    {"unet_l1_ff_in_8192x5120x640", 1, 8192, 5120, 640, false, 256, 128, 128},
    {"unet_l1_ff_out_8192x640x2560", 1, 8192, 640, 2560, false, 160, 128, 128},
    {"unet_l2_proj_q_out_2048x1280x1280", 1, 2048, 1280, 1280, false, 160, 128, 128},
    {"unet_l2_qkv_2048x3840x1280", 1, 2048, 3840, 1280, false, 160, 128, 128},
    {"unet_l2_cross_kv_154x2560x2048", 1, 154, 2560, 2048, false, 128, 64, 128},
    {"unet_l2_ff_geglu_2048x10240x1280", 1, 2048, 10240, 1280, true, 256, 128, 128},
    {"unet_l2_ff_in_2048x10240x1280", 1, 2048, 10240, 1280, false, 256, 128, 128},
    {"unet_l2_ff_out_2048x1280x5120", 1, 2048, 1280, 5120, false, 160, 128, 128},
    {"parity_cross_kv_batch2_77x1280x2048", 2, 77, 1280, 2048, false, 128, 64, 64},
    {"vae_mid_qkv_16384x1536x512", 1, 16384, 1536, 512, false, 256, 128, 128},
    {"vae_mid_out_16384x512x512", 1, 16384, 512, 512, false, 256, 128, 128},
    {"clip_l_qkvo_77x768x768", 1, 77, 768, 768, false, 128, 64, 64},
    {"clip_l_fc1_77x3072x768", 1, 77, 3072, 768, false, 128, 64, 64},
    {"clip_l_fc2_77x768x3072", 1, 77, 768, 3072, false, 128, 64, 64},
    {"clip_g_qkvo_77x1280x1280", 1, 77, 1280, 1280, false, 128, 64, 64},
    {"clip_g_fc1_77x5120x1280", 1, 77, 5120, 1280, false, 128, 64, 128},
    {"clip_g_fc2_77x1280x5120", 1, 77, 1280, 5120, false, 128, 64, 64},
    {"clip_l_qkvo_154x768x768", 1, 154, 768, 768, false, 128, 64, 64},
    {"clip_l_fc1_154x3072x768", 1, 154, 3072, 768, false, 128, 64, 128},
    {"clip_l_fc2_154x768x3072", 1, 154, 768, 3072, false, 128, 64, 64},
    {"clip_g_qkvo_154x1280x1280", 1, 154, 1280, 1280, false, 128, 64, 64},
    {"clip_g_fc1_154x5120x1280", 1, 154, 5120, 1280, false, 128, 64, 128},
    {"clip_g_fc2_154x1280x5120", 1, 154, 1280, 5120, false, 128, 64, 64},
    {"clip_g_projection_1x1280x1280", 1, 1, 1280, 1280, false, 128, 64, 64},
    {"clip_g_projection_2x1280x1280", 1, 2, 1280, 1280, false, 128, 64, 64},
};

enum class DeviceKind { kSm90a, kSm80, kSm80Fma, kGfx1030, kGfx1030Dot2 };

const char* kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::kSm90a:
      return "sm_90a";
    case DeviceKind::kSm80:
      return "sm_80";
    case DeviceKind::kSm80Fma:
      return "sm_80 (HIPQ_FP32_MATH=fma)";
    case DeviceKind::kGfx1030:
      return "gfx1030";
    case DeviceKind::kGfx1030Dot2:
      return "gfx1030 (HIPQ_DOT2=1)";
  }
  return "?";
}

// HipContext as hip_backend.hip fills it on each kind, default switches.
GemmDevice device(DeviceKind k) {
  GemmDevice d;
  switch (k) {
    case DeviceKind::kSm90a:
      d.multiprocessors = 132;
      d.matrix_units = d.wgmma = d.fp32_3xtf32 = true;
      break;
    case DeviceKind::kSm80:
      d.multiprocessors = 108;
      d.matrix_units = d.fp32_3xtf32 = true;
      break;
    case DeviceKind::kSm80Fma:
      d.multiprocessors = 108;
      d.matrix_units = true;
      break;
    case DeviceKind::kGfx1030:
      d.multiprocessors = 36;
      break;
    case DeviceKind::kGfx1030Dot2:
      d.multiprocessors = 36;
      d.dot2_f16 = true;
      break;
  }
  return d;
}

GemmProblem linear_problem(const SdxlGemm& g, DType dt) {
  GemmProblem p;
  p.a_dtype = p.b_dtype = dt;
  p.batch = g.batch;
  p.M = g.M;
  p.N = g.N;
  p.K = g.K;
  p.a_sb = g.batch > 1 ? g.M * g.K : 0;
  p.a_sm = g.K;
  p.a_sk = 1;
  p.b_sb = 0;
  p.b_sk = 1;
  p.b_sn = g.K;
  p.geglu_pairs = g.geglu;
  return p;
}

struct Expected {
  GemmKernel kernel;
  int tile_n;
  bool geglu_fused;
};

Expected expected(const SdxlGemm& g, DeviceKind k, DType dt) {
  const bool f16 = dt == DType::kF16, f32 = dt == DType::kF32;
  switch (k) {
    case DeviceKind::kSm90a:
      if (f32) return {GemmKernel::kTf32Wgmma, 0, false};
      return {GemmKernel::kTmaWgmma, g.sm90_tma_tile, g.geglu};
    case DeviceKind::kSm80:
      return {f32 ? GemmKernel::kTf32Mma : GemmKernel::kMma, 0, false};
    case DeviceKind::kSm80Fma:
      if (f32) return {GemmKernel::kSimt, g.sm80_simt_tile, false};
      return {GemmKernel::kMma, 0, false};
    case DeviceKind::kGfx1030:
      return {GemmKernel::kSimt, g.rdna2_simt_tile, false};
    case DeviceKind::kGfx1030Dot2:
      if (f16) return {GemmKernel::kDot2, 0, false};
      return {GemmKernel::kSimt, g.rdna2_simt_tile, false};
  }
  return {GemmKernel::kSimt, 0, false};
}

TEST(GemmRouteTest, EverySdxlShapeOnEveryDeviceKindAndDtype) {
  int checked = 0;
  for (const DeviceKind k : {DeviceKind::kSm90a, DeviceKind::kSm80, DeviceKind::kSm80Fma,
                             DeviceKind::kGfx1030, DeviceKind::kGfx1030Dot2}) {
    for (const DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (const SdxlGemm& g : kSdxlGemms) {
        const GemmRoute r = choose_gemm_route(linear_problem(g, dt), device(k));
        const Expected e = expected(g, k, dt);
        const std::string where =
            std::string(g.name) + " " + std::string(dtype_name(dt)) + " on " + kind_name(k);
        EXPECT_EQ(gemm_kernel_name(r.kernel), std::string(gemm_kernel_name(e.kernel))) << where;
        EXPECT_EQ(r.tile_n, e.tile_n) << where;
        EXPECT_EQ(r.geglu_fused, e.geglu_fused) << where;
        // Linear layers: both operands K-major; plain (copied straight to
        // shared memory) where the 16-bit kernels read them.
        EXPECT_TRUE(r.a_k_fast) << where;
        EXPECT_TRUE(r.b_k_fast) << where;
        EXPECT_EQ(r.a.plain, dt != DType::kF32) << where;
        EXPECT_EQ(r.b.plain, dt != DType::kF32) << where;
        EXPECT_EQ(r.a.ld, r.a.plain ? g.K : 0) << where;
        EXPECT_EQ(r.b.ld, r.b.plain ? g.K : 0) << where;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 5 * 3 * static_cast<int>(std::size(kSdxlGemms)));
}

const SdxlGemm& sdxl(const std::string& name) {
  for (const SdxlGemm& g : kSdxlGemms)
    if (name == g.name) return g;
  ADD_FAILURE() << "no SDXL shape " << name;
  return kSdxlGemms[0];
}

// The route switches and product modes on Hopper.
TEST(GemmRouteTest, HopperSwitches) {
  const GemmProblem ff = linear_problem(sdxl("unet_l1_ff_geglu_8192x5120x640"), DType::kF16);
  const GemmProblem qkv = linear_problem(sdxl("unet_l1_qkv_8192x1920x640"), DType::kBF16);
  const GemmProblem f32 = linear_problem(sdxl("unet_l1_proj_q_out_8192x640x640"), DType::kF32);
  GemmDevice d = device(DeviceKind::kSm90a);

  d.gemm_tma = 0;  // HIPQ_GEMM_TMA=0: the cp.async kernel, GEGLU still fused
  GemmRoute r = choose_gemm_route(ff, d);
  EXPECT_EQ(r.kernel, GemmKernel::kWgmma);
  EXPECT_EQ(r.tile_n, 0);
  EXPECT_TRUE(r.geglu_fused);

  d.gemm_tma = 128;  // a forced width
  r = choose_gemm_route(ff, d);
  EXPECT_EQ(r.kernel, GemmKernel::kTmaWgmma);
  EXPECT_EQ(r.tile_n, 128);

  d = device(DeviceKind::kSm90a);
  d.fp32_wgmma = false;  // HIPQ_FP32_WGMMA=0
  EXPECT_EQ(choose_gemm_route(f32, d).kernel, GemmKernel::kTf32Mma);
  EXPECT_EQ(choose_gemm_route(ff, d).kernel, GemmKernel::kTmaWgmma);

  d = device(DeviceKind::kSm90a);
  d.wgmma = false;  // HIPQ_NO_WGMMA: the sm_80 routes
  EXPECT_EQ(choose_gemm_route(ff, d).kernel, GemmKernel::kMma);
  EXPECT_FALSE(choose_gemm_route(ff, d).geglu_fused);
  EXPECT_EQ(choose_gemm_route(f32, d).kernel, GemmKernel::kTf32Mma);

  d = device(DeviceKind::kSm90a);
  d.dot2_f16 = true;  // HIPQ_DOT2=1: f16 on the packed-half kernel, bf16 stays on wgmma
  r = choose_gemm_route(ff, d);
  EXPECT_EQ(r.kernel, GemmKernel::kDot2);
  EXPECT_FALSE(r.geglu_fused);
  r = choose_gemm_route(qkv, d);
  EXPECT_EQ(r.kernel, GemmKernel::kTmaWgmma);
  EXPECT_EQ(r.tile_n, 192);

  d = device(DeviceKind::kSm90a);
  d.fp32_3xtf32 = false;  // HIPQ_FP32_MATH=fma
  r = choose_gemm_route(f32, d);
  EXPECT_EQ(r.kernel, GemmKernel::kSimt);
  EXPECT_EQ(r.tile_n, 128);
}

// Operands the wgmma kernels do not take go to mma.sync on Hopper.
TEST(GemmRouteTest, OperandLayouts) {
  const GemmDevice h200 = device(DeviceKind::kSm90a);
  GemmProblem p = linear_problem(sdxl("unet_l2_proj_q_out_2048x1280x1280"), DType::kF16);

  GemmProblem t = p;  // a transposed: [K, M] storage, m has unit stride
  t.a_sm = 1;
  t.a_sk = p.M;
  GemmRoute r = choose_gemm_route(t, h200);
  EXPECT_EQ(r.kernel, GemmKernel::kMma);
  EXPECT_FALSE(r.a_k_fast);
  EXPECT_TRUE(r.a.plain);
  EXPECT_EQ(r.a.ld, p.M);

  t = p;  // b not transposed: [K, N] storage, n has unit stride
  t.b_sk = p.N;
  t.b_sn = 1;
  r = choose_gemm_route(t, h200);
  EXPECT_EQ(r.kernel, GemmKernel::kMma);
  EXPECT_FALSE(r.b_k_fast);
  EXPECT_TRUE(r.b.plain);
  EXPECT_EQ(r.b.ld, p.N);

  t = p;  // K not a multiple of 8: no 16-byte row pieces
  t.K = 100;
  t.a_sm = t.b_sn = 100;
  r = choose_gemm_route(t, h200);
  EXPECT_EQ(r.kernel, GemmKernel::kMma);
  EXPECT_FALSE(r.a.plain);
  EXPECT_FALSE(r.b.plain);

  t = p;  // a not 16-byte aligned
  t.a_aligned16 = false;
  EXPECT_EQ(choose_gemm_route(t, h200).kernel, GemmKernel::kMma);

  t = p;  // rows overlapping (ld < K): no tensor map, the cp.async kernel
  t.a_sm = 8;
  EXPECT_EQ(choose_gemm_route(t, h200).kernel, GemmKernel::kWgmma);

  t = p;  // mixed dtypes: the fp32 SIMT core everywhere
  t.b_dtype = DType::kBF16;
  r = choose_gemm_route(t, h200);
  EXPECT_EQ(r.kernel, GemmKernel::kSimt);
  EXPECT_FALSE(r.a.plain);
  t.b_dtype = DType::kF32;
  EXPECT_EQ(choose_gemm_route(t, h200).kernel, GemmKernel::kSimt);
  EXPECT_EQ(choose_gemm_route(t, device(DeviceKind::kGfx1030Dot2)).kernel, GemmKernel::kSimt);

  t = p;  // a batch of one row each: 16 blocks, fewer than 36 CUs -> the small SIMT tile
  t.M = 1;
  t.batch = 16;
  t.N = 128;
  t.a_sb = t.K;
  EXPECT_EQ(choose_gemm_route(t, device(DeviceKind::kGfx1030)).tile_n, 64);
  t.batch = 36;
  EXPECT_EQ(choose_gemm_route(t, device(DeviceKind::kGfx1030)).tile_n, 128);
}

TEST(GemmRouteTest, TmaTileWidth) {
  // docs/kernels-hip.md's examples: 2048 x 1280 on 132 SMs -> 160; 8192 x 640 -> 160.
  EXPECT_EQ(gemm_tma_tile_n(1, 2048, 1280, 132), 160);
  EXPECT_EQ(gemm_tma_tile_n(1, 8192, 640, 132), 160);
  // A filter that allows only 128 (a conv whose rows fit no wider tile).
  EXPECT_EQ(gemm_tma_tile_n(1, 8192, 5120, 132, [](int bn) { return bn == 128; }), 128);
  EXPECT_EQ(gemm_tma_tile_n(1, 8192, 5120, 132, [](int) { return false; }), 0);
  int blocks = 0;
  ASSERT_TRUE(tma_grid_blocks(1, 8192, 640, 160, 132, blocks));
  EXPECT_EQ(blocks, 132);  // 256 tiles over a persistent grid of 132 blocks
  ASSERT_TRUE(tma_grid_blocks(1, 128, 256, 256, 132, blocks));
  EXPECT_EQ(blocks, 1);
  EXPECT_FALSE(tma_grid_blocks(65535, int64_t{1} << 30, int64_t{1} << 30, 128, 132, blocks));
}

}  // namespace
}  // namespace hipq::kernels

namespace hipq::kernels {
namespace {

// matmul_fp8: every UNet linear layer of SDXL (the shapes above named unet_*
// and the parity table's) on the e4m3 wgmma kernel fed by TMA on a Hopper
// device (its cp.async form with HIPQ_GEMM_TMA=0); problems neither takes
// on the plain fp8 kernel.
TEST(GemmRouteTest, Fp8LinearLayersTakeTheWgmmaKernelOnHopper) {
  GemmDevice d = device(DeviceKind::kSm90a);
  d.fp8 = true;
  int checked = 0;
  for (const SdxlGemm& g : kSdxlGemms) {
    if (std::string(g.name).rfind("unet_", 0) != 0) continue;
    GemmProblem p = linear_problem(g, DType::kU8);
    GemmRoute r = choose_fp8_route(p, d);
    EXPECT_EQ(r.kernel, GemmKernel::kFp8TmaWgmma) << g.name;
    EXPECT_EQ(r.tile_n, 128) << g.name;
    EXPECT_EQ(r.geglu_fused, g.geglu) << g.name;
    EXPECT_TRUE(r.a.plain && r.b.plain) << g.name;
    EXPECT_EQ(std::string(gemm_kernel_name(r.kernel)), "fp8_tma_wgmma");
    GemmDevice no_tma = d;
    no_tma.gemm_tma = 0;  // HIPQ_GEMM_TMA=0
    r = choose_fp8_route(p, no_tma);
    EXPECT_EQ(r.kernel, GemmKernel::kFp8Wgmma) << g.name;
    EXPECT_EQ(r.geglu_fused, g.geglu) << g.name;
    EXPECT_EQ(std::string(gemm_kernel_name(r.kernel)), "fp8_wgmma");
    ++checked;
  }
  EXPECT_EQ(checked, 17);

  GemmProblem odd = linear_problem(sdxl("unet_l1_qkv_8192x1920x640"), DType::kU8);
  odd.K = 129;  // 16-byte copies need K a multiple of 16
  odd.a_sm = odd.b_sn = 129;
  EXPECT_EQ(choose_fp8_route(odd, d).kernel, GemmKernel::kFp8Simt);
  GemmProblem unaligned = linear_problem(sdxl("unet_l1_qkv_8192x1920x640"), DType::kU8);
  unaligned.a_aligned16 = false;
  EXPECT_EQ(choose_fp8_route(unaligned, d).kernel, GemmKernel::kFp8Simt);
  d.wgmma = false;  // HIPQ_NO_WGMMA
  EXPECT_EQ(choose_fp8_route(linear_problem(sdxl("unet_l1_qkv_8192x1920x640"), DType::kU8), d).kernel,
            GemmKernel::kFp8Simt);
  EXPECT_EQ(std::string(gemm_kernel_name(GemmKernel::kFp8Simt)), "fp8_simt");
}

// Where fp8 is refused, and with what reason.
TEST(GemmRouteTest, Fp8IsRefusedOffHopperWithTheReason) {
  EXPECT_EQ(fp8_refusal(true, true, 9, 0, "NVIDIA H200"), "");
  const std::string a100 = fp8_refusal(true, true, 8, 0, "NVIDIA A100");
  EXPECT_NE(a100.find("compute capability 8.0"), std::string::npos) << a100;
  EXPECT_NE(a100.find("NVIDIA A100"), std::string::npos) << a100;
  const std::string ada = fp8_refusal(true, true, 8, 9, "NVIDIA L4");
  EXPECT_NE(ada.find("8.9"), std::string::npos) << ada;
  const std::string rdna2 = fp8_refusal(false, false, 0, 0, "AMD Radeon RX 6800 XT");
  EXPECT_NE(rdna2.find("AMD"), std::string::npos) << rdna2;
  EXPECT_NE(rdna2.find("use bf16 or fp16"), std::string::npos) << rdna2;
  const std::string no_sm90a = fp8_refusal(true, false, 9, 0, "NVIDIA H100");
  EXPECT_NE(no_sm90a.find("sm_90a"), std::string::npos) << no_sm90a;
}

}  // namespace
}  // namespace hipq::kernels
