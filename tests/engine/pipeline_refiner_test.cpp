// SDXL base + refiner on the tiny synthetic models (cpu backend): the refiner's
// UNet config (diffusers' stable-diffusion-xl-refiner-1.0 unet/config.json)
// and shapes, a base + refiner job end to end (deterministic, steps tagged by
// model), the split equal to the base's steps then the refiner's computed by
// hand from the two UNets' outputs, the refiner on its own as an img2img
// model, its export and single-file checkpoint, and the refusals.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "base/fs.h"
#include "engine/export.h"
#include "engine/memory_plan.h"
#include "engine/model_files.h"
#include "engine/parity.h"
#include "engine/models/unet.h"
#include "engine/pipeline.h"
#include "engine/refiner.h"
#include "engine/rng.h"
#include "engine/scheduler.h"
#include "engine/synthetic.h"
#include "original_checkpoint.h"
#include "spec/png.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;
using spec::GenerationSettings;

class PipelineRefinerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    backend_ = kernels::make_backend("cpu").value().release();
    base_ = Pipeline::load("synthetic:tiny-sdxl", *backend_).value().release();
    refiner_ = Pipeline::load("synthetic:tiny-sdxl-refiner", *backend_).value().release();
    // One folder per process: ctest runs each case as its own process, side by side.
    dir_ = fs::path(::testing::TempDir()) / ("hipq_pipeline_refiner_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    delete refiner_;
    delete base_;
    delete backend_;
  }
  static GenerationSettings job(uint64_t seed) {
    GenerationSettings s;
    s.prompt = "a red fox sleeping in the snow";
    s.seed = seed;
    s.width = 64;
    s.height = 64;
    s.steps = 4;
    s.guidance = 5.0f;
    s.refiner = "synthetic:tiny-sdxl-refiner";
    s.refiner_switch_at = 0.5f;  // timesteps 751, 501 | 251, 1
    return s;
  }
  static kernels::Backend* backend_;
  static Pipeline* base_;
  static Pipeline* refiner_;
  static fs::path dir_;
};
kernels::Backend* PipelineRefinerTest::backend_ = nullptr;
Pipeline* PipelineRefinerTest::base_ = nullptr;
Pipeline* PipelineRefinerTest::refiner_ = nullptr;
fs::path PipelineRefinerTest::dir_;

TEST(RefinerConfigTest, DiffusersRefinerConfigReadsAsTheRefinerLayout) {
  // stabilityai/stable-diffusion-xl-refiner-1.0 unet/config.json (the fields that shape the model).
  const auto j = nlohmann::json::parse(R"({
    "_class_name": "UNet2DConditionModel", "act_fn": "silu", "addition_embed_type": "text_time",
    "addition_embed_type_num_heads": 64, "addition_time_embed_dim": 256, "attention_head_dim": [6, 12, 24, 24],
    "block_out_channels": [384, 768, 1536, 1536], "center_input_sample": false, "class_embed_type": null,
    "conv_in_kernel": 3, "conv_out_kernel": 3, "cross_attention_dim": 1280,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "downsample_padding": 1, "dual_cross_attention": false, "encoder_hid_dim": null, "encoder_hid_dim_type": null,
    "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4, "layers_per_block": 2,
    "mid_block_scale_factor": 1, "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05,
    "norm_num_groups": 32, "num_attention_heads": null, "num_class_embeds": null, "only_cross_attention": false,
    "out_channels": 4, "projection_class_embeddings_input_dim": 2560, "resnet_time_scale_shift": "default",
    "sample_size": 128, "time_cond_proj_dim": null, "transformer_layers_per_block": 4,
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
    "upcast_attention": null, "use_linear_projection": true})");
  auto c = UNetConfig::from_json(j, "refiner unet/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->to_json(), UNetConfig::sdxl_refiner().to_json());
  EXPECT_EQ(c->transformer_layers_per_block, (std::vector<int64_t>{4, 4, 4, 4}));
  auto params = UNet::parameters(*c);
  ASSERT_TRUE(params.ok()) << params.status().ToString();
  int64_t n = 0;
  for (const ParamSpec& p : *params) {
    int64_t e = 1;
    for (int64_t d : p.shape) e *= d;
    n += e;
  }
  // 2 bytes each: the refiner's 4.52 GB unet/diffusion_pytorch_model.fp16.safetensors.
  EXPECT_EQ(n, 2259526660);
}

