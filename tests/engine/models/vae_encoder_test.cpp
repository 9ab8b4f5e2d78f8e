#include "engine/models/vae_encoder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/synthetic.h"
#include "naive_ops.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

// A small AutoencoderKL: two levels (one downsample), 8 groups, attention in the mid block.
VaeConfig small_config() {
  VaeConfig c;
  c.block_out_channels = {16, 32};
  c.layers_per_block = 2;
  c.norm_num_groups = 8;
  c.sample_size = 32;
  return c;
}

// ---- the encoder written again from diffusers' modules, in naive loops ----------
struct Naive {
  const WeightSource& w;
  int groups;

  Vec p(const std::string& name) const { return param(w, name); }
  Vec norm(const Vec& x, int64_t c, int64_t s, const std::string& pre, bool act) const {
    Vec y = group_norm(x, 1, c, s, groups, 1e-6f, p(pre + ".weight"), p(pre + ".bias"));
    return act ? map(y, silu) : y;
  }
  Vec conv(const Vec& x, int64_t c, int64_t h, int64_t wd, const std::string& pre, int64_t o, int k, int stride,
           int pad) const {
    Vec b = p(pre + ".bias");
    return conv2d(x, 1, c, h, wd, p(pre + ".weight"), o, k, stride, pad, &b);
  }
  Vec resnet(const Vec& x, int64_t in, int64_t out, int64_t h, int64_t wd, const std::string& pre) const {
    Vec t = conv(norm(x, in, h * wd, pre + ".norm1", true), in, h, wd, pre + ".conv1", out, 3, 1, 1);
    t = conv(norm(t, out, h * wd, pre + ".norm2", true), out, h, wd, pre + ".conv2", out, 3, 1, 1);
    Vec skip = in == out ? x : conv(x, in, h, wd, pre + ".conv_shortcut", out, 1, 1, 0);
    return add(t, skip);
  }
  // F.pad(x, (0, 1, 0, 1)) then a 3x3 stride-2 conv without padding.
  Vec downsample(const Vec& x, int64_t c, int64_t h, int64_t wd, const std::string& pre) const {
    Vec padded(static_cast<size_t>(c * (h + 1) * (wd + 1)), 0.0f);
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t xx = 0; xx < wd; ++xx) padded[(ch * (h + 1) + y) * (wd + 1) + xx] = x[(ch * h + y) * wd + xx];
    return conv(padded, c, h + 1, wd + 1, pre, c, 3, 2, 0);
  }
  Vec attention_block(const Vec& x, int64_t c, int64_t s, const std::string& pre) const {
    Vec seq = transpose12(norm(x, c, s, pre + ".group_norm", false), 1, c, s);  // [S, C]
    Vec bq = p(pre + ".to_q.bias"), bk = p(pre + ".to_k.bias"), bv = p(pre + ".to_v.bias"), bo = p(pre + ".to_out.0.bias");
    Vec q = linear(seq, s, c, p(pre + ".to_q.weight"), c, &bq);
    Vec k = linear(seq, s, c, p(pre + ".to_k.weight"), c, &bk);
    Vec v = linear(seq, s, c, p(pre + ".to_v.weight"), c, &bv);
    Vec a = linear(attention(q, k, v, 1, s, s, 1, c, false), s, c, p(pre + ".to_out.0.weight"), c, &bo);
    return add(transpose12(a, 1, s, c), x);
  }
  Vec encode(const Vec& img, const VaeConfig& cfg, int64_t h, int64_t wd) const {
    int64_t ch = cfg.block_out_channels[0];
    Vec x = conv(img, 3, h, wd, "encoder.conv_in", ch, 3, 1, 1);
    for (size_t i = 0; i < cfg.block_out_channels.size(); ++i) {
      const std::string pre = "encoder.down_blocks." + std::to_string(i);
      const int64_t out = cfg.block_out_channels[i];
      for (int j = 0; j < cfg.layers_per_block; ++j) {
        x = resnet(x, ch, out, h, wd, pre + ".resnets." + std::to_string(j));
        ch = out;
      }
      if (i + 1 < cfg.block_out_channels.size()) {
        x = downsample(x, ch, h, wd, pre + ".downsamplers.0.conv");
        h /= 2;
        wd /= 2;
      }
    }
    x = resnet(x, ch, ch, h, wd, "encoder.mid_block.resnets.0");
    x = attention_block(x, ch, h * wd, "encoder.mid_block.attentions.0");
    x = resnet(x, ch, ch, h, wd, "encoder.mid_block.resnets.1");
    x = conv(norm(x, ch, h * wd, "encoder.conv_norm_out", true), ch, h, wd, "encoder.conv_out", 8, 3, 1, 1);
    return conv(x, 8, h, wd, "quant_conv", 8, 1, 1, 0);
  }
};

