// Memory plans and placements: the SDXL plan's parts, the placement chosen
// under a device-memory cap (the cpu backend's accounting stands in for a
// card), and the pipeline in each placement on the tiny synthetic model: the
// same latent bits, the measured peak within the plan, a tiled decode within
// the image gate of the whole one, and a job that fits nowhere refused before
// any work.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <string>

#include "base/byte_size.h"
#include "engine/parity.h"
#include "engine/models/weight_binder.h"
#include "engine/pipeline.h"
#include "engine/synthetic_weights.h"
#include "kernels/backend.h"
#include "tests/kernels/forwarding_backend.h"

namespace hipq::engine {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

ModelShapes sdxl_shapes() {
  ModelShapes s;
  s.family = "sdxl";
  s.unet = UNetConfig::sdxl();
  s.text_encoders = {ClipTextConfig::clip_vit_l14(), ClipTextConfig::open_clip_bigg14()};
  s.vae = VaeConfig::sdxl();
  return s;
}

spec::GenerationSettings sdxl_job(const std::string& precision) {
  spec::GenerationSettings s;
  s.prompt = "a lighthouse at dusk";
  s.width = 1024;
  s.height = 1024;
  s.precision = precision;
  return s;
}

std::unique_ptr<kernels::Backend> cpu() { return kernels::make_backend("cpu").value(); }

TEST(MemoryPlanTest, PlacementNamesRoundTripAndUnknownOnesAreRefusedWithTheKnown) {
  for (const std::string& n : known_placements()) EXPECT_EQ(placement_name(parse_placement(n).value()), n);
  auto bad = parse_placement("tiny");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("auto, standard, low"), std::string::npos) << bad.status().message();
}

TEST(MemoryPlanTest, SdxlFp16PlanCountsItsWeightsAndEachPlacementHoldsLess) {
  auto be = cpu();
  const ModelShapes sh = sdxl_shapes();
  auto standard = plan_memory(sh, sdxl_job("fp16"), Placement::kStandard, *be);
  auto low = plan_memory(sh, sdxl_job("fp16"), Placement::kLow, *be);
  auto tiled = plan_memory(sh, sdxl_job("fp16"), Placement::kLow, *be, low_placement_vae_tile(sh.vae));
  ASSERT_TRUE(standard.ok() && low.ok() && tiled.ok()) << standard.status().ToString();
  // UNet 2.57 G params, text encoders 0.82 G, in fp16; the fp32 VAE decoder
  // 49 M: counted in the cpu pool's size classes (up to a quarter over).
  auto raw = [](const std::vector<ParamSpec>& specs, int64_t bytes_each) {
    int64_t n = 0;
    for (const ParamSpec& p : specs) {
      int64_t e = 1;
      for (int64_t d : p.shape) e *= d;
      n += e * bytes_each;
    }
    return n;
  };
  const int64_t unet_raw = raw(UNet::parameters(sh.unet).value(), 2);
  const int64_t text_raw =
      raw(ClipTextModel::parameters(sh.text_encoders[0]).value(), 2) + raw(ClipTextModel::parameters(sh.text_encoders[1]).value(), 2);
  EXPECT_NEAR(static_cast<double>(unet_raw) / kGiB, 4.78, 0.05);
  EXPECT_NEAR(static_cast<double>(text_raw) / kGiB, 1.52, 0.05);
  for (auto [planned, exact] : {std::pair{standard->unet_weights, unet_raw}, std::pair{standard->text_weights, text_raw}}) {
    EXPECT_GE(planned, exact);
    EXPECT_LE(planned, exact + exact / 4);
  }
  EXPECT_NEAR(static_cast<double>(standard->vae_weights) / kGiB, 0.19, 0.05);
  EXPECT_EQ(standard->weight_forms, 0) << "the cpu backend keeps no conv forms";
  EXPECT_EQ(low_placement_vae_tile(sh.vae), 768);
  EXPECT_EQ(tiled->vae_tile, 768);
  EXPECT_EQ(low->vae_tile, 0);
  // The low placement drops the text encoders from denoise and decode.
  EXPECT_EQ(standard->denoise - low->denoise, standard->text_weights);
  EXPECT_EQ(standard->decode - low->decode, standard->text_weights);
  // ... and holds one text encoder at a time while encoding (bigG, the larger).
  const int64_t te2 = [&] {
    int64_t n = 0;
    const std::vector<ParamSpec> specs = ClipTextModel::parameters(sh.text_encoders[1]).value();
    for (const ParamSpec& p : specs) {
      int64_t e = 2;
      for (int64_t d : p.shape) e *= d;
      n += static_cast<int64_t>(be->block_bytes(static_cast<size_t>(e)));
    }
    return n;
  }();
  EXPECT_EQ(standard->text_encode - low->text_encode, standard->text_weights - te2);
  EXPECT_LT(low->text_encode, standard->text_encode);
  EXPECT_LT(tiled->decode, low->decode);
  EXPECT_LT(tiled->peak(), low->peak());
  EXPECT_LT(low->peak(), standard->peak());
  // The whole decode at 1024 px is the standard plan's peak.
  EXPECT_EQ(standard->peak(), standard->decode);
  for (const MemoryPlan* m : {&*standard, &*low, &*tiled}) std::printf("  SDXL 1024 px fp16: %s\n", m->describe().c_str());
  EXPECT_NE(standard->describe().find("standard placement"), std::string::npos) << standard->describe();
  EXPECT_NE(tiled->describe().find("768 px tiles"), std::string::npos) << tiled->describe();
  // Without guidance the UNet runs one row, not two.
  spec::GenerationSettings one = sdxl_job("fp16");
  one.guidance = 1.0f;
  EXPECT_LT(plan_memory(sh, one, Placement::kStandard, *be)->denoise, standard->denoise);
  // fp32 weights are twice the size.
  auto fp32 = plan_memory(sh, sdxl_job("fp32"), Placement::kStandard, *be);
  EXPECT_NEAR(static_cast<double>(fp32->unet_weights) / standard->unet_weights, 2.0, 0.01);
  EXPECT_FALSE(plan_memory(sh, sdxl_job("fp16"), Placement::kAuto, *be).ok());
  EXPECT_FALSE(plan_memory(sh, sdxl_job("fp16"), Placement::kStandard, *be, 512).ok());
  EXPECT_FALSE(plan_memory(sh, sdxl_job("int8"), Placement::kStandard, *be).ok());
  // fp8 counts its UNet's linear layers (and the 3x3 convs over a multiple
  // of 128 channels it takes by default) at a byte an element plus a scale a
  // row: a little over half bf16's 4.8 GiB; the rest of the job as bf16.
  auto fp8 = plan_memory(sh, sdxl_job("fp8"), Placement::kStandard, *be);
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  auto bf16 = plan_memory(sh, sdxl_job("bf16"), Placement::kStandard, *be);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  std::printf("  SDXL UNet weights: bf16 %s, fp8 %s\n", format_byte_size(bf16->unet_weights).c_str(),
              format_byte_size(fp8->unet_weights).c_str());
  EXPECT_GT(static_cast<double>(fp8->unet_weights) / bf16->unet_weights, 0.5);
  EXPECT_LT(static_cast<double>(fp8->unet_weights) / bf16->unet_weights, 0.6);
  EXPECT_EQ(fp8->text_weights, bf16->text_weights);
  EXPECT_EQ(fp8->vae_weights, bf16->vae_weights);
}