TEST_F(PipelineRefinerTest, TheTinyRefinersUNetTakesFiveTimeIdsAndRefusesSix) {
  auto m = make_synthetic_model("synthetic:tiny-sdxl-refiner");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(is_sdxl_refiner(*m));
  EXPECT_EQ(m->weights.count("text_encoder"), 0u);
  auto cfg = UNetConfig::from_json(m->configs.at("unet"), "tiny refiner");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto unet = UNet::load(*cfg, *m->weights.at("unet"), *backend_, kernels::DType::kF32);
  ASSERT_TRUE(unet.ok()) << unet.status().ToString();
  kernels::Backend& be = *backend_;
  std::vector<float> x(2 * 4 * 8 * 8, 0.1f), ctx(2 * 77 * 32, 0.01f), pooled(2 * 32, 0.2f);
  auto xt = DeviceTensor::from_host(be, x.data(), {2, 4, 8, 8}, kernels::DType::kF32).value();
  auto ct = DeviceTensor::from_host(be, ctx.data(), {2, 77, 32}, kernels::DType::kF32).value();
  auto pt = DeviceTensor::from_host(be, pooled.data(), {2, 32}, kernels::DType::kF32).value();
  UNetInputs in;
  in.sample = &xt.t;
  in.encoder_hidden_states = &ct.t;
  in.text_embeds = &pt.t;
  in.timesteps = {501, 501};
  in.time_ids = {64, 64, 0, 0, 2.5f, 64, 64, 0, 0, 6};
  auto out = unet->forward(be, in);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->t.shape_vec(), (std::vector<int64_t>{2, 4, 8, 8}));
  in.time_ids = {64, 64, 0, 0, 64, 64, 64, 64, 0, 0, 64, 64};  // the base's six
  auto six = unet->forward(be, in);
  ASSERT_FALSE(six.ok());
  EXPECT_NE(six.status().message().find("with 6 time ids per row"), std::string::npos) << six.status().message();
}

TEST_F(PipelineRefinerTest, BaseThenRefinerRunsEndToEndDeterministicallyWithStepsTaggedByModel) {
  std::vector<std::pair<int, int>> ticks;
  auto a = base_->generate(job(3), [&](int step, int steps) { ticks.emplace_back(step, steps); }, nullptr, refiner_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = base_->generate(job(3), {}, nullptr, refiner_);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_EQ(a->latent.size(), b->latent.size());
  EXPECT_EQ(std::memcmp(a->latent.data(), b->latent.data(), a->latent.size() * sizeof(float)), 0);
  EXPECT_EQ(a->rgb, b->rgb);
  for (float v : a->latent) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(ticks, (std::vector<std::pair<int, int>>{{1, 4}, {2, 4}, {3, 4}, {4, 4}}));
  EXPECT_EQ(a->model_calls, 4);
  EXPECT_EQ(a->step_models, (std::vector<std::string>{"base", "base", "refiner", "refiner"}));
  ASSERT_TRUE(a->refiner.has_value());
  EXPECT_EQ(a->refiner->base_steps, 2);
  EXPECT_EQ(a->refiner->refiner_steps, 2);
  EXPECT_EQ(a->refiner->base_cutoff, 500);
  EXPECT_EQ(a->refiner->refiner_start, 2);
  // One row per job phase; each model's share beside them (b: both models warm, no load).
  EXPECT_TRUE(b->warm);
  std::vector<std::string> phases;
  for (const auto& p : b->phases) phases.push_back(p.phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"text_encode", "denoise", "decode"}));
  std::vector<std::string> shares;
  for (const auto& m : b->model_phases) shares.push_back(m.model + ":" + m.timing.phase);
  EXPECT_EQ(shares, (std::vector<std::string>{"base:text_encode", "refiner:text_encode", "base:denoise",
                                              "refiner:denoise"}));
  double text_sum = 0;
  for (const auto& m : b->model_phases)
    if (m.timing.phase == "text_encode") text_sum += m.timing.host_ms;
  EXPECT_LE(text_sum, b->phases[0].host_ms + 1.0);  // the shares lie inside the job's row
  // Another seed, another picture; the refiner's steps change the base's latent.
  auto c = base_->generate(job(4), {}, nullptr, refiner_);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->latent, a->latent);
  // The aesthetic scores condition the refiner's steps.
  GenerationSettings scored = job(3);
  scored.aesthetic_score = 3.0f;
  auto e = base_->generate(scored, {}, nullptr, refiner_);
  ASSERT_TRUE(e.ok());
  EXPECT_NE(e->latent, a->latent);
  GenerationSettings base_only = job(3);
  base_only.refiner.clear();
  auto d = base_->generate(base_only);
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d->latent, a->latent);

  const nlohmann::json t = timings_json(*b, job(3), OutputInfo{"synthetic:tiny-sdxl@0", "", {}, "cpu", "cpu"});
  ASSERT_EQ(t.at("steps").size(), 4u);
  EXPECT_EQ(t.at("steps")[0].at("model"), "base");
  EXPECT_EQ(t.at("steps")[3].at("model"), "refiner");
  EXPECT_EQ(t.at("steps")[3].at("phase"), "step");
  EXPECT_EQ(t.at("model_phases").size(), 4u);
  EXPECT_EQ(t.at("refiner").at("model"), "synthetic:tiny-sdxl-refiner@0");
  EXPECT_EQ(t.at("refiner").at("switch_at"), 0.5);
  const nlohmann::json plain = timings_json(*d, base_only, OutputInfo{"synthetic:tiny-sdxl@0", "", {}, "cpu", "cpu"});
  EXPECT_FALSE(plain.at("steps")[0].contains("model"));
  EXPECT_FALSE(plain.contains("refiner"));
}