TEST(VaeEncoderTest, MomentsEqualTheNaiveEncoderOnSmallShapes) {
  const VaeConfig cfg = small_config();
  auto w = random_weights(VaeDecoder::parameters(cfg).value(), 11);
  auto be = cpu_backend();
  auto enc = VaeEncoder::load(cfg, *w, *be, kernels::DType::kF32);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  const Naive naive{*w, cfg.norm_num_groups};
  std::mt19937 rng(5);
  for (auto [h, wd] : {std::pair<int64_t, int64_t>{8, 12}, {6, 10}}) {
    Vec img = random_vec(rng, static_cast<size_t>(3 * h * wd), 0.5f);
    DeviceTensor x = upload(*be, img, {1, 3, h, wd});
    auto moments = enc->encode(*be, x.t);
    ASSERT_TRUE(moments.ok()) << moments.status().ToString();
    EXPECT_EQ(moments->t.shape_vec(), (std::vector<int64_t>{1, 8, h / 2, wd / 2}));
    const Vec ref = naive.encode(img, cfg, h, wd);
    double scale = 0;
    for (float v : ref) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    const double err = max_abs_diff(download(*be, moments->t), ref);
    EXPECT_LT(err, 1e-4 * std::max(1.0, scale)) << h << "x" << wd << " (outputs up to " << scale << ")";
    std::printf("encoder %lldx%lld vs naive: max abs %.3g of %.3g\n", static_cast<long long>(h),
                static_cast<long long>(wd), err, scale);
  }
}

TEST(VaeEncoderTest, RefusesImagesThatAreNotMultiplesOfTheFactor) {
  const VaeConfig cfg = small_config();
  auto w = random_weights(VaeDecoder::parameters(cfg).value(), 11);
  auto be = cpu_backend();
  auto enc = VaeEncoder::load(cfg, *w, *be, kernels::DType::kF32);
  ASSERT_TRUE(enc.ok());
  DeviceTensor x = upload(*be, Vec(3 * 7 * 8, 0.0f), {1, 3, 7, 8});
  auto out = enc->encode(*be, x.t);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("multiples of 2"), std::string::npos) << out.status().message();
  DeviceTensor four = upload(*be, Vec(4 * 8 * 8, 0.0f), {1, 4, 8, 8});
  EXPECT_EQ(enc->encode(*be, four.t).status().code(), StatusCode::kInvalidArgument);
}

TEST(VaeEncoderTest, AFileWithoutTheEncoderIsRefusedByName) {
  const VaeConfig cfg = small_config();
  auto all = random_weights(VaeDecoder::parameters(cfg).value(), 11);
  auto decoder_only = std::make_shared<InMemoryWeightSource>("decoder-only vae");
  const std::vector<ParamSpec> specs = VaeDecoder::parameters(cfg).value();
  for (const ParamSpec& s : specs)
    if (s.name.rfind("encoder.", 0) != 0 && s.name.rfind("quant_conv", 0) != 0)
      decoder_only->add(s.name, all->get(s.name).value());
  auto be = cpu_backend();
  auto enc = VaeEncoder::load(cfg, *decoder_only, *be, kernels::DType::kF32);
  ASSERT_FALSE(enc.ok());
  EXPECT_NE(enc.status().message().find("encoder.conv_in"), std::string::npos) << enc.status().message();
  EXPECT_NE(enc.status().message().find("img2img"), std::string::npos) << enc.status().message();
}

TEST(VaeEncoderTest, SampleIsMeanPlusStdTimesNoiseWithLogvarClamped) {
  // moments [1, 2, 1, 2]: mean (1, -2), logvar (0, 100 -> clamped to 20).
  const Vec moments{1.0f, -2.0f, 0.0f, 100.0f};
  auto z = sample_latent_distribution(moments, {1, 2, 1, 2}, {0.5f, 1e-4f});
  ASSERT_TRUE(z.ok()) << z.status().ToString();
  EXPECT_FLOAT_EQ((*z)[0], 1.0f + 1.0f * 0.5f);
  EXPECT_FLOAT_EQ((*z)[1], -2.0f + std::exp(10.0f) * 1e-4f);
  EXPECT_EQ(sample_latent_distribution(moments, {1, 2, 1, 2}, {0.5f}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sample_latent_distribution(moments, {1, 3, 1, 2}, {0.5f, 1.0f}).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(VaeEncoderTest, EncodeThenDecodeOfASmoothImageIsFiniteAndDeterministic) {
  auto m = make_synthetic_model("tiny-sdxl");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto cfg = VaeConfig::from_json(m->configs.at("vae"), "vae/config.json");
  ASSERT_TRUE(cfg.ok());
  auto be = cpu_backend();
  auto enc = VaeEncoder::load(*cfg, *m->weights.at("vae"), *be, kernels::DType::kF32);
  auto dec = VaeDecoder::load(*cfg, *m->weights.at("vae"), *be, kernels::DType::kF32);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  const int64_t s = 32;
  Vec img(static_cast<size_t>(3 * s * s));
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < s; ++y)
      for (int64_t x = 0; x < s; ++x)
        img[(c * s + y) * s + x] = std::sin(0.2f * static_cast<float>(x + c)) * std::cos(0.15f * static_cast<float>(y));
  auto round_trip = [&]() {
    DeviceTensor x = upload(*be, img, {1, 3, s, s});
    DeviceTensor moments = enc->encode(*be, x.t).value();
    Vec mean = download(*be, moments.t.slice(1, 0, 4));
    DeviceTensor z = upload(*be, mean, {1, 4, s / 8, s / 8});
    return download(*be, dec->decode(*be, z.t).value().t);
  };
  const Vec a = round_trip();
  const Vec b = round_trip();
  ASSERT_EQ(a.size(), img.size());
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace hipq::engine
