#include "engine/guidance.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/models/device_tensor.h"
#include "engine/rng.h"

namespace hipq::engine {
namespace {

kernels::Backend& cpu() {
  static std::unique_ptr<kernels::Backend> be = kernels::make_backend("cpu", 0).value();
  return *be;
}

TEST(Guidance, UnbiasedStdIsTorchStd) {
  // torch.tensor([1., 2., 3., 4.]).std() == 1.2909944
  EXPECT_FLOAT_EQ(unbiased_std({1, 2, 3, 4}), 1.2909944f);
  EXPECT_EQ(unbiased_std({5}), 0.0f);
  EXPECT_EQ(unbiased_std({2, 2, 2}), 0.0f);
}

// rescale_noise_cfg as diffusers writes it, on host doubles:
//   cfg * phi * std(text) / std(cfg) + (1 - phi) * cfg.
TEST(Guidance, CombineThenRescaleIsDiffusersRescaleNoiseCfg) {
  const auto uncond_h = torch_randn_cpu(1, 256), text_h = torch_randn_cpu(2, 256);
  auto uncond = DeviceTensor::from_host(cpu(), uncond_h.data(), {1, 4, 8, 8}, kernels::DType::kF32);
  auto text = DeviceTensor::from_host(cpu(), text_h.data(), {1, 4, 8, 8}, kernels::DType::kF32);
  auto out = DeviceTensor::make(cpu(), kernels::DType::kF32, {1, 4, 8, 8});
  auto tmp = DeviceTensor::make(cpu(), kernels::DType::kF32, {1, 4, 8, 8});
  ASSERT_TRUE(uncond.ok() && text.ok() && out.ok() && tmp.ok());
  ASSERT_TRUE(combine_guidance(cpu(), uncond->t, text->t, 7.5f, out->t).ok());
  auto combined = to_host_f32(cpu(), out->t);
  ASSERT_TRUE(combined.ok());
  for (size_t i = 0; i < 256; ++i)
    ASSERT_EQ((*combined)[i], uncond_h[i] + (text_h[i] - uncond_h[i]) * 7.5f) << i;
  ASSERT_TRUE(rescale_guidance(cpu(), text->t, 0.7f, out->t, tmp->t).ok());
  auto got = to_host_f32(cpu(), out->t);
  ASSERT_TRUE(got.ok());
  auto std_of = [](const std::vector<float>& v) {
    double m = 0, q = 0;
    for (float x : v) m += x;
    m /= v.size();
    for (float x : v) q += (x - m) * (x - m);
    return std::sqrt(q / (v.size() - 1));
  };
  const double ratio = std_of(text_h) / std_of(*combined);
  double worst = 0;
  for (size_t i = 0; i < 256; ++i) {
    const double want = 0.7 * (*combined)[i] * ratio + 0.3 * (*combined)[i];
    worst = std::max(worst, std::abs((*got)[i] - want));
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_NEAR(std_of(*got), 0.7 * std_of(text_h) + 0.3 * std_of(*combined), 1e-4)
      << "the rescaled prediction's spread moves toward the conditional one's";
}

}  // namespace
}  // namespace hipq::engine
