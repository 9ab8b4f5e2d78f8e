#include "engine/models/resnet_block.h"

#include <gtest/gtest.h>

#include "naive_ops.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

Vec naive_resnet(const WeightSource& w, const Vec& x, const Vec* temb, int64_t n, int64_t in, int64_t out, int64_t h,
                 int64_t wd, int64_t tdim, int groups, float eps) {
  const int64_t s = h * wd;
  Vec hn = map(group_norm(x, n, in, s, groups, eps, param(w, "r.norm1.weight"), param(w, "r.norm1.bias")), silu);
  Vec b1 = param(w, "r.conv1.bias");
  Vec h1 = conv2d(hn, n, in, h, wd, param(w, "r.conv1.weight"), out, 3, 1, 1, &b1);
  if (temb) {
    Vec tb = param(w, "r.time_emb_proj.bias");
    Vec t = linear(map(*temb, silu), n, tdim, param(w, "r.time_emb_proj.weight"), out, &tb);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t c = 0; c < out; ++c)
        for (int64_t i = 0; i < s; ++i) h1[(b * out + c) * s + i] += t[b * out + c];
  }
  Vec h2 = map(group_norm(h1, n, out, s, groups, eps, param(w, "r.norm2.weight"), param(w, "r.norm2.bias")), silu);
  Vec b2 = param(w, "r.conv2.bias");
  Vec y = conv2d(h2, n, out, h, wd, param(w, "r.conv2.weight"), out, 3, 1, 1, &b2);
  Vec skip = x;
  if (in != out) {
    Vec bs = param(w, "r.conv_shortcut.bias");
    skip = conv2d(x, n, in, h, wd, param(w, "r.conv_shortcut.weight"), out, 1, 1, 0, &bs);
  }
  return add(y, skip);
}

void check(int64_t in, int64_t out, int64_t tdim) {
  SpecRecorder rec;
  ASSERT_TRUE(ResnetBlock2D::bind(rec, "r", in, out, tdim, 2, 1e-5f).ok());
  auto w = random_weights(rec.specs(), 7);
  auto be = cpu_backend();
  // The loader owns the uploaded weights for the block's lifetime.
  WeightLoader loader(*w, *be, kernels::DType::kF32);
  auto blk = ResnetBlock2D::bind(loader, "r", in, out, tdim, 2, 1e-5f);
  ASSERT_TRUE(blk.ok()) << blk.status().ToString();
  EXPECT_TRUE(loader.unused_names().empty());
  std::mt19937 rng(3);
  const int64_t n = 2, h = 5, wd = 4;
  Vec x = random_vec(rng, static_cast<size_t>(n * in * h * wd));
  Vec t = random_vec(rng, static_cast<size_t>(n * (tdim > 0 ? tdim : 1)));
  DeviceTensor xd = upload(*be, x, {n, in, h, wd});
  DeviceTensor td = upload(*be, map(t, silu), {n, tdim > 0 ? tdim : 1});
  auto y = blk->forward(*be, xd.t, tdim > 0 ? &td.t : nullptr);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->t.shape_vec(), (std::vector<int64_t>{n, out, h, wd}));
  Vec ref = naive_resnet(*w, x, tdim > 0 ? &t : nullptr, n, in, out, h, wd, tdim, 2, 1e-5f);
  EXPECT_LT(max_abs_diff(download(*be, y->t), ref), 2e-4);
}

TEST(ResnetBlock2DTest, ChannelChangeWithTimeEmbeddingMatchesNaive) { check(4, 6, 5); }
TEST(ResnetBlock2DTest, SameChannelsWithoutTimeEmbeddingMatchesNaive) { check(4, 4, 0); }

// forward_consuming: the bits of forward(), holding less: with a conv
// shortcut x is normalised in place after the shortcut has read it (x + s +
// conv1's output, 64 + 32 + 32 channels, against forward()'s x + norm1 +
// conv1's output, 64 + 64 + 32), and norm2 runs in place.
TEST(ResnetBlock2DTest, ConsumingForwardIsTheSameBitsInLessMemory) {
  for (int64_t out : {32, 64}) {
    SCOPED_TRACE(out);
    const int64_t in = 64, n = 1, h = 32, wd = 32;
    SpecRecorder rec;
    ASSERT_TRUE(ResnetBlock2D::bind(rec, "r", in, out, 0, 32, 1e-6f).ok());
    auto w = random_weights(rec.specs(), 11);
    auto be = cpu_backend();
    WeightLoader loader(*w, *be, kernels::DType::kF32);
    auto blk = ResnetBlock2D::bind(loader, "r", in, out, 0, 32, 1e-6f);
    ASSERT_TRUE(blk.ok()) << blk.status().ToString();
    std::mt19937 rng(5);
    Vec x = random_vec(rng, static_cast<size_t>(n * in * h * wd));
    DeviceTensor xd = upload(*be, x, {n, in, h, wd});
    int64_t base = be->bytes_in_use();
    be->reset_peak();
    auto y = blk->forward(*be, xd.t, nullptr);
    ASSERT_TRUE(y.ok()) << y.status().ToString();
    const int64_t held = be->peak_bytes() - base;
    xd = DeviceTensor{};
    DeviceTensor x2 = upload(*be, x, {n, in, h, wd});
    base = be->bytes_in_use();
    be->reset_peak();
    auto y2 = blk->forward_consuming(*be, std::move(x2), nullptr);
    ASSERT_TRUE(y2.ok()) << y2.status().ToString();
    const int64_t held_consuming = be->peak_bytes() - base;
    EXPECT_EQ(download(*be, y2->t), download(*be, y->t));
    const int64_t channel = h * wd * 4;
    if (out != in) {
      EXPECT_EQ(held, (in + out) * channel);  // norm1's output and conv1's
      EXPECT_EQ(held_consuming, 2 * out * channel);  // the shortcut's and conv1's, x normalised in place
    } else {
      EXPECT_LE(held_consuming, held);  // x is the residual: kept, norm2 in place
    }
  }
}

TEST(ResnetBlock2DTest, DeclaresDiffusersKeys) {
  SpecRecorder rec;
  ASSERT_TRUE(ResnetBlock2D::bind(rec, "down_blocks.0.resnets.1", 4, 8, 16, 2, 1e-5f).ok());
  std::vector<std::string> names;
  for (const auto& s : rec.specs()) names.push_back(s.name);
  const std::vector<std::string> want = {
      "down_blocks.0.resnets.1.norm1.weight",         "down_blocks.0.resnets.1.norm1.bias",
      "down_blocks.0.resnets.1.conv1.weight",         "down_blocks.0.resnets.1.conv1.bias",
      "down_blocks.0.resnets.1.time_emb_proj.weight", "down_blocks.0.resnets.1.time_emb_proj.bias",
      "down_blocks.0.resnets.1.norm2.weight",         "down_blocks.0.resnets.1.norm2.bias",
      "down_blocks.0.resnets.1.conv2.weight",         "down_blocks.0.resnets.1.conv2.bias",
      "down_blocks.0.resnets.1.conv_shortcut.weight", "down_blocks.0.resnets.1.conv_shortcut.bias"};
  EXPECT_EQ(names, want);
}

}  // namespace
}  // namespace hipq::engine
