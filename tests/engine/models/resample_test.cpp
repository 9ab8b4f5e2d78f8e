#include "engine/models/resample.h"

#include <gtest/gtest.h>

#include "naive_ops.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

Vec upsample(const Vec& x, int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  Vec y(static_cast<size_t>(nc * oh * ow));
  for (int64_t c = 0; c < nc; ++c)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) y[(c * oh + i) * ow + j] = x[(c * h + i / 2) * w + j / 2];
  return y;
}


TEST(ResampleTest, DownsampleIsStride2Conv) {
  SpecRecorder rec;
  ASSERT_TRUE(Downsample2D::bind(rec, "d", 3).ok());
  auto w = random_weights(rec.specs(), 1);
  auto be = cpu_backend();
  WeightLoader loader(*w, *be, kernels::DType::kF32);
  auto d = Downsample2D::bind(loader, "d", 3);
  ASSERT_TRUE(d.ok());
  std::mt19937 rng(2);
  Vec x = random_vec(rng, 1 * 3 * 7 * 6);
  DeviceTensor xd = upload(*be, x, {1, 3, 7, 6});
  auto y = d->forward(*be, xd.t);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->t.shape_vec(), (std::vector<int64_t>{1, 3, 4, 3}));
  Vec b = param(*w, "d.conv.bias");
  EXPECT_LT(max_abs_diff(download(*be, y->t), conv2d(x, 1, 3, 7, 6, param(*w, "d.conv.weight"), 3, 3, 2, 1, &b)), 1e-4);
}

// The VAE encoder's Downsample2D (padding 0): F.pad(x, (0, 1, 0, 1)), one zero
// row and column at the bottom and right, then the stride-2 conv unpadded.
TEST(ResampleTest, UnpaddedDownsamplePadsBottomAndRightFirst) {
  SpecRecorder rec;
  ASSERT_TRUE(Downsample2D::bind(rec, "d", 3, 0).ok());
  auto w = random_weights(rec.specs(), 7);
  auto be = cpu_backend();
  WeightLoader loader(*w, *be, kernels::DType::kF32);
  auto d = Downsample2D::bind(loader, "d", 3, 0);
  ASSERT_TRUE(d.ok());
  std::mt19937 rng(8);
  for (auto [h, wd] : {std::pair<int64_t, int64_t>{8, 6}, {7, 5}}) {
    Vec x = random_vec(rng, static_cast<size_t>(3 * h * wd));
    Vec padded(static_cast<size_t>(3 * (h + 1) * (wd + 1)), 0.0f);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < wd; ++j) padded[(c * (h + 1) + i) * (wd + 1) + j] = x[(c * h + i) * wd + j];
    DeviceTensor xd = upload(*be, x, {1, 3, h, wd});
    auto y = d->forward(*be, xd.t);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    EXPECT_EQ(y->t.shape_vec(), (std::vector<int64_t>{1, 3, h / 2, wd / 2}));
    Vec b = param(*w, "d.conv.bias");
    Vec ref = conv2d(padded, 1, 3, h + 1, wd + 1, param(*w, "d.conv.weight"), 3, 3, 2, 0, &b);
    EXPECT_LT(max_abs_diff(download(*be, y->t), ref), 1e-4) << h << "x" << wd;
  }
  SpecRecorder bad;
  EXPECT_EQ(Downsample2D::bind(bad, "d", 3, 2).status().code(), StatusCode::kInvalidArgument);
}

TEST(ResampleTest, UpsampleToOddSizeEqualsNearestResize) {
  SpecRecorder rec;
  ASSERT_TRUE(Upsample2D::bind(rec, "u", 2).ok());
  auto w = random_weights(rec.specs(), 4);
  auto be = cpu_backend();
  WeightLoader loader(*w, *be, kernels::DType::kF32);
  auto u = Upsample2D::bind(loader, "u", 2);
  ASSERT_TRUE(u.ok());
  std::mt19937 rng(3);
  Vec x = random_vec(rng, 2 * 4 * 3);
  DeviceTensor xd = upload(*be, x, {1, 2, 4, 3});
  Vec b = param(*w, "u.conv.bias");
  for (auto [oh, ow] : {std::pair<int64_t, int64_t>{8, 6}, {7, 5}}) {
    auto y = u->forward(*be, xd.t, oh, ow);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    EXPECT_EQ(y->t.shape_vec(), (std::vector<int64_t>{1, 2, oh, ow}));
    Vec ref = conv2d(upsample(x, 2, 4, 3, oh, ow), 1, 2, oh, ow, param(*w, "u.conv.weight"), 2, 3, 1, 1, &b);
    EXPECT_LT(max_abs_diff(download(*be, y->t), ref), 1e-4) << oh << "x" << ow;
  }
}

}  // namespace
}  // namespace hipq::engine
