#include "engine/models/vae.h"

#include <gtest/gtest.h>

#include "reference_data.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

TEST(VaeConfigTest, FullSizeParameterCountMatchesDiffusers) {
  int64_t n = 0;
  const std::vector<ParamSpec> specs = VaeDecoder::parameters(VaeConfig::sdxl()).value();
  for (const auto& s : specs) {
    int64_t k = 1;
    for (int64_t d : s.shape) k *= d;
    n += k;
  }
  EXPECT_EQ(n, 83653863);  // diffusers AutoencoderKL (SD / SDXL), encoder included
}

TEST(VaeConfigTest, JsonRoundTripAndDerivation) {
  const VaeConfig c = VaeConfig::sdxl();
  auto back = VaeConfig::from_json(c.to_json(), "vae/config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->to_json(), c.to_json());
  EXPECT_DOUBLE_EQ(back->scaling_factor, 0.13025);
  SyntheticWeightSource w("w", "vae", 0, VaeDecoder::parameters(c).value());
  auto d = VaeConfig::from_weights(w, "sdxl");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->block_out_channels, c.block_out_channels);
  EXPECT_EQ(d->layers_per_block, 2);
  EXPECT_EQ(d->upscale(), 8);
  EXPECT_EQ(d->to_json(), c.to_json());  // SDXL's scaling factor and size, not SD 1's
  auto sd1 = VaeConfig::from_weights(w, "sd1");
  ASSERT_TRUE(sd1.ok());
  EXPECT_DOUBLE_EQ(sd1->scaling_factor, 0.18215);
  EXPECT_EQ(sd1->sample_size, 512);
  EXPECT_EQ(VaeConfig::from_weights(w, "sd2")->sample_size, 768);
  EXPECT_EQ(VaeConfig::from_weights(w, "").status().code(), StatusCode::kInvalidArgument);
}

void check(const std::string& name, const VaeTiling& tiling, const std::string& key, kernels::DType dt, double bound) {
  Reference ref = Reference::open(name);
  ASSERT_TRUE(ref.file);
  auto cfg = VaeConfig::from_json(ref.model.configs.at("vae"), "vae/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  auto be = cpu_backend();
  auto vae = VaeDecoder::load(*cfg, *ref.model.weights.at("vae"), *be, dt);
  ASSERT_TRUE(vae.ok()) << vae.status().ToString();
  DeviceTensor z = upload(*be, ref.values("vae.latent"), ref.shape("vae.latent"));
  auto out = vae->decode(*be, z.t, tiling);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->t.shape_vec(), ref.shape(key));
  const double err = max_abs_diff(download(*be, out->t), ref.values(key));
  EXPECT_LT(err, bound);
  std::printf("%s %s (%s) vs diffusers: max abs %.3g\n", name.c_str(), key.c_str(),
              std::string(kernels::dtype_name(dt)).c_str(), err);
}

// Stated bounds: fp32 max abs 5e-5 (outputs span about ±2.5); fp16 2e-2.
TEST(VaeReferenceTest, TinySdxlDecodeMatchesDiffusers) { check("tiny-sdxl", {}, "vae.decoded", kernels::DType::kF32, 5e-5); }
TEST(VaeReferenceTest, TinySd15DecodeMatchesDiffusers) { check("tiny-sd15", {}, "vae.decoded", kernels::DType::kF32, 5e-5); }
TEST(VaeReferenceTest, TiledDecodeMatchesDiffusersTiledDecode) {
  VaeTiling t;
  t.enabled = true;
  t.tile_sample_size = 32;
  check("tiny-sdxl", t, "vae.decoded_tiled_32", kernels::DType::kF32, 5e-5);
  check("tiny-sd15", t, "vae.decoded_tiled_32", kernels::DType::kF32, 5e-5);
}
TEST(VaeReferenceTest, TilingAboveTheLatentSizeIsTheUntiledDecode) {
  VaeTiling t;
  t.enabled = true;  // tile = config sample_size (64 px) = the whole latent: no split, as diffusers
  check("tiny-sdxl", t, "vae.decoded", kernels::DType::kF32, 5e-5);
}
TEST(VaeReferenceTest, HalfPrecisionDecodeIsClose) {
  check("tiny-sdxl", {}, "vae.decoded", kernels::DType::kF16, 2e-2);
}

TEST(VaeDecoderTest, RejectsWrongLatentChannels) {
  auto m = make_synthetic_model("tiny-sd15");
  ASSERT_TRUE(m.ok());
  auto cfg = VaeConfig::from_json(m->configs.at("vae"), "vae/config.json");
  auto be = cpu_backend();
  auto vae = VaeDecoder::load(*cfg, *m->weights.at("vae"), *be, kernels::DType::kF32);
  ASSERT_TRUE(vae.ok());
  DeviceTensor z = upload(*be, Vec(3 * 4 * 4, 0.0f), {1, 3, 4, 4});
  auto out = vae->decode(*be, z.t);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("latent"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