// Euler on the host, one float op per PyTorch op, guidance as diffusers combines it.
void euler_steps_by_hand(Pipeline& model, const GenerationSettings& s, const Schedule& sched, std::vector<float>& x) {
  for (size_t i = 0; i < sched.timesteps.size(); ++i) {
    const float sigma = sched.sigmas[i];
    const float scale = std::sqrt(sigma * sigma + 1.0f);
    std::vector<float> input(2 * x.size());
    for (size_t k = 0; k < x.size(); ++k) input[k] = input[k + x.size()] = x[k] / scale;
    auto out = model.unet_output(s, input, sched.timesteps[i]);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    const float dt = sched.sigmas[i + 1] - sigma;
    for (size_t k = 0; k < x.size(); ++k) {
      const float u = (*out)[k], c = (*out)[k + x.size()];
      const float guided = u + s.guidance * (c - u);
      const float pred = x[k] - sigma * guided;
      const float d = (x[k] - pred) / sigma;
      x[k] = x[k] + d * dt;
    }
  }
}

TEST_F(PipelineRefinerTest, TheSplitIsTheBasesStepsThenTheRefinersOnOneLatent) {
  const GenerationSettings s = job(11);
  auto job_out = base_->generate(s, {}, nullptr, refiner_);
  ASSERT_TRUE(job_out.ok()) << job_out.status().ToString();

  const SchedulerConfig cfg = SchedulerConfig::defaults_for_family("sdxl");
  auto full = make_schedule(cfg, s.steps, SamplerKind::kEuler);
  ASSERT_TRUE(full.ok());
  const int cutoff = discrete_timestep_cutoff(cfg.num_train_timesteps, s.refiner_switch_at);
  auto head = schedule_head(*full, cutoff, s.refiner_switch_at);
  auto tail = schedule_tail(*full, cutoff, s.refiner_switch_at);
  ASSERT_TRUE(head.ok() && tail.ok());
  ASSERT_EQ(head->timesteps, (std::vector<float>{751, 501}));
  ASSERT_EQ(tail->timesteps, (std::vector<float>{251, 1}));

  std::vector<float> x = randn(RngKind::kTorchCpu, s.seed, 4 * 8 * 8);
  for (float& v : x) v *= full->init_noise_sigma;
  euler_steps_by_hand(*base_, s, *head, x);
  euler_steps_by_hand(*refiner_, s, *tail, x);
  ASSERT_EQ(x.size(), job_out->latent.size());
  double worst = 0;
  for (size_t k = 0; k < x.size(); ++k)
    worst = std::max(worst, std::abs(static_cast<double>(x[k]) - job_out->latent[k]) / (1.0 + std::abs(x[k])));
  EXPECT_LT(worst, 1e-5) << "the job's latent is not the base's two steps then the refiner's two";
  // And not what the base alone would have made of the last two steps.
  std::vector<float> base_only = randn(RngKind::kTorchCpu, s.seed, 4 * 8 * 8);
  for (float& v : base_only) v *= full->init_noise_sigma;
  euler_steps_by_hand(*base_, s, *full, base_only);
  double diff = 0;
  for (size_t k = 0; k < x.size(); ++k) diff = std::max(diff, std::abs(static_cast<double>(base_only[k]) - x[k]));
  EXPECT_GT(diff, 1e-3);
}