// An fp8 job's UNet planned as UNet::load holds it, whichever convs
// ModelShapes::fp8_convs picks: the plan's weights are the blocks the loader keeps
// (the cpu pool's in-use bytes after the load), byte for byte, as are bf16's
// and fp16's (stacked q | k | v one block each).
TEST(MemoryPlanTest, UNetWeightsArePlannedAsTheLoaderKeepsThemInEveryPrecision) {
  SyntheticArchitecture arch = synthetic_architecture("tiny-sdxl").value();
  ModelShapes sh = sdxl_shapes();
  sh.unet = arch.unet;
  sh.unet.block_out_channels = {128, 256};  // 3x3 convs over 128 and 256 channels, and 1x1 / up convs
  auto specs = UNet::parameters(sh.unet);
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  SyntheticWeightSource weights("synthetic unet", "unet", 7, *specs);
  struct Case {
    const char* precision;
    const char* convs;  // ModelShapes::fp8_convs, or nullptr (the default)
  };
  std::map<std::string, int64_t> planned;
  for (const Case& c : {Case{"bf16", nullptr}, Case{"fp16", nullptr}, Case{"fp8", nullptr}, Case{"fp8", "off"},
                        Case{"fp8", "aligned"}, Case{"fp8", "all"}}) {
    const std::string name = std::string(c.precision) + (c.convs ? std::string(" convs ") + c.convs : "");
    SCOPED_TRACE(name);
    ModelShapes shapes = sh;
    if (c.convs != nullptr) {
      const std::string convs = c.convs;
      shapes.fp8_convs = convs == "off" ? Fp8Convs::kOff : convs == "all" ? Fp8Convs::kAll : Fp8Convs::kAligned;
    }
    auto be = cpu();
    spec::GenerationSettings job = sdxl_job(c.precision);
    job.width = job.height = 64;
    auto plan = plan_memory(shapes, job, Placement::kStandard, *be);
    const int64_t before = be->memory_stats().in_use;
    auto unet = UNet::load(shapes.unet, weights, *be, precision_dtype(c.precision).value(),
                           fp8_weights(c.precision, shapes.fp8_convs));
    const int64_t after = be->memory_stats().in_use;
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    ASSERT_TRUE(unet.ok()) << unet.status().ToString();
    EXPECT_EQ(plan->unet_weights, after - before);
    planned[name] = plan->unet_weights;
  }
  EXPECT_EQ(planned["bf16"], planned["fp16"]);
  EXPECT_EQ(planned["fp8"], planned["fp8 convs aligned"]);
  EXPECT_LT(planned["fp8 convs off"], planned["bf16"]);
  EXPECT_LT(planned["fp8 convs aligned"], planned["fp8 convs off"]);
  EXPECT_LT(planned["fp8 convs all"], planned["fp8 convs aligned"]);
}

// The decode's widest moment at 1024 px, fp32: the first resnet of the last
// up block, 256 + 2 * 128 channels of 4 MiB (2 GiB), where it was
// 2 * 256 + 128 before its input was normalised in place, plus the 3-channel
// output and the conv's staging copies.
TEST(MemoryPlanTest, SdxlDecodeHoldsOneWideActivationLess) {
  auto be = cpu();
  const ModelShapes sh = sdxl_shapes();
  const MemoryPlan p = plan_memory(sh, sdxl_job("fp16"), Placement::kStandard, *be).value();
  const int64_t channel = int64_t{1024} * 1024 * 4;
  const int64_t rest = p.decode - p.unet_weights - p.vae_weights - p.text_weights;  // activations, fixed buffers
  const MemoryPlan low = plan_memory(sh, sdxl_job("fp16"), Placement::kLow, *be).value();
  EXPECT_EQ(low.decode - low.unet_weights - low.vae_weights, rest);
  EXPECT_GE(rest, (256 + 2 * 128 + 3) * channel);
  EXPECT_LT(rest, (2 * 256 + 128) * channel);
  std::printf("  SDXL fp16 1024 px plans: standard %s; low %s\n", p.describe().c_str(), low.describe().c_str());
}

// img2img: the VAE encoder's weights and activations at the job's size in
// an image_encode phase; the standard placement keeps the encoder, the low
// one releases it before the denoise.
TEST(MemoryPlanTest, Img2imgCountsTheVaeEncoder) {
  auto be = cpu();
  const ModelShapes sh = sdxl_shapes();
  spec::GenerationSettings txt = sdxl_job("fp16"), img = txt;
  img.init_image = "init.png";
  for (Placement pl : {Placement::kStandard, Placement::kLow}) {
    SCOPED_TRACE(std::string(placement_name(pl)));
    const MemoryPlan t = plan_memory(sh, txt, pl, *be).value();
    const MemoryPlan i = plan_memory(sh, img, pl, *be).value();
    EXPECT_EQ(t.vae_encoder_weights, 0);
    EXPECT_EQ(t.image_encode, 0);
    // SDXL encodes in fp32 (force_upcast): 34.2 M parameters, in the pool's size classes.
    const double exact = 34.16e6 * 4;
    EXPECT_GE(static_cast<double>(i.vae_encoder_weights), exact);
    EXPECT_LE(static_cast<double>(i.vae_encoder_weights), exact * 1.25);
    const int64_t held = pl == Placement::kStandard ? i.vae_encoder_weights : 0;
    EXPECT_EQ(i.denoise - t.denoise, held);
    EXPECT_EQ(i.decode - t.decode, held);
    // The encoder's widest moment: 3 * 128 channels of 4 MiB at 1024 px.
    const int64_t channel = int64_t{1024} * 1024 * 4;
    EXPECT_GE(i.image_encode - (i.unet_weights + i.vae_weights + i.vae_encoder_weights +
                                (pl == Placement::kStandard ? i.text_weights : 0)),
              3 * 128 * channel);
    EXPECT_NE(i.describe().find("image encode"), std::string::npos) << i.describe();
    EXPECT_EQ(t.describe().find("image encode"), std::string::npos) << t.describe();
    EXPECT_GE(i.peak(), i.image_encode);
  }
  // A twice-as-large image: the encoder's activations grow with it.
  spec::GenerationSettings big = img;
  big.width = 2048;
  EXPECT_GT(plan_memory(sh, big, Placement::kLow, *be)->image_encode - plan_memory(sh, img, Placement::kLow, *be)->image_encode,
            3 * 128 * int64_t{1024} * 1024 * 4);
}

TEST(MemoryPlanTest, AutoPicksTheFirstPlacementThatFitsTheCap) {
  auto be = cpu();
  const ModelShapes sh = sdxl_shapes();
  const spec::GenerationSettings job = sdxl_job("fp16");
  const MemoryPlan standard = plan_memory(sh, job, Placement::kStandard, *be).value();
  const MemoryPlan low = plan_memory(sh, job, Placement::kLow, *be).value();
  const MemoryPlan low_bf16 = plan_memory(sh, job, Placement::kLow, *be, 0, nullptr, kernels::DType::kBF16).value();
  const MemoryPlan tiled = plan_memory(sh, job, Placement::kLow, *be, 768).value();

  // No cap on a host backend: every plan fits, auto is standard.
  EXPECT_EQ(choose_placement(sh, job, Placement::kAuto, *be)->placement, Placement::kStandard);
  ASSERT_TRUE(be->set_memory_limit(standard.peak()).ok());
  EXPECT_EQ(choose_placement(sh, job, Placement::kAuto, *be)->placement, Placement::kStandard);
  ASSERT_TRUE(be->set_memory_limit(standard.peak() - 1).ok());
  auto picked = choose_placement(sh, job, Placement::kAuto, *be);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->placement, Placement::kLow);
  EXPECT_EQ(picked->vae_tile, 0);
  EXPECT_EQ(picked->vae_dtype, kernels::DType::kF32);
  ASSERT_TRUE(be->set_memory_limit(low.peak() - 1).ok());
  picked = choose_placement(sh, job, Placement::kAuto, *be);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->vae_tile, 0);
  EXPECT_EQ(picked->vae_dtype, kernels::DType::kBF16);
  ASSERT_TRUE(be->set_memory_limit(low_bf16.peak() - 1).ok());
  picked = choose_placement(sh, job, Placement::kAuto, *be);
  ASSERT_TRUE(picked.ok());
  EXPECT_EQ(picked->vae_tile, 768);
  // 8 GiB, the card this placement is for: fits in low.
  ASSERT_TRUE(be->set_memory_limit(8 * kGiB).ok());
  picked = choose_placement(sh, job, Placement::kAuto, *be);
  ASSERT_TRUE(picked.ok()) << picked.status().ToString();
  EXPECT_EQ(picked->placement, Placement::kLow);
  EXPECT_LE(picked->peak(), 8 * kGiB);
  // ... decoding the image whole: a resnet holds its input normalised in
  // place, the upsampler's conv reads the half-size input (docs/memory.md).
  EXPECT_EQ(picked->vae_tile, 0) << picked->describe();

  // Asked for standard on a card too small for it: a configuration error
  // that says what it needs, where, and the way out.
  auto refused = choose_placement(sh, job, Placement::kStandard, *be);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("configuration"), std::string::npos) << m;
  EXPECT_NE(m.find("1024x1024 fp16 job needs"), std::string::npos) << m;
  EXPECT_NE(m.find("8 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("placement 'low'"), std::string::npos) << m;

  // Nothing fits: the last low tiled plan (the smaller tiles) is the need named.
  EXPECT_EQ(low_placement_vae_tiles(sh.vae), (std::vector<int64_t>{768, 512}));
  const MemoryPlan tiled512 = plan_memory(sh, job, Placement::kLow, *be, 512).value();
  EXPECT_LE(tiled512.decode, tiled.decode);
  ASSERT_TRUE(be->set_memory_limit(std::min(tiled.peak(), tiled512.peak()) - 1).ok());
  refused = choose_placement(sh, job, Placement::kAuto, *be);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("512 px tiles"), std::string::npos) << refused.status().message();
  EXPECT_NE(refused.status().message().find("--device-memory-limit"), std::string::npos);
}

