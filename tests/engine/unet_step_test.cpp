// UNetStep: the step runner gives exactly what UNet::forward gives, on every
// call, eager (cpu) or replayed from its captured graph (hip, when a device
// is there), from latents and timesteps already on the device.
#include "engine/unet_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/models/device_tensor.h"
#include "engine/models/unet.h"
#include "engine/synthetic.h"
#include "kernels/backend.h"

namespace hipq::engine {
namespace {

using Vec = std::vector<float>;

Vec numbered(size_t n, float scale, float phase) {
  Vec v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + phase);
  return v;
}

struct Setup {
  std::unique_ptr<kernels::Backend> be;
  std::optional<UNet> unet;
  DeviceTensor hidden, pooled;
  std::vector<float> time_ids;
};

Setup make(const std::string& backend, kernels::DType dt) {
  Setup s;
  s.be = kernels::make_backend(backend, 0).value();
  auto m = make_synthetic_model("tiny-sdxl");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  auto cfg = UNetConfig::from_json(m->configs.at("unet"), "unet/config.json").value();
  s.unet.emplace(UNet::load(cfg, *m->weights.at("unet"), *s.be, dt).value());
  const int64_t pooled = cfg.projection_class_embeddings_input_dim - 6 * cfg.addition_time_embed_dim;
  Vec h = numbered(2 * 77 * cfg.cross_attention_dim, 0.5f, 0.1f);
  Vec p = numbered(2 * pooled, 0.5f, 0.2f);
  s.hidden = DeviceTensor::from_host(*s.be, h.data(), {2, 77, cfg.cross_attention_dim}, dt).value();
  s.pooled = DeviceTensor::from_host(*s.be, p.data(), {2, pooled}, dt).value();
  s.time_ids = {64, 64, 0, 0, 64, 64, 64, 64, 0, 0, 64, 64};
  return s;
}

// The direct forward of the same inputs, for comparison.
Vec forward(Setup& s, const Vec& input, float t, int64_t lh, int64_t lw) {
  const kernels::DType dt = s.unet->precision();
  DeviceTensor x = DeviceTensor::from_host(*s.be, input.data(), {2, s.unet->config().in_channels, lh, lw}, dt).value();
  UNetInputs in;
  in.sample = &x.t;
  in.timesteps = {t, t};
  in.encoder_hidden_states = &s.hidden.t;
  in.text_embeds = &s.pooled.t;
  in.time_ids = s.time_ids;
  DeviceTensor out = s.unet->forward(*s.be, in).value();
  return to_host_f32(*s.be, out.t).value();
}

void expect_step_matches_forward(const std::string& backend, kernels::DType dt, int expected_replays) {
  Setup s = make(backend, dt);
  const int64_t lh = 8, lw = 8, n = 2 * s.unet->config().in_channels * lh * lw;
  const std::vector<float> timesteps = {999.f, 749.f, 499.f, 1.f, 0.f};
  auto step = UNetStep::make(*s.be, *s.unet, s.hidden.t, &s.pooled.t, s.time_ids, 2, lh, lw, timesteps);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  for (int i = 0; i < 5; ++i) {
    // Calls 0-3: the two batch entries' latents apart; call 4: one latent for both (CFG).
    const bool shared = i == 4;
    Vec input = numbered(static_cast<size_t>(shared ? n / 2 : n), 1.0f, 0.7f * static_cast<float>(i));
    DeviceTensor x = DeviceTensor::from_host(*s.be, input.data(), {static_cast<int64_t>(input.size())},
                                             kernels::DType::kF32)
                         .value();
    auto got = step->run(x.t, i);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_EQ((*got)->dtype, kernels::DType::kF32);
    const Vec host = to_host_f32(*s.be, **got).value();
    if (shared) input.insert(input.end(), input.begin(), input.end());
    const Vec want = forward(s, input, timesteps[static_cast<size_t>(i)], lh, lw);
    ASSERT_EQ(host.size(), want.size());
    int differ = 0;
    for (size_t k = 0; k < want.size(); ++k) differ += host[k] != want[k];
    EXPECT_EQ(differ, 0) << backend << " call " << i << ": " << differ << " of " << want.size() << " values differ";
  }
  EXPECT_EQ(step->replays(), expected_replays) << backend;
  // Wrong input sizes and steps outside the table are refused before anything runs.
  const Vec three(3, 0.f);
  DeviceTensor small = DeviceTensor::from_host(*s.be, three.data(), {3}, kernels::DType::kF32).value();
  EXPECT_EQ(step->run(small.t, 0).status().code(), StatusCode::kInvalidArgument);
  const Vec ok_input(static_cast<size_t>(n), 0.f);
  DeviceTensor ok = DeviceTensor::from_host(*s.be, ok_input.data(), {n}, kernels::DType::kF32).value();
  EXPECT_EQ(step->run(ok.t, 5).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(step->replays(), expected_replays) << "refused calls run nothing";
}

TEST(UNetStepTest, CpuRunsEagerlyAndMatchesForward) {
  expect_step_matches_forward("cpu", kernels::DType::kF32, 0);
}

TEST(UNetStepTest, HipReplaysItsGraphAndMatchesForwardBitForBit) {
  if (kernels::gpu_device_count() == 0) GTEST_SKIP() << "no device";
  for (kernels::DType dt : {kernels::DType::kF32, kernels::DType::kF16, kernels::DType::kBF16})
    expect_step_matches_forward("hip", dt, 4);  // calls 2-5: captured on call 2, replayed from then on
}

TEST(UNetStepTest, HipWithGraphsOffRunsEagerly) {
  if (kernels::gpu_device_count() == 0) GTEST_SKIP() << "no device";
  ::setenv("HIPQ_STEP_GRAPHS", "0", 1);
  expect_step_matches_forward("hip", kernels::DType::kF16, 0);
  ::unsetenv("HIPQ_STEP_GRAPHS");
}

}  // namespace
}  // namespace hipq::engine
