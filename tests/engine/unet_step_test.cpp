// UNetStep: the step runner gives exactly what UNet::forward gives, on every
// call, eager (cpu) or replayed from its captured graph (hip, when a device
// is there).
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
  auto step = UNetStep::make(*s.be, *s.unet, s.hidden.t, &s.pooled.t, s.time_ids, 2, lh, lw);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  const float timesteps[] = {999.f, 749.f, 499.f, 1.f};
  for (int i = 0; i < 4; ++i) {
    const Vec input = numbered(static_cast<size_t>(n), 1.0f, 0.7f * static_cast<float>(i));
    auto got = step->run(input, timesteps[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Vec want = forward(s, input, timesteps[i], lh, lw);
    ASSERT_EQ(got->size(), want.size());
    int differ = 0;
    for (size_t k = 0; k < want.size(); ++k) differ += (*got)[k] != want[k];
    EXPECT_EQ(differ, 0) << backend << " call " << i << ": " << differ << " of " << want.size() << " values differ";
  }
  EXPECT_EQ(step->replays(), expected_replays) << backend;
  // Wrong input sizes are refused before anything runs.
  auto bad = step->run(Vec(3, 0.f), 1.f);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST(UNetStepTest, CpuRunsEagerlyAndMatchesForward) {
  expect_step_matches_forward("cpu", kernels::DType::kF32, 0);
}

TEST(UNetStepTest, HipReplaysItsGraphAndMatchesForwardBitForBit) {
  if (kernels::gpu_device_count() == 0) GTEST_SKIP() << "no device";
  for (kernels::DType dt : {kernels::DType::kF32, kernels::DType::kF16, kernels::DType::kBF16})
    expect_step_matches_forward("hip", dt, 3);  // calls 2-4: captured on call 2, replayed from then on
}

TEST(UNetStepTest, HipWithGraphsOffRunsEagerly) {
  if (kernels::gpu_device_count() == 0) GTEST_SKIP() << "no device";
  ::setenv("HIPQ_STEP_GRAPHS", "0", 1);
  expect_step_matches_forward("hip", kernels::DType::kF16, 0);
  ::unsetenv("HIPQ_STEP_GRAPHS");
}

}  // namespace
}  // namespace hipq::engine