// The low placement's decode, in order: whole in the job's VAE dtype (fp32
// for SDXL's fp16 jobs), else whole in bf16 (not for fp32 jobs), else tiles
// in the job's VAE dtype.
TEST(MemoryPlanTest, TheLowPlacementDecodesWholeInBf16BeforeItTiles) {
  auto be = cpu();
  const ModelShapes sh = sdxl_shapes();
  const spec::GenerationSettings job = sdxl_job("fp16");
  const MemoryPlan low = plan_memory(sh, job, Placement::kLow, *be).value();
  auto bf16 = plan_memory(sh, job, Placement::kLow, *be, 0, nullptr, kernels::DType::kBF16);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  const MemoryPlan tiled = plan_memory(sh, job, Placement::kLow, *be, 768).value();
  EXPECT_EQ(low.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(bf16->vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(tiled.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(bf16->vae_tile, 0);
  // The bf16 decoder's weights are half the fp32 one's (49.5 M parameters,
  // in the pool's size classes); everything but the VAE is the same.
  EXPECT_NEAR(static_cast<double>(bf16->vae_weights) / low.vae_weights, 0.5, 0.05);
  EXPECT_EQ(bf16->unet_weights, low.unet_weights);
  EXPECT_EQ(bf16->denoise - bf16->vae_weights, low.denoise - low.vae_weights);
  EXPECT_LT(bf16->decode, low.decode);
  EXPECT_NE(bf16->describe().find("low placement, VAE whole in bf16"), std::string::npos) << bf16->describe();
  EXPECT_NE(low.describe().find("VAE whole in f32"), std::string::npos) << low.describe();
  std::printf("  SDXL 1024 px fp16: %s\n", bf16->describe().c_str());
  ASSERT_LT(bf16->peak(), low.peak());
  ASSERT_LT(tiled.peak(), bf16->peak());

  // Fits whole in f32: f32.
  ASSERT_TRUE(be->set_memory_limit(low.peak()).ok());
  MemoryPlan p = choose_placement(sh, job, Placement::kLow, *be).value();
  EXPECT_EQ(p.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(p.vae_tile, 0);
  // Not in f32 but in bf16: whole in bf16, for kLow and for kAuto alike.
  for (Placement requested : {Placement::kLow, Placement::kAuto}) {
    ASSERT_TRUE(be->set_memory_limit(low.peak() - 1).ok());
    p = choose_placement(sh, job, requested, *be).value();
    EXPECT_EQ(p.placement, Placement::kLow);
    EXPECT_EQ(p.vae_dtype, kernels::DType::kBF16);
    EXPECT_EQ(p.vae_tile, 0);
    ASSERT_TRUE(be->set_memory_limit(bf16->peak()).ok());
    EXPECT_EQ(choose_placement(sh, job, requested, *be)->vae_dtype, kernels::DType::kBF16);
    // Neither: tiles, in the job's VAE dtype.
    ASSERT_TRUE(be->set_memory_limit(bf16->peak() - 1).ok());
    p = choose_placement(sh, job, requested, *be).value();
    EXPECT_EQ(p.vae_tile, 768);
    EXPECT_EQ(p.vae_dtype, kernels::DType::kF32);
  }
  // fp8 jobs (bf16 UNet) lower it alike.
  ASSERT_TRUE(be->set_memory_limit(plan_memory(sh, sdxl_job("fp8"), Placement::kLow, *be)->peak() - 1).ok());
  EXPECT_EQ(choose_placement(sh, sdxl_job("fp8"), Placement::kLow, *be)->vae_dtype, kernels::DType::kBF16);
  EXPECT_FALSE(low_placement_vae_dtype("fp16", kernels::DType::kBF16, "").has_value());
  EXPECT_EQ(low_placement_vae_dtype("bf16", kernels::DType::kF32, ""), kernels::DType::kBF16);

  // The standard placement never lowers it: refused, not decoded in bf16.
  ASSERT_TRUE(be->set_memory_limit(low.peak() - 1).ok());
  EXPECT_FALSE(choose_placement(sh, job, Placement::kStandard, *be).ok());
  EXPECT_FALSE(plan_memory(sh, job, Placement::kStandard, *be, 0, nullptr, kernels::DType::kBF16).ok());
  EXPECT_FALSE(plan_memory(sh, job, Placement::kLow, *be, 0, nullptr, kernels::DType::kF16).ok());

  // An fp32 job keeps its fp32 pixels: whole in fp32, else tiles in fp32
  // (at 1536 px, where the decode is its plan's peak).
  spec::GenerationSettings fp32 = sdxl_job("fp32");
  fp32.width = fp32.height = 1536;
  EXPECT_FALSE(low_placement_vae_dtype("fp32", kernels::DType::kF32, "").has_value());
  auto refused = plan_memory(sh, fp32, Placement::kLow, *be, 0, nullptr, kernels::DType::kBF16);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fp32 job's VAE decodes in f32"), std::string::npos)
      << refused.status().message();
  const MemoryPlan low32 = plan_memory(sh, fp32, Placement::kLow, *be).value();
  ASSERT_TRUE(be->set_memory_limit(low32.peak() - 1).ok());
  auto p32 = choose_placement(sh, fp32, Placement::kLow, *be);
  ASSERT_TRUE(p32.ok()) << p32.status().ToString();
  EXPECT_EQ(p32->vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(p32->vae_tile, 768);
  // The same at fp16 takes the bf16 whole decode.
  spec::GenerationSettings fp16 = fp32;
  fp16.precision = "fp16";
  ASSERT_TRUE(be->set_memory_limit(plan_memory(sh, fp16, Placement::kLow, *be)->peak() - 1).ok());
  p32 = choose_placement(sh, fp16, Placement::kLow, *be);
  ASSERT_TRUE(p32.ok()) << p32.status().ToString();
  EXPECT_EQ(p32->vae_dtype, kernels::DType::kBF16);
}

// vae_precision: the decode's dtype a job asks for. "" is the precision's rule
// (every plan as before), "bf16" decodes whole in bf16 in either placement,
// "fp32" in fp32 whatever the precision, and a low placement lowers neither:
// a job that asks for fp32 gets tiles, never a silent bf16.
TEST(MemoryPlanTest, VaePrecisionSetsTheDecodersDtypeAndOnlyTheDefaultIsLowered) {
  auto be = cpu();
  const ModelShapes sh = sdxl_shapes();
  const spec::GenerationSettings job = sdxl_job("fp16");
  spec::GenerationSettings bf16_job = job;
  bf16_job.vae_precision = "bf16";
  spec::GenerationSettings fp32_job = job;
  fp32_job.vae_precision = "fp32";
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, job).value(), kernels::DType::kF32);
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, bf16_job).value(), kernels::DType::kBF16);
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, fp32_job).value(), kernels::DType::kF32);
  spec::GenerationSettings fp8_fp32 = sdxl_job("fp8");
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, fp8_fp32).value(), kernels::DType::kBF16);
  fp8_fp32.vae_precision = "fp32";
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, fp8_fp32).value(), kernels::DType::kF32);
  spec::GenerationSettings fp32_bf16 = sdxl_job("fp32");
  fp32_bf16.vae_precision = "bf16";
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, fp32_bf16).value(), kernels::DType::kBF16);
  spec::GenerationSettings unknown = job;
  unknown.vae_precision = "fp16";
  EXPECT_EQ(job_vae_dtype(sh.family, sh.vae, unknown).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_memory(sh, unknown, Placement::kStandard, *be).status().code(), StatusCode::kInvalidArgument);

  // The standard placement: the plan counts the decoder at the asked dtype.
  const MemoryPlan standard = plan_memory(sh, job, Placement::kStandard, *be).value();
  const MemoryPlan standard_bf16 = plan_memory(sh, bf16_job, Placement::kStandard, *be).value();
  EXPECT_EQ(plan_memory(sh, fp32_job, Placement::kStandard, *be)->peak(), standard.peak());
  EXPECT_EQ(standard.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(standard_bf16.vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(standard_bf16.vae_tile, 0);
  EXPECT_NEAR(static_cast<double>(standard_bf16.vae_weights) / standard.vae_weights, 0.5, 0.05);
  EXPECT_LT(standard_bf16.decode, standard.decode);
  EXPECT_EQ(standard_bf16.unet_weights, standard.unet_weights);
  // No cap: standard, whole, at the asked dtype.
  EXPECT_EQ(choose_placement(sh, bf16_job, Placement::kAuto, *be)->vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(choose_placement(sh, fp32_job, Placement::kAuto, *be)->vae_dtype, kernels::DType::kF32);
  // A low plan in another dtype than the asked one is not a plan.
  EXPECT_FALSE(plan_memory(sh, fp32_job, Placement::kLow, *be, 0, nullptr, kernels::DType::kBF16).ok());
  EXPECT_FALSE(low_placement_vae_dtype("fp16", kernels::DType::kF32, "fp32").has_value());
  EXPECT_FALSE(low_placement_vae_dtype("fp16", kernels::DType::kF32, "bf16").has_value());

  // Under a cap where the default job decodes whole in bf16 (its low f32
  // whole decode does not fit), the job asking for fp32 decodes in f32 tiles.
  const MemoryPlan low = plan_memory(sh, job, Placement::kLow, *be).value();
  ASSERT_TRUE(be->set_memory_limit(low.peak() - 1).ok());
  auto lowered = choose_placement(sh, job, Placement::kAuto, *be);
  ASSERT_TRUE(lowered.ok()) << lowered.status().ToString();
  EXPECT_EQ(lowered->vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(lowered->vae_tile, 0);
  auto explicit32 = choose_placement(sh, fp32_job, Placement::kAuto, *be);
  ASSERT_TRUE(explicit32.ok()) << explicit32.status().ToString();
  EXPECT_EQ(explicit32->placement, Placement::kLow);
  EXPECT_EQ(explicit32->vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(explicit32->vae_tile, 768) << explicit32->describe();
  // ... and the job asking for bf16 decodes whole in bf16 there, as the default does.
  auto asked_bf16 = choose_placement(sh, bf16_job, Placement::kAuto, *be);
  ASSERT_TRUE(asked_bf16.ok()) << asked_bf16.status().ToString();
  EXPECT_EQ(asked_bf16->vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(asked_bf16->vae_tile, 0);
  EXPECT_EQ(asked_bf16->peak(), lowered->peak());
  // Where nothing fits, the explicit fp32 job is told of the bf16 decode.
  const int64_t tiles_peak = std::min(plan_memory(sh, fp32_job, Placement::kLow, *be, 768)->peak(),
                                      plan_memory(sh, fp32_job, Placement::kLow, *be, 512)->peak());
  ASSERT_TRUE(be->set_memory_limit(tiles_peak - 1).ok());
  auto refused = choose_placement(sh, fp32_job, Placement::kAuto, *be);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("vae_precision bf16"), std::string::npos) << refused.status().message();
}

// A test double for plans only: a device as the hip backend describes it to
// plan_memory and choose_placement: its pool's size classes (sixteenth steps
// above 1 MiB: size_class in kernels/hip/hip_backend.hip), its BackendInfo
// switches (Hopper: conv weight forms kept, the fp32 and 16-bit convs
// reading the half-size input of an upsampling conv), and a device of `total` bytes of which the runtime holds
// `runtime`, under `cap` (0: none). It runs nothing.
class HipPlanDevice final : public kernels::Backend {
 public:
  HipPlanDevice(int64_t total, int64_t runtime) : total_(total), runtime_(runtime) {
    info_.name = "hip";
    info_.device_name = "plan-only hip device";
    info_.keeps_conv_weight_forms = true;
    info_.fp32_conv_reads_upsampled = true;
    info_.f16_conv_reads_upsampled = true;
  }
  const kernels::BackendInfo& info() const override { return info_; }
  size_t block_bytes(size_t bytes) const override {
    if (bytes == 0) bytes = 1;
    if (bytes <= (size_t{1} << 20)) return (bytes + 255) & ~size_t{255};
    size_t p = size_t{1} << 20;
    while (p < bytes) p <<= 1;
    const size_t step = p / 16;
    return (bytes + step - 1) / step * step;
  }
  kernels::MemoryStats memory_stats() const override {
    kernels::MemoryStats m;
    m.limit = cap_;
    m.device_total = total_;
    m.device_free = total_ - runtime_;
    return m;
  }
  Status set_memory_limit(int64_t bytes) override {
    cap_ = bytes;
    return Status::Ok();
  }
  Result<kernels::Buffer> allocate(size_t) override { return none(); }
  void release(void*, size_t) override {}
  Status copy_to_device(const void*, void*, size_t) override { return none(); }
  Status copy_to_host(const void*, void*, size_t) override { return none(); }
  Status copy_device(const void*, void*, size_t) override { return none(); }
  Status memset_zero(void*, size_t) override { return none(); }
  Status synchronize() override { return Status::Ok(); }
  Result<int> record_event() override { return none(); }
  Result<double> elapsed_ms(int, int) override { return none(); }
  int64_t bytes_in_use() const override { return 0; }
  int64_t peak_bytes() const override { return 0; }
  void reset_peak() override {}
  Status trim_cache() override { return Status::Ok(); }
  Status matmul(const kernels::Tensor&, const kernels::Tensor&, kernels::Tensor&, const kernels::MatmulOptions&) override {
    return none();
  }
  Status quantize_fp8_rows(const kernels::Tensor&, kernels::Tensor&, kernels::Tensor&) override { return none(); }
  Status layer_norm_fp8(const kernels::Tensor&, const kernels::Tensor*, const kernels::Tensor*, float, kernels::Tensor&,
                        kernels::Tensor&) override {
    return none();
  }
  Status matmul_fp8(const kernels::Fp8Rows&, const kernels::Fp8Rows&, kernels::Tensor&,
                    const kernels::MatmulOptions&) override {
    return none();
  }
  Status lora_merge(const kernels::Tensor&, std::span<const kernels::LoraFactors>, kernels::Tensor&) override {
    return none();
  }
  Status conv2d(const kernels::Tensor&, const kernels::Tensor&, kernels::Tensor&, const kernels::Conv2dOptions&) override {
    return none();
  }
  Status conv2d_fp8(const kernels::Tensor&, const kernels::Fp8ConvWeight&, kernels::Tensor&,
                    const kernels::Conv2dOptions&) override {
    return none();
  }
  Status group_norm(const kernels::Tensor&, const kernels::Tensor&, const kernels::Tensor&, kernels::Tensor&,
                    const kernels::GroupNormOptions&) override {
    return none();
  }
  Status layer_norm(const kernels::Tensor&, const kernels::Tensor*, const kernels::Tensor*, kernels::Tensor&,
                    float) override {
    return none();
  }
  Status softmax(const kernels::Tensor&, kernels::Tensor&, float, bool) override { return none(); }
  Status attention(const kernels::Tensor&, const kernels::Tensor&, const kernels::Tensor&, kernels::Tensor&,
                   const kernels::AttentionOptions&) override {
    return none();
  }
  Status unary(kernels::UnaryOp, const kernels::Tensor&, kernels::Tensor&) override { return none(); }
  Status geglu(const kernels::Tensor&, kernels::Tensor&) override { return none(); }
  Status binary(kernels::BinaryOp, const kernels::Tensor&, const kernels::Tensor&, kernels::Tensor&) override {
    return none();
  }
  Status scale(const kernels::Tensor&, kernels::Tensor&, float, float) override { return none(); }
  Status concat(std::span<const kernels::Tensor>, int, kernels::Tensor&) override { return none(); }
  Status upsample_nearest2x(const kernels::Tensor&, kernels::Tensor&) override { return none(); }
  Status timestep_embedding(const kernels::Tensor&, kernels::Tensor&, const kernels::TimestepEmbeddingOptions&) override {
    return none();
  }
  Status embedding(const kernels::Tensor&, const kernels::Tensor&, kernels::Tensor&) override { return none(); }
  Status copy(const kernels::Tensor&, kernels::Tensor&) override { return none(); }
  Status fill(kernels::Tensor&, float) override { return none(); }
  Result<kernels::ParitySums> parity_sums(const kernels::Tensor&, const kernels::Tensor&) override { return none(); }

 private:
  static Status none() { return Status::Unimplemented("HipPlanDevice only answers memory plans"); }
  kernels::BackendInfo info_;
  int64_t total_, runtime_, cap_ = 0;
};

// What the SDXL 1024 px fp16 job's plan needs, phase by phase, as the hip
// backend counts it: on an H200 under an 8 and a 7 GiB cap of the whole
// process, the runtime holding what the H200 showed (0.90-1.13 GiB), and on
// an 8 GiB card (runtime unknown: the reserve of usable_device_memory).
// The bf16 whole decode needs 7.06 GiB: more than such a cap leaves (6.62-
// 6.85 GiB), so the H200 under 8 GiB still tiles; an 8 GiB card takes it.
TEST(MemoryPlanTest, SdxlFp16PlansAsTheHipPoolCountsThemUnderAnEightAndASevenGibCap) {
  const ModelShapes sh = sdxl_shapes();
  const spec::GenerationSettings job = sdxl_job("fp16");
  {
    HipPlanDevice plain(141 * kGiB, 0);
    for (auto [tile, dtype] : {std::pair<int64_t, std::optional<kernels::DType>>{0, std::nullopt},
                               {0, kernels::DType::kBF16}, {768, std::nullopt}, {512, std::nullopt}}) {
      auto p = plan_memory(sh, job, Placement::kLow, plain, tile, nullptr, dtype);
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      std::printf("  hip pool: %s\n", p->describe().c_str());
    }
  }
  struct Device {
    int64_t total, runtime, cap;
  };
  for (const Device& d : {Device{141 * kGiB, int64_t{922} << 20, 8 * kGiB}, Device{141 * kGiB, int64_t{1157} << 20, 8 * kGiB},
                          Device{141 * kGiB, int64_t{922} << 20, 7 * kGiB}, Device{141 * kGiB, int64_t{1157} << 20, 7 * kGiB},
                          Device{8 * kGiB, 0, 0}}) {
    HipPlanDevice dev(d.total, d.runtime);
    ASSERT_TRUE(dev.set_memory_limit(d.cap).ok());
    auto p = choose_placement(sh, job, Placement::kAuto, dev);
    const int64_t usable = usable_device_memory(dev.memory_stats());
    std::printf("  %s %s, runtime %s, usable %s: %s\n", d.cap > 0 ? "cap" : "card",
                format_byte_size(d.cap > 0 ? d.cap : d.total).c_str(), format_byte_size(d.runtime).c_str(),
                format_byte_size(usable).c_str(), p.ok() ? p->describe().c_str() : p.status().message().c_str());
    // Under an 8 GiB cap beside the runtime's 0.90 GiB the whole decode fits
    // in bf16, beside 1.13 GiB (a fresh worker's first plan) the 768 px
    // tiles; the 8 GiB card (a reserve of 512 MiB) decodes whole in fp32,
    // the standard placement's pixels. Neither the text encode nor the
    // decode holds the step's buffers (the plan's moments of those phases).
    if (d.cap == 7 * kGiB) {
      EXPECT_FALSE(p.ok());
      continue;
    }
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->placement, Placement::kLow);
    const bool tiles = d.runtime > kGiB;
    EXPECT_EQ(p->vae_dtype, d.cap > 0 && !tiles ? kernels::DType::kBF16 : kernels::DType::kF32) << p->describe();
    EXPECT_EQ(p->vae_tile, tiles ? 768 : 0) << p->describe();
  }
}

// A cap is the whole process's device memory: what the runtime holds outside
// the pool (device total - free - the pool) and its growth come off it.
TEST(MemoryPlanTest, ACapLeavesTheRuntimesMemoryOut) {
  kernels::MemoryStats m;
  m.limit = 8 * kGiB;
  EXPECT_EQ(usable_device_memory(m), 8 * kGiB);  // nothing known of the runtime (cpu)
  m.device_total = 141 * kGiB;
  m.in_use = 2 * kGiB;
  m.cached = kGiB / 2;
  const int64_t runtime = 700LL << 20;
  m.device_free = m.device_total - m.in_use - m.cached - runtime;
  EXPECT_EQ(runtime_device_memory(m), runtime);
  EXPECT_EQ(usable_device_memory(m), 8 * kGiB - runtime - kRuntimeGrowthBytes);
  // Without a cap: the card less the runtime and the reserve.
  m.limit = 0;
  EXPECT_EQ(usable_device_memory(m), 141 * kGiB - runtime - 141 * kGiB / 32);
  // A cap smaller than the runtime leaves nothing, never a negative size.
  m.limit = runtime / 2;
  EXPECT_EQ(usable_device_memory(m), 0);
}

// Every phase the job measured within its plan's moment of that phase
// (timings.json phase_peak_bytes against memory_plan), not only the job's peak.
void expect_phases_within_plan(const GenerationOutput& out) {
  ASSERT_FALSE(out.phase_peaks.empty());
  for (const PhasePeak& p : out.phase_peaks)
    EXPECT_LE(p.bytes, out.memory_plan.phase_bytes(p.phase))
        << p.phase << " ran past its plan (" << out.memory_plan.describe() << ")";
}

// One step of the tiny synthetic SDXL at width x height.
spec::GenerationSettings tiny_job(int width, int height) {
  spec::GenerationSettings s;
  s.prompt = "a red fox sleeping in the snow";
  s.seed = 7;
  s.width = width;
  s.height = height;
  s.steps = 1;
  return s;
}

// The tiny synthetic SDXL on the cpu backend, capped so that each placement
// in turn is the one that fits.
class PlacementPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    be_ = cpu();
    auto p = Pipeline::load("synthetic:tiny-sdxl", *be_);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    pipeline_ = std::move(p).value();
  }
  // Large enough for the decode to be the plan's peak and to be tiled.
  static spec::GenerationSettings job() { return tiny_job(384, 320); }
  MemoryPlan plan(Placement p, int64_t tile = 0) {
    return plan_memory(pipeline_->model_shapes(), job(), p, *be_, tile).value();
  }
  std::unique_ptr<kernels::Backend> be_;
  std::unique_ptr<Pipeline> pipeline_;
};

TEST_F(PlacementPipelineTest, EachPlacementGivesTheSameLatentWithinItsPlan) {
  auto standard = pipeline_->generate(job());
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  EXPECT_EQ(standard->memory_plan.placement, Placement::kStandard);
  EXPECT_LE(standard->peak_memory_bytes, standard->memory_plan.peak());
  expect_phases_within_plan(*standard);

  // Capped between the low and the standard plan: low, whole decode, the
  // same latent and image bits; and again (the text encoders come back).
  const MemoryPlan low = plan(Placement::kLow);
  ASSERT_LT(low.peak(), plan(Placement::kStandard).peak());
  ASSERT_TRUE(be_->set_memory_limit(low.peak()).ok());
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE(run);
    auto out = pipeline_->generate(job());
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->memory_plan.placement, Placement::kLow);
    EXPECT_EQ(out->memory_plan.vae_tile, 0);
    EXPECT_EQ(out->latent, standard->latent);
    EXPECT_EQ(out->rgb, standard->rgb);
    EXPECT_LE(out->peak_memory_bytes, low.peak());
    expect_phases_within_plan(*out);
    const kernels::MemoryStats m = be_->memory_stats();
    EXPECT_LE(m.in_use + m.cached, low.peak());
  }

  // Capped below that: the decode in tiles (a quarter overlap, blended as
  // diffusers' tiled decode blends); the latent is the same bits. The tiles
  // run in lockstep with the whole image's group-norm statistics, so the
  // image is within the fp32 image gate of the whole decode (40 dB), not
  // equal to it (docs/memory.md gives the measured PSNR).
  const int64_t tile = low_placement_vae_tile(pipeline_->model_shapes().vae);
  const MemoryPlan tiled = plan(Placement::kLow, tile);
  ASSERT_LT(tiled.peak(), low.peak());
  ASSERT_TRUE(be_->set_memory_limit(tiled.peak()).ok());
  auto out = pipeline_->generate(job());
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.vae_tile, tile);
  EXPECT_EQ(out->latent, standard->latent);
  ASSERT_EQ(out->rgb.size(), standard->rgb.size());
  EXPECT_NE(out->rgb, standard->rgb) << "a tiled decode that equals the whole one tiled nothing";
  const double psnr = image_psnr(out->rgb.data(), standard->rgb.data(), out->rgb.size());
  std::printf("  tiled decode (%lld px tiles) against the whole decode: PSNR %.2f dB\n",
              static_cast<long long>(tile), psnr);
  EXPECT_GE(psnr, 40.0);
  EXPECT_LE(out->peak_memory_bytes, tiled.peak());
  expect_phases_within_plan(*out);

  // Below every plan: refused before any work, as a configuration error.
  ASSERT_TRUE(be_->set_memory_limit(tiled.peak() - tiled.decode + tiled.weights()).ok());
  const int64_t before = be_->bytes_in_use();
  auto refused = pipeline_->generate(job());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  EXPECT_EQ(be_->bytes_in_use(), before);
}

