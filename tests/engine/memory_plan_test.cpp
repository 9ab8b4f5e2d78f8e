// Memory plans and placements: the SDXL plan's parts, the placement chosen
// under a device-memory cap (the cpu backend's accounting stands in for a
// card), and the pipeline in each placement on the tiny synthetic model: the
// same latent bits, the measured peak within the plan, a tiled decode within
// the image gate of the whole one, and a job that fits nowhere refused before
// any work.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "engine/parity.h"
#include "engine/models/weight_binder.h"
#include "engine/pipeline.h"
#include "kernels/backend.h"

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
  // fp8 is planned as bf16: its e4m3 linear weights are counted at 16 bits
  // (an overestimate, docs/kernels.md "fp8").
  auto fp8 = plan_memory(sh, sdxl_job("fp8"), Placement::kStandard, *be);
  ASSERT_TRUE(fp8.ok()) << fp8.status().ToString();
  EXPECT_EQ(fp8->unet_weights, plan_memory(sh, sdxl_job("bf16"), Placement::kStandard, *be)->unet_weights);
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
  ASSERT_TRUE(be->set_memory_limit(low.peak() - 1).ok());
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
  static spec::GenerationSettings job() {
    spec::GenerationSettings s;
    s.prompt = "a red fox sleeping in the snow";
    s.seed = 7;
    s.width = 384;
    s.height = 320;
    s.steps = 1;
    return s;
  }
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

  // Below every plan: refused before any work, as a configuration error.
  ASSERT_TRUE(be_->set_memory_limit(tiled.peak() - tiled.decode + tiled.weights()).ok());
  const int64_t before = be_->bytes_in_use();
  auto refused = pipeline_->generate(job());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition) << refused.status().ToString();
  EXPECT_EQ(be_->bytes_in_use(), before);
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