TEST_F(PipelineRefinerTest, StochasticSamplersHandTheGeneratorOnToTheRefiner) {
  for (const char* sampler : {"euler_ancestral", "dpmpp_2m", "dpmpp_2m_sde", "ddim"}) {
    SCOPED_TRACE(sampler);
    GenerationSettings s = job(5);
    s.sampler = sampler;
    auto a = base_->generate(s, {}, nullptr, refiner_);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    auto b = base_->generate(s, {}, nullptr, refiner_);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(a->latent, b->latent);
    EXPECT_EQ(a->refiner->base_steps + a->refiner->refiner_steps, 4);
    for (float v : a->latent) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST_F(PipelineRefinerTest, TheRefinerAloneRunsImg2ImgAndRefusesTextToImage) {
  GenerationSettings t2i = job(1);
  t2i.refiner.clear();
  auto init = base_->generate(t2i);
  ASSERT_TRUE(init.ok());
  ASSERT_TRUE(spec::write_png(dir_ / "init.png", {init->width, init->height, init->rgb}).ok());
  GenerationSettings s = t2i;
  s.init_image = (dir_ / "init.png").string();
  s.strength = 0.5f;
  auto a = refiner_->generate(s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->model_calls, 2);
  EXPECT_TRUE(a->step_models.empty());
  for (float v : a->latent) ASSERT_TRUE(std::isfinite(v));
  // The aesthetic score conditions the refiner.
  GenerationSettings other = s;
  other.aesthetic_score = 9.0f;
  auto b = refiner_->generate(other);
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->latent, b->latent);

  auto refused = refiner_->generate(t2i);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("is an SDXL refiner: it runs as img2img"), std::string::npos)
      << refused.status().message();
}

TEST_F(PipelineRefinerTest, BadCombinationsAreRefusedBeforeAnyDeviceWork) {
  auto expect_refused = [](const Result<GenerationOutput>& r, StatusCode code, const std::string& words) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(words), std::string::npos) << r.status().message();
  };
  // Settings name a refiner, none was loaded.
  expect_refused(base_->generate(job(1)), StatusCode::kFailedPrecondition, "no refiner model was loaded");
  // A refiner pipeline without the setting.
  GenerationSettings plain = job(1);
  plain.refiner.clear();
  expect_refused(base_->generate(plain, {}, nullptr, refiner_), StatusCode::kInvalidArgument, "name no refiner");
  // Roles swapped, or a base as the refiner.
  expect_refused(refiner_->generate(job(1), {}, nullptr, base_), StatusCode::kInvalidArgument,
                 "itself an SDXL refiner");
  auto other_base = Pipeline::load("synthetic:tiny-sdxl@1", *backend_);
  ASSERT_TRUE(other_base.ok());
  expect_refused(base_->generate(job(1), {}, nullptr, other_base->get()), StatusCode::kInvalidArgument,
                 "is not an SDXL refiner");
  // A sampler whose schedule does not split.
  GenerationSettings heun = job(1);
  heun.sampler = "heun";
  expect_refused(base_->generate(heun, {}, nullptr, refiner_), StatusCode::kInvalidArgument,
                 "base + refiner job with sampler \"heun\" is not implemented");
  // A switch point that leaves the refiner no step.
  GenerationSettings late = job(1);
  late.steps = 2;
  late.refiner_switch_at = 0.999f;
  expect_refused(base_->generate(late, {}, nullptr, refiner_), StatusCode::kInvalidArgument,
                 "leaves the refiner no step");
  // The refiner with an init image.
  GenerationSettings with_image = job(1);
  with_image.init_image = (dir_ / "missing.png").string();
  expect_refused(base_->generate(with_image, {}, nullptr, refiner_), StatusCode::kInvalidArgument,
                 "refiner with an init_image is not implemented");
}

