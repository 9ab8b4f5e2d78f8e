#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

// Expected values from diffusers' get_timestep_embedding (torch 1.13, fp32).
TEST(CpuTimestepEmbedding, SdxlFlipSinToCosMatchesDiffusers) {
  auto t = make({2}, {999, 1});
  auto y = zeros({2, 320});
  TimestepEmbeddingOptions o;  // dim 320, flip, shift 0
  ASSERT_TRUE(cpu::timestep_embedding(t.t, y.t, o).ok());
  const auto v = y.values();
  const int idx[] = {0, 1, 17, 159, 160, 161, 200, 319};
  const float want999[] = {0.9996498227f, 0.8026775122f, 0.0412140712f, 0.9944063425f,
                           -0.0264607519f, 0.5964133143f, -0.5899291039f, 0.1056220606f};
  const float want1[] = {0.5403023362f, 0.5865038037f, 0.9302005768f, 1.0f,
                         0.8414709568f, 0.8099464774f, 0.0998334140f, 0.0001059254f};
  for (int k = 0; k < 8; ++k) {
    EXPECT_NEAR(v[static_cast<size_t>(idx[k])], want999[k], 2e-6) << "t=999 index " << idx[k];
    EXPECT_NEAR(v[static_cast<size_t>(320 + idx[k])], want1[k], 2e-6) << "t=1 index " << idx[k];
  }
}

TEST(CpuTimestepEmbedding, OddDimWithShiftIsZeroPadded) {
  auto t = make({1}, {37});
  auto y = zeros({1, 7});
  TimestepEmbeddingOptions o;
  o.dim = 7;
  o.flip_sin_to_cos = false;
  o.downscale_freq_shift = 1.0f;
  ASSERT_TRUE(cpu::timestep_embedding(t.t, y.t, o).ok());
  EXPECT_VALUES_NEAR(y.values(),
                     (std::vector<float>{-0.6435381174f, 0.3616154492f, 0.0036999912f, 0.7654140592f,
                                         0.9323273301f, 0.9999931455f, 0.0f}),
                     2e-6);
}

TEST(CpuTimestepEmbedding, OutputWidthMustEqualDim) {
  auto t = make({1}, {1});
  auto y = zeros({1, 8});
  TimestepEmbeddingOptions o;
  o.dim = 6;
  EXPECT_EQ(cpu::timestep_embedding(t.t, y.t, o).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