// The device has less than the plan counted when the decode starts (the plan
// under the device's real need, or memory taken since): the finished latent
// is decoded again in tiles instead of the job failing after its denoise; the
// output says so (decode_fallback, timings.json). With too little even for
// the smallest tile the job fails, saying what ran out and what to do.
TEST_F(PlacementPipelineTest, ADecodeThatRunsOutOfMemoryDecodesTheFinishedLatentInTiles) {
  auto standard = pipeline_->generate(job());
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  const MemoryPlan low = plan(Placement::kLow);
  const int64_t tile = low_placement_vae_tile(pipeline_->model_shapes().vae);
  const MemoryPlan tiled = plan(Placement::kLow, tile);
  ASSERT_LT(tiled.peak(), low.peak());
  struct Uncap {
    kernels::Backend* be;
    ~Uncap() { (void)be->set_memory_limit(0); }
  } uncap{be_.get()};

  // Planned whole (the cap at the whole decode's plan), then the cap lowered
  // to the tiled plan's during the last step.
  ASSERT_TRUE(be_->set_memory_limit(low.peak()).ok());
  auto lower_at_last_step = [&](int64_t cap) {
    return [this, cap](int step, int steps) {
      if (step == steps) {
        ASSERT_TRUE(be_->set_memory_limit(cap).ok());
      }
    };
  };
  auto out = pipeline_->generate(job(), lower_at_last_step(tiled.peak()));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.vae_tile, 0) << "planned whole";
  ASSERT_TRUE(out->decode_fallback.has_value());
  EXPECT_EQ(out->decode_fallback->vae_tile, tile);
  EXPECT_NE(out->decode_fallback->reason.find("allocat"), std::string::npos) << out->decode_fallback->reason;
  EXPECT_EQ(out->latent, standard->latent);
  ASSERT_EQ(out->rgb.size(), standard->rgb.size());
  EXPECT_GE(image_psnr(out->rgb.data(), standard->rgb.data(), out->rgb.size()), 40.0);
  const nlohmann::json t = timings_json(*out, job(), OutputInfo{});
  EXPECT_EQ(t["decode_fallback"]["vae_tile"], tile) << t.dump();

  // The next job plans against the cap it finds: tiles from the start, no fallback.
  auto next = pipeline_->generate(job());
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->memory_plan.vae_tile, tile);
  EXPECT_FALSE(next->decode_fallback.has_value());
  EXPECT_EQ(next->rgb, out->rgb);

  // Too little for any tile: the job fails with what ran out and the way out.
  ASSERT_TRUE(be_->set_memory_limit(low.peak()).ok());
  auto failed = pipeline_->generate(job(), lower_at_last_step(tiled.weights() / 2));
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kResourceExhausted) << failed.status().ToString();
  EXPECT_NE(failed.status().message().find("ran out of device memory too"), std::string::npos)
      << failed.status().ToString();
}