TEST_F(PipelineRefinerTest, TheMemoryPlanCountsTheRefinersWeights) {
  const GenerationSettings s = job(1);
  auto alone = plan_memory(base_->model_shapes(), s, Placement::kStandard, *backend_);
  auto both = plan_memory(base_->model_shapes(), s, Placement::kStandard, *backend_, 0, &refiner_->model_shapes());
  auto refiner_alone = plan_memory(refiner_->model_shapes(), s, Placement::kStandard, *backend_);
  ASSERT_TRUE(alone.ok() && both.ok() && refiner_alone.ok());
  EXPECT_EQ(both->unet_weights, alone->unet_weights + refiner_alone->unet_weights);
  EXPECT_EQ(both->text_weights, alone->text_weights + refiner_alone->text_weights);
  EXPECT_GT(both->denoise, alone->denoise);
  auto low = plan_memory(base_->model_shapes(), s, Placement::kLow, *backend_, 0, &refiner_->model_shapes());
  ASSERT_TRUE(low.ok());
  EXPECT_LT(low->denoise, both->denoise);  // both models' text encoders released
  EXPECT_EQ(low->unet_weights, both->unet_weights);
  // The full-size pair: the refiner's 2.3 B UNet parameters on top of the base's.
  ModelShapes big, big_refiner;
  big.family = big_refiner.family = "sdxl";
  big.unet = UNetConfig::sdxl();
  big_refiner.unet = UNetConfig::sdxl_refiner();
  big.text_encoders = {ClipTextConfig::clip_vit_l14(), ClipTextConfig::open_clip_bigg14()};
  big_refiner.text_encoders = {ClipTextConfig::open_clip_bigg14()};
  big.vae = big_refiner.vae = VaeConfig::sdxl();
  GenerationSettings fp16 = s;
  fp16.precision = "fp16";
  fp16.width = fp16.height = 1024;
  auto pair = plan_memory(big, fp16, Placement::kStandard, *backend_, 0, &big_refiner);
  auto single = plan_memory(big, fp16, Placement::kStandard, *backend_);
  ASSERT_TRUE(pair.ok() && single.ok());
  auto refiner_single = plan_memory(big_refiner, fp16, Placement::kStandard, *backend_);
  ASSERT_TRUE(refiner_single.ok());
  EXPECT_EQ(pair->unet_weights, single->unet_weights + refiner_single->unet_weights);
  EXPECT_GT(static_cast<double>(refiner_single->unet_weights), 2.2e9 * 2);  // fp16, in the backend's blocks
  EXPECT_GT(pair->peak(), single->peak() + refiner_single->unet_weights);
}

// A base + refiner fp16 job capped below its low plan's fp32 whole decode:
// the refiner's VAE (the one that decodes) in bf16, the base's kept in
// fp32; the latent the same bits, the image within the fp16 gate; the next
// job uncapped decodes in fp32 again.
TEST_F(PipelineRefinerTest, ALowPlacementDecodesWithTheRefinersVaeInBf16) {
  GenerationSettings s = job(3);
  s.precision = "fp16";
  // Large enough for the decode to be the plan's peak (a text encoder's
  // load stages its largest tensor in the stored f32, which the plan does
  // not count: docs/memory.md).
  s.width = s.height = 192;
  s.steps = 2;
  auto standard = base_->generate(s, {}, nullptr, refiner_);
  ASSERT_TRUE(standard.ok()) << standard.status().ToString();
  const ModelShapes& base_shapes = base_->model_shapes();
  const ModelShapes& refiner_shapes = refiner_->model_shapes();
  const MemoryPlan low = plan_memory(base_shapes, s, Placement::kLow, *backend_, 0, &refiner_shapes).value();
  const MemoryPlan bf16 =
      plan_memory(base_shapes, s, Placement::kLow, *backend_, 0, &refiner_shapes, kernels::DType::kBF16).value();
  // Only the refiner's VAE is counted in bf16.
  EXPECT_LT(bf16.vae_weights, low.vae_weights);
  EXPECT_GT(bf16.vae_weights, low.vae_weights * 2 / 3);
  ASSERT_LT(bf16.peak(), low.peak());
  struct Uncap {
    kernels::Backend* be;
    ~Uncap() { (void)be->set_memory_limit(0); }
  } uncap{backend_};
  ASSERT_TRUE(backend_->set_memory_limit(bf16.peak()).ok());
  auto out = base_->generate(s, {}, nullptr, refiner_);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->memory_plan.placement, Placement::kLow);
  EXPECT_EQ(out->memory_plan.vae_dtype, kernels::DType::kBF16);
  EXPECT_EQ(refiner_->vae_precision(), kernels::DType::kBF16);
  EXPECT_EQ(base_->vae_precision(), kernels::DType::kF32);
  bool refiner_load = false;
  for (const ModelPhaseTiming& m : out->model_phases) refiner_load |= m.model == "refiner" && m.timing.phase == "load";
  EXPECT_TRUE(refiner_load) << "the refiner's VAE loaded again is its load";
  EXPECT_EQ(out->latent, standard->latent);
  ASSERT_EQ(out->rgb.size(), standard->rgb.size());
  EXPECT_NE(out->rgb, standard->rgb);
  EXPECT_GE(image_psnr(out->rgb.data(), standard->rgb.data(), out->rgb.size()), 35.0);
  // Each phase within its moment of the plan (both models' embeddings held to the decode).
  ASSERT_FALSE(out->phase_peaks.empty());
  for (const PhasePeak& p : out->phase_peaks)
    EXPECT_LE(p.bytes, out->memory_plan.phase_bytes(p.phase))
        << p.phase << " ran past its plan (" << out->memory_plan.describe() << ")";

  ASSERT_TRUE(backend_->set_memory_limit(0).ok());
  auto again = base_->generate(s, {}, nullptr, refiner_);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->memory_plan.vae_dtype, kernels::DType::kF32);
  EXPECT_EQ(refiner_->vae_precision(), kernels::DType::kF32);
  EXPECT_EQ(again->rgb, standard->rgb);
}

