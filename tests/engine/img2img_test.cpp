#include "engine/img2img.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "engine/models/device_tensor.h"
#include "engine/sampler.h"
#include "spec/generation_settings.h"

namespace hipq::engine {
namespace {

Schedule schedule_of(SamplerKind kind, int steps) {
  return make_schedule(SchedulerConfig::defaults_for_family("sdxl"), steps, kind).value();
}

std::vector<float> values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Img2Img, StrengthKeepsTheStepsPythonComputes) {
  // int(steps * strength) as Python computes it with the strength the user wrote:
  // 10 * 0.7 = 7.000000000000001 -> 7, where 10 * 0.7f would give 6.
  EXPECT_EQ(strength_start_index(10, 0.7f), 3);
  EXPECT_EQ(strength_start_index(20, 0.35f), 13);
  EXPECT_EQ(strength_start_index(50, 0.75f), 13);
  EXPECT_EQ(strength_start_index(4, 0.5f), 2);
  EXPECT_EQ(strength_start_index(4, 1.0f), 0);
  EXPECT_EQ(spec::denoising_steps(3, 0.3f), 0);
  EXPECT_EQ(spec::denoising_steps(30, 0.3f), 9);
}

TEST(Img2Img, PreprocessMapsBytesToMinusOneOneInChannelPlanes) {
  spec::RgbImage img;
  img.width = 2;
  img.height = 1;
  img.rgb = {0, 128, 255, 255, 0, 64};
  const std::vector<float> x = preprocess_init_image(img);
  ASSERT_EQ(x.size(), 6u);
  // [1, 3, 1, 2]: R plane (0, 255), G plane (128, 0), B plane (255, 64).
  EXPECT_EQ(x[0], -1.0f);
  EXPECT_EQ(x[1], 1.0f);
  EXPECT_EQ(x[2], 2.0f * (128.0f / 255.0f) - 1.0f);
  EXPECT_EQ(x[3], -1.0f);
  EXPECT_EQ(x[4], 1.0f);
  EXPECT_EQ(x[5], 2.0f * (64.0f / 255.0f) - 1.0f);
}

TEST(Img2Img, CutScheduleIsTheTailWithTheWholeCountAndNoInitialScale) {
  const Schedule full = schedule_of(SamplerKind::kEuler, 10);
  ASSERT_GT(full.init_noise_sigma, 1.0f);
  auto cut = cut_schedule(full, 3);
  ASSERT_TRUE(cut.ok()) << cut.status().ToString();
  EXPECT_EQ(cut->timesteps, std::vector<float>(full.timesteps.begin() + 3, full.timesteps.end()));
  EXPECT_EQ(cut->sigmas, std::vector<float>(full.sigmas.begin() + 3, full.sigmas.end()));
  EXPECT_EQ(cut->init_noise_sigma, 1.0f);
  EXPECT_EQ(inference_steps(*cut), 10);
  EXPECT_EQ(inference_steps(full), 10);
  EXPECT_EQ(cut_schedule(full, 10).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cut_schedule(full, -1).status().code(), StatusCode::kInvalidArgument);
}

TEST(Img2Img, AddNoiseFollowsEachSchedulersClosedForm) {
  const std::vector<float> x = values(64, 1), noise = values(64, 2);
  const int t_start = 4;
  for (SamplerKind kind : {SamplerKind::kEuler, SamplerKind::kEulerKarras, SamplerKind::kEulerAncestral,
                           SamplerKind::kDdim, SamplerKind::kDpmpp2m, SamplerKind::kDpmpp2mSdeKarras}) {
    const Schedule full = schedule_of(kind, 10);
    auto noised = add_noise_at_start(full, t_start, x, noise, kernels::DType::kF32);
    ASSERT_TRUE(noised.ok()) << noised.status().ToString();
    double a = 1, b = 0;  // noised = a * x + b * noise
    const double sigma = full.sigmas[t_start];
    if (kind == SamplerKind::kDdim) {
      const double ac = full.alphas_cumprod[static_cast<size_t>(full.timesteps[t_start])];
      a = std::sqrt(ac);
      b = std::sqrt(1.0 - ac);
    } else if (kind == SamplerKind::kDpmpp2m || kind == SamplerKind::kDpmpp2mSdeKarras) {
      a = 1.0 / std::sqrt(sigma * sigma + 1.0);
      b = sigma * a;
    } else {
      b = sigma;
    }
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_NEAR((*noised)[i], a * x[i] + b * noise[i], 1e-5 * (1.0 + b)) << sampler_kind_name(kind) << " " << i;
  }
  const Schedule euler = schedule_of(SamplerKind::kEuler, 10);
  EXPECT_EQ(add_noise_at_start(euler, 0, x, values(3, 1), kernels::DType::kF32).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(add_noise_at_start(euler, 10, x, noise, kernels::DType::kF32).status().code(),
            StatusCode::kInvalidArgument);
  // In fp16 every value is an fp16 value.
  auto half = add_noise_at_start(euler, 2, x, noise, kernels::DType::kF16);
  ASSERT_TRUE(half.ok());
  for (float v : *half) EXPECT_EQ(v, round_to_dtype(v, kernels::DType::kF16));
}

// The sampler over the tail of a schedule continues the whole run exactly:
// DDIM's step stride and DPM++'s final-order rule read the whole count.
TEST(Img2Img, ACutDdimRunContinuesTheFullRunBitForBit) {
  auto be = kernels::make_backend("cpu", 0).value();
  const SchedulerConfig cfg = SchedulerConfig::defaults_for_family("sdxl");
  const Schedule full = schedule_of(SamplerKind::kDdim, 8);
  const int t_start = 3;
  const std::vector<float> start = values(32, 3);
  std::vector<float> at_cut;
  auto run = [&](const Schedule& s, const std::vector<float>& x0, bool record) -> std::vector<float> {
    DeviceTensor x = DeviceTensor::from_host(*be, x0.data(), {32}, kernels::DType::kF32).value();
    Denoiser d = [&](const kernels::Tensor& in, const DenoiseStep& step, kernels::Tensor& out) -> Status {
      HIPQ_ASSIGN_OR_RETURN(std::vector<float> h, to_host_f32(*be, in));
      if (record && step.index == t_start) at_cut = h;  // DDIM's model input is x itself
      for (size_t i = 0; i < h.size(); ++i) h[i] = 0.3f * h[i] + 0.01f * step.timestep / 1000.0f;
      return be->copy_to_device(h.data(), out.data, out.nbytes());
    };
    EXPECT_TRUE(sample(*be, s, cfg, x.t, d).ok());
    return to_host_f32(*be, x.t).value();
  };
  const std::vector<float> whole = run(full, start, true);
  ASSERT_EQ(at_cut.size(), 32u);
  const std::vector<float> tail = run(cut_schedule(full, t_start).value(), at_cut, false);
  EXPECT_EQ(tail, whole);
}

TEST(Img2Img, ACutEulerRunStartsFromTheGivenLatentUnscaled) {
  auto be = kernels::make_backend("cpu", 0).value();
  const SchedulerConfig cfg = SchedulerConfig::defaults_for_family("sdxl");
  const Schedule cut = cut_schedule(schedule_of(SamplerKind::kEuler, 10), 6).value();
  const std::vector<float> start = values(16, 4);
  DeviceTensor x = DeviceTensor::from_host(*be, start.data(), {16}, kernels::DType::kF32).value();
  int calls = 0;
  Denoiser d = [&](const kernels::Tensor& in, const DenoiseStep& step, kernels::Tensor& out) -> Status {
    HIPQ_ASSIGN_OR_RETURN(std::vector<float> h, to_host_f32(*be, in));
    if (step.index == 0) {
      // scale_model_input of the latent handed over: x / sqrt(sigma^2 + 1), no init_noise_sigma on it.
      const float scale = std::sqrt(cut.sigmas[0] * cut.sigmas[0] + 1.0f);
      for (size_t i = 0; i < h.size(); ++i) EXPECT_FLOAT_EQ(h[i], start[i] / scale);
    }
    ++calls;
    std::vector<float> zero(h.size(), 0.0f);
    return be->copy_to_device(zero.data(), out.data, out.nbytes());
  };
  ASSERT_TRUE(sample(*be, cut, cfg, x.t, d).ok());
  EXPECT_EQ(calls, 4);
}

}  // namespace
}  // namespace hipq::engine