// An fp16 job capped below its low plan's fp32 whole decode but not the
// bf16 one: the latent is the same bits as the standard run's, the image
// (decoded whole in bf16) within the fp16 image gate of the fp32 decode and
// not equal to it, and the plan and timings say bf16. The worker's one
// pipeline then runs a standard job again: its decoder back in fp32, the
// standard image's bits.
TEST_F(PlacementPipelineTest, ALowPlacementDecodesWholeInBf16WhenFp32DoesNotFitAndTheNextJobInItsOwnDtype) {
  spec::GenerationSettings s = job();
  s.precision = "fp16";
  s.width = 192;
  s.height = 128;
  auto standard = pipeline_->generate(s);
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  ASSERT_EQ(standard->memory_plan.placement, Placement::kStandard);
  EXPECT_EQ(standard->memory_plan.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(pipeline_->vae_precision(), kernels::DType::kF32);

  const ModelShapes& sh = pipeline_->model_shapes();
  const MemoryPlan low = plan_memory(sh, s, Placement::kLow, *be_).value();
  const MemoryPlan bf16 = plan_memory(sh, s, Placement::kLow, *be_, 0, nullptr, kernels::DType::kBF16).value();
  ASSERT_LT(bf16.peak(), low.peak());
  ASSERT_LT(bf16.vae_weights, low.vae_weights);
  ASSERT_TRUE(be_->set_memory_limit(bf16.peak()).ok());
  auto out = pipeline_->generate(s);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(out->memory_plan.vae_tile, 0);
  EXPECT_EQ(out->memory_plan.vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(pipeline_->vae_precision(), kernels::DType::kBF16);
  EXPECT_NE(out->memory_plan.describe().find("VAE whole in bf16"), std::string::npos) << out->memory_plan.describe();
  const nlohmann::json t = timings_json(*out, s, OutputInfo{});
  EXPECT_EQ(t["memory_plan"]["vae_dtype"], "bf16") << t["memory_plan"].dump();
  EXPECT_EQ(t["memory_plan"]["vae_tile"], 0);
  EXPECT_FALSE(out->warm) << "the decoder was loaded again, in bf16";
  ASSERT_FALSE(out->phases.empty());
  EXPECT_EQ(out->phases.front().phase, "load");
  EXPECT_LE(out->peak_memory_bytes, bf16.peak());
  expect_phases_within_plan(*out);
  EXPECT_EQ(out->latent, standard->latent);
  ASSERT_EQ(out->rgb.size(), standard->rgb.size());
  EXPECT_NE(out->rgb, standard->rgb) << "a bf16 decode that equals the fp32 one decoded in fp32";
  const double psnr = image_psnr(out->rgb.data(), standard->rgb.data(), out->rgb.size());
  std::printf("  bf16 whole decode against the fp32 whole decode (fp16 job, %dx%d): PSNR %.2f dB\n", s.width,
              s.height, psnr);
  EXPECT_GE(psnr, 35.0) << "the fp16 jobs' image gate (docs/golden-format.md)";

  // No cap: the standard placement, its decoder in fp32 again, its bits.
  ASSERT_TRUE(be_->set_memory_limit(0).ok());
  auto again = pipeline_->generate(s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->memory_plan.placement, Placement::kStandard);
  EXPECT_EQ(again->memory_plan.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(pipeline_->vae_precision(), kernels::DType::kF32);
  EXPECT_EQ(again->rgb, standard->rgb);
  EXPECT_EQ(again->latent, standard->latent);
}

// vae_precision "bf16" (the job's fast decode): the standard placement
// decodes the same latent bits whole in bf16, the image within the 16-bit
// image gate of the default job's fp32 decode and not equal to it; the plan,
// the timings and the settings say so. The default job after it decodes in
// fp32 again, its image the default's bits.
TEST_F(PlacementPipelineTest, AJobAskingForABf16VaeDecodesTheSameLatentInBf16AndTheNextDefaultJobInFp32) {
  spec::GenerationSettings s = job();
  s.precision = "fp16";
  s.width = 192;
  s.height = 128;
  auto standard = pipeline_->generate(s);
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  ASSERT_EQ(standard->memory_plan.vae_dtype, kernels::DType::kF32);

  spec::GenerationSettings fast = s;
  fast.vae_precision = "bf16";
  auto out = pipeline_->generate(fast);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.placement, Placement::kStandard);
  EXPECT_EQ(out->memory_plan.vae_tile, 0);
  EXPECT_EQ(out->memory_plan.vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(pipeline_->vae_precision(), kernels::DType::kBF16);
  EXPECT_FALSE(out->warm) << "the decoder was loaded again, in bf16";
  EXPECT_LE(out->peak_memory_bytes, out->memory_plan.peak());
  expect_phases_within_plan(*out);
  const nlohmann::json t = timings_json(*out, fast, OutputInfo{});
  EXPECT_EQ(t["memory_plan"]["vae_dtype"], "bf16") << t["memory_plan"].dump();
  EXPECT_EQ(t["settings"]["vae_precision"], "bf16") << t["settings"].dump();
  EXPECT_EQ(out->latent, standard->latent) << "the decode's dtype changes no latent bit";
  ASSERT_EQ(out->rgb.size(), standard->rgb.size());
  EXPECT_NE(out->rgb, standard->rgb) << "a bf16 decode that equals the fp32 one decoded in fp32";
  const double psnr = image_psnr(out->rgb.data(), standard->rgb.data(), out->rgb.size());
  std::printf("  vae_precision bf16 against the default fp32 decode (fp16 job, %dx%d): PSNR %.2f dB\n", s.width,
              s.height, psnr);
  EXPECT_GE(psnr, 35.0) << "the fp16 jobs' image gate (docs/golden-format.md)";
  // Asked again: the same bits (the decoder kept in bf16, the job warm).
  auto repeat = pipeline_->generate(fast);
  ASSERT_TRUE(repeat.ok()) << repeat.status().ToString();
  EXPECT_EQ(repeat->rgb, out->rgb);
  EXPECT_TRUE(repeat->warm);

  auto again = pipeline_->generate(s);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->memory_plan.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(pipeline_->vae_precision(), kernels::DType::kF32);
  EXPECT_EQ(again->rgb, standard->rgb);
  EXPECT_EQ(again->latent, standard->latent);
  // An explicit fp32 is the default's decode for an fp16 SDXL job: the same bits.
  spec::GenerationSettings explicit32 = s;
  explicit32.vae_precision = "fp32";
  auto same = pipeline_->generate(explicit32);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(same->memory_plan.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(same->rgb, standard->rgb);
}

// Under a cap where the default fp16 job decodes whole in bf16 (its fp32
// whole decode does not fit), a job that asks for fp32 decodes in fp32
// tiles, never a silent bf16; one that asks for bf16 decodes whole in bf16.
TEST_F(PlacementPipelineTest, AJobAskingForAnFp32VaeUnderACapThatWouldLowerItDecodesInTiles) {
  spec::GenerationSettings s = job();
  s.precision = "fp16";
  auto standard = pipeline_->generate(s);
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  spec::GenerationSettings fp32 = s;
  fp32.vae_precision = "fp32";
  spec::GenerationSettings bf16 = s;
  bf16.vae_precision = "bf16";

  const ModelShapes& sh = pipeline_->model_shapes();
  const int64_t tile = low_placement_vae_tile(sh.vae);
  const MemoryPlan low = plan_memory(sh, s, Placement::kLow, *be_).value();
  const MemoryPlan low_bf16 = plan_memory(sh, s, Placement::kLow, *be_, 0, nullptr, kernels::DType::kBF16).value();
  const MemoryPlan tiled = plan_memory(sh, fp32, Placement::kLow, *be_, tile).value();
  ASSERT_EQ(tiled.vae_tile, tile) << "the job is large enough to tile";
  const int64_t cap = std::max(low_bf16.peak(), tiled.peak());
  ASSERT_LT(cap, low.peak()) << low.describe() << " / " << low_bf16.describe() << " / " << tiled.describe();
  struct Uncap {
    kernels::Backend* be;
    ~Uncap() { (void)be->set_memory_limit(0); }
  } uncap{be_.get()};
  ASSERT_TRUE(be_->set_memory_limit(cap).ok());

  auto lowered = pipeline_->generate(s);
  ASSERT_TRUE(lowered.ok()) << lowered.status().ToString();
  EXPECT_EQ(lowered->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(lowered->memory_plan.vae_dtype, kernels::DType::kBF16) << "the default job is lowered";
  EXPECT_EQ(lowered->memory_plan.vae_tile, 0);

  auto out = pipeline_->generate(fp32);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(out->memory_plan.vae_dtype, kernels::DType::kF32) << out->memory_plan.describe();
  EXPECT_EQ(out->memory_plan.vae_tile, tile) << out->memory_plan.describe();
  EXPECT_EQ(pipeline_->vae_precision(), kernels::DType::kF32);
  EXPECT_LE(out->peak_memory_bytes, cap);
  expect_phases_within_plan(*out);
  EXPECT_EQ(out->latent, standard->latent);
  ASSERT_EQ(out->rgb.size(), standard->rgb.size());
  EXPECT_GE(image_psnr(out->rgb.data(), standard->rgb.data(), out->rgb.size()), 40.0)
      << "fp32 tiles within the fp32 image gate of the whole fp32 decode";

  auto asked_bf16 = pipeline_->generate(bf16);
  ASSERT_TRUE(asked_bf16.ok()) << asked_bf16.status().ToString();
  EXPECT_EQ(asked_bf16->memory_plan.vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(asked_bf16->memory_plan.vae_tile, 0);
  EXPECT_EQ(asked_bf16->rgb, lowered->rgb) << "the same bf16 whole decode as the lowered default job's";
}

// A worker that ran a standard job holds every text encoder; its next job,
// planned in the low placement (one encoder at a time), must not find them
// still loaded when it encodes: at a size where the text encode is the low
// plan's peak, a cap at that peak holds the job.
TEST_F(PlacementPipelineTest, ALowJobAfterAStandardOneEncodesWithinItsPlan) {
  spec::GenerationSettings s = job();
  s.width = 64;
  s.height = 64;
  auto standard = pipeline_->generate(s);
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  ASSERT_EQ(standard->memory_plan.placement, Placement::kStandard);

  const MemoryPlan low = plan_memory(pipeline_->model_shapes(), s, Placement::kLow, *be_).value();
  ASSERT_EQ(low.text_encode, low.peak()) << low.describe();
  ASSERT_TRUE(be_->set_memory_limit(low.peak()).ok());
  // Every allocation of the job is checked against the cap (the encoders the
  // standard job left count until they are released, so the job's recorded
  // peak may include them; no new block may pass the cap).
  auto out = pipeline_->generate(s);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(out->latent, standard->latent);
  ASSERT_TRUE(be_->set_memory_limit(0).ok());
}

// A test double of a device as its driver reports it (it runs on the cpu
// backend): the driver maps every live block in pages of `granularity`
// bytes while the pool counts its own size classes, so the device memory
// used outside the pool (runtime_device_memory) is the runtime's context plus
// the pages' rounding of whatever blocks are alive, as an H100's driver
// showed it (docs/memory.md, "Measured on the GPU").
class DriverRoundingDevice final : public kernels::doubles::ForwardingBackend {
 public:
  DriverRoundingDevice(int64_t total, int64_t context, int64_t granularity)
      : total_(total), context_(context), granularity_(granularity) {}
  Result<kernels::Buffer> allocate(size_t bytes) override {
    HIPQ_ASSIGN_OR_RETURN(kernels::Buffer b, inner_->allocate(bytes));
    void* p = b.data();
    live_.emplace(p, std::move(b));  // re-owned: ~Buffer calls our release
    return kernels::Buffer(this, p, bytes);
  }
  void release(void* data, size_t) override { live_.erase(data); }
  kernels::MemoryStats memory_stats() const override {
    kernels::MemoryStats m = inner_->memory_stats();
    m.device_total = total_;
    m.device_free = total_ - context_ - m.in_use - m.cached - rounding();
    return m;
  }

 private:
  int64_t rounding() const {
    int64_t r = 0;
    for (const auto& [p, b] : live_) {
      const auto cls = static_cast<int64_t>(inner_->block_bytes(b.bytes()));
      r += (cls + granularity_ - 1) / granularity_ * granularity_ - cls;
    }
    return r;
  }
  int64_t total_, context_, granularity_;
  std::map<void*, kernels::Buffer> live_;
};

// A worker's first job plans right after the load, with the text encoders
// the load left held: the driver's rounding of their blocks reads as the
// runtime's, so that plan saw less room than every later job's (an H100
// under an 8 GiB cap: 768 px tiles and 9 s of decode for the first job, the
// whole decode for the rest). A low plan made while encoders are held now
// releases them and plans again: the first job decodes whole, as a later one
// does, from the same reading of the runtime.
TEST_F(PlacementPipelineTest, AWorkersFirstLowJobPlansFromTheStateItsLaterJobsDo) {
  constexpr int64_t kTotal = 64 * kGiB, kContext = int64_t{300} << 20, kPage = int64_t{64} << 10;
  const spec::GenerationSettings s = job();
  // The runtime's share a later job reads: a worker whose first low job
  // released the encoders, the cache trimmed after its decode.
  DriverRoundingDevice calibration(kTotal, kContext, kPage);
  LoadOptions low_placement;
  low_placement.placement = Placement::kLow;
  auto c = Pipeline::load("synthetic:tiny-sdxl", calibration, low_placement);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto first = (*c)->generate(s);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->memory_plan.placement, Placement::kLow);
  const int64_t later = runtime_device_memory(calibration.memory_stats());
  // A fresh worker's reading, the load's encoders held.
  DriverRoundingDevice device(kTotal, kContext, kPage);
  auto p = Pipeline::load("synthetic:tiny-sdxl", device);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const int64_t held = runtime_device_memory(device.memory_stats());
  ASSERT_LT(later, held) << "the held encoders' blocks must show in the driver's reading";
  const MemoryPlan whole = plan_memory((*p)->model_shapes(), s, Placement::kLow, device).value();
  ASSERT_EQ(whole.vae_tile, 0);
  // A cap between the two readings: the whole decode fits from the later
  // reading, not from the first one.
  const int64_t cap = whole.peak() + kRuntimeGrowthBytes + (held + later) / 2;
  ASSERT_LT(cap - held - kRuntimeGrowthBytes, whole.peak()) << "the first reading would have tiled";
  ASSERT_TRUE(device.set_memory_limit(cap).ok());
  auto out = (*p)->generate(s);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(out->memory_plan.vae_tile, 0) << out->memory_plan.describe();
  EXPECT_LT(out->memory_plan.runtime, held) << "planned from the reading with the encoders still held";
  expect_phases_within_plan(*out);
}

// A test double of a backend that keeps conv weight forms, as the hip
// backend's 16-bit Hopper convs do (a taps-last copy of each weight, made on
// its first use and kept until drop_constant_forms or constant_changed): on
// the cpu backend, each 16-bit conv weight's first use allocates a block of
// its size, held as the form.
class FormsKeepingDevice final : public kernels::doubles::ForwardingBackend {
 public:
  FormsKeepingDevice() : info_(inner_->info()) { info_.keeps_conv_weight_forms = true; }
  const kernels::BackendInfo& info() const override { return info_; }
  Status conv2d(const kernels::Tensor& x, const kernels::Tensor& w, kernels::Tensor& y,
                const kernels::Conv2dOptions& o) override {
    if (w.dtype != kernels::DType::kF32 && !forms_.contains(w.data)) {
      HIPQ_ASSIGN_OR_RETURN(kernels::Buffer form, allocate(w.nbytes()));
      forms_.emplace(w.data, std::move(form));
      ++made_;
    }
    return inner_->conv2d(x, w, y, o);
  }
  void drop_constant_forms() override {
    forms_.clear();
    inner_->drop_constant_forms();
  }
  void constant_changed(const void* data) override {
    forms_.erase(data);
    inner_->constant_changed(data);
  }
  size_t forms_held() const { return forms_.size(); }
  int forms_made() const { return made_; }

 private:
  kernels::BackendInfo info_;
  std::map<const void*, kernels::Buffer> forms_;
  int made_ = 0;
};

// No conv weight form outlives the job that made it: the UNet's go after the
// denoise, a 16-bit VAE's after the decode (kept, a bf16 VAE's forms sat
// through the next job's text encode and denoise, whose moments do not count
// them: 61 MB over the text encode's on an H200 under an 8 GiB cap). The
// phases are not held to the plan here: the decode's moment does not name
// the VAE's forms (on the hip plan its 16-bit workspace allowance covers
// them: the H200's bf16 decode peaked 0.15 GiB under its moment with its
// forms made), which this double, with no such slack, shows.
TEST(ConvFormsTest, NoConvWeightFormOutlivesTheJobThatMadeIt) {
  FormsKeepingDevice be;
  auto p = Pipeline::load("synthetic:tiny-sdxl", be);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  spec::GenerationSettings s = tiny_job(64, 64);
  s.precision = "bf16";  // the UNet and the VAE in bf16: both make forms
  for (int job = 0; job < 2; ++job) {
    SCOPED_TRACE(job);
    const int before = be.forms_made();
    auto out = (*p)->generate(s);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->memory_plan.vae_dtype, kernels::DType::kBF16);
    EXPECT_GT(be.forms_made(), before) << "the job made its forms again";
    EXPECT_EQ(be.forms_held(), 0u) << "forms held after the job";
  }
}

TEST_F(PlacementPipelineTest, AnAllocationPastTheCapFailsAsOutOfMemory) {
  ASSERT_TRUE(be_->set_memory_limit(be_->bytes_in_use() + 4096).ok());
  auto small = be_->allocate(1024);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  auto big = be_->allocate(1 << 20);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("memory limit"), std::string::npos) << big.status().message();
  EXPECT_FALSE(be_->set_memory_limit(-1).ok());
  ASSERT_TRUE(be_->set_memory_limit(0).ok());
  EXPECT_TRUE(be_->allocate(1 << 20).ok());
}

}  // namespace
}  // namespace hipq::engine
namespace hipq::engine {
namespace {

// What counting fp8's weights as they are held buys a shared Hopper card
// under an 8 GiB cap beside the runtime's 0.90 GiB: an SDXL 1024 px fp8 job
// plans the standard placement (weights 4.2 GiB) where bf16 needs the low
// one, and batches several jobs where bf16 runs one at a time. (fp8 runs
// only where the backend has fp8 products: Hopper, whose cards are larger;
// a cap is how it shares one.)
TEST(MemoryPlanTest, AnFp8JobUnderAnEightGibCapPlansTheStandardPlacementAndBatches) {
  const ModelShapes sh = sdxl_shapes();
  HipPlanDevice dev(141 * kGiB, int64_t{922} << 20);
  ASSERT_TRUE(dev.set_memory_limit(8 * kGiB).ok());
  auto fp8 = choose_placement(sh, sdxl_job("fp8"), Placement::kAuto, dev);
  auto bf16 = choose_placement(sh, sdxl_job("bf16"), Placement::kAuto, dev);
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  std::printf("  8 GiB cap: fp8 %s\n  8 GiB cap: bf16 %s\n", fp8->describe().c_str(), bf16->describe().c_str());
  EXPECT_EQ(fp8->placement, Placement::kStandard);
  EXPECT_EQ(bf16->placement, Placement::kLow);
  EXPECT_LT(fp8->unet_weights, bf16->unet_weights * 6 / 10);
  auto batch_of = [&](const char* precision) {
    int n = 0;
    while (n < 16 && choose_placement(sh, sdxl_job(precision), Placement::kStandard, dev, nullptr, n + 1).ok()) ++n;
    return n;
  };
  EXPECT_GE(batch_of("fp8"), 2);
  EXPECT_EQ(batch_of("bf16"), 0);
}

}  // namespace
}  // namespace hipq::engine