TEST_F(PipelineRefinerTest, TheExportedRefinerFolderAndItsCheckpointLoadAsTheSyntheticOne) {
  auto syn = make_synthetic_model("synthetic:tiny-sdxl-refiner");
  ASSERT_TRUE(syn.ok());
  const fs::path folder = dir_ / "tiny-sdxl-refiner";
  ASSERT_TRUE(export_diffusers_folder(*syn, folder).ok());
  EXPECT_TRUE(fs::exists(folder / "text_encoder_2" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(folder / "tokenizer_2" / "vocab.json"));
  EXPECT_FALSE(fs::exists(folder / "text_encoder"));
  EXPECT_FALSE(fs::exists(folder / "tokenizer"));
  auto index = nlohmann::json::parse(read_file(folder / "model_index.json").value());
  EXPECT_EQ(index.at("_class_name"), "StableDiffusionXLImg2ImgPipeline");
  EXPECT_EQ(index.at("requires_aesthetics_score"), true);
  EXPECT_EQ(index.at("force_zeros_for_empty_prompt"), false);
  EXPECT_TRUE(index.at("text_encoder")[0].is_null());

  auto from_folder = open_model(folder.string());
  ASSERT_TRUE(from_folder.ok()) << from_folder.status().ToString();
  EXPECT_TRUE(is_sdxl_refiner(*from_folder));
  const fs::path ckpt = dir_ / "tiny-sdxl-refiner.safetensors";
  std::map<std::string, std::string> meta;
  meta["hipq.config.unet"] = nlohmann::json{{"attention_head_dim", from_folder->configs.at("unet").at("attention_head_dim")}}.dump();
  meta["hipq.config.text_encoder_2"] =
      nlohmann::json{{"num_attention_heads", from_folder->configs.at("text_encoder_2").at("num_attention_heads")}}.dump();
  ASSERT_TRUE(testing::write_original_checkpoint(*from_folder, ckpt, meta).ok());
  auto from_file = open_model(ckpt.string());
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_TRUE(is_sdxl_refiner(*from_file));
  EXPECT_EQ(from_file->configs.at("unet").at("projection_class_embeddings_input_dim"), 72);
  EXPECT_EQ(from_file->configs.at("unet").at("addition_time_embed_dim"), 8);

  // The same base + refiner job with the refiner from each source: the same bits.
  auto refiner_folder = Pipeline::load(*from_folder, *backend_);
  ASSERT_TRUE(refiner_folder.ok()) << refiner_folder.status().ToString();
  auto refiner_file = Pipeline::load(*from_file, *backend_);
  ASSERT_TRUE(refiner_file.ok()) << refiner_file.status().ToString();
  GenerationSettings s = job(2);
  auto a = base_->generate(s, {}, nullptr, refiner_);
  auto b = base_->generate(s, {}, nullptr, refiner_folder->get());
  auto c = base_->generate(s, {}, nullptr, refiner_file->get());
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << b.status().ToString() << c.status().ToString();
  EXPECT_EQ(a->latent, b->latent);
  EXPECT_EQ(b->latent, c->latent);
}

}  // namespace
}  // namespace hipq::engine
