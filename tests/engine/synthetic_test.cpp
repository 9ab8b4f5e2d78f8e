#include "engine/synthetic.h"

#include "engine/synthetic_weights.h"
#include "spec/synthetic_models.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

namespace hipq::engine {
namespace {

std::vector<float> get(const ModelComponents& m, const std::string& comp, const std::string& name) {
  return m.weights.at(comp)->get(name).value().to_f32();
}

TEST(SyntheticTest, SameNameSameWeightsAndHash) {
  auto a = make_synthetic_model("tiny-sdxl");
  auto b = make_synthetic_model("synthetic:tiny-sdxl@0");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->weights_sha256, b->weights_sha256);
  EXPECT_EQ(a->family, "sdxl");
  EXPECT_EQ(get(*a, "unet", "conv_in.weight"), get(*b, "unet", "conv_in.weight"));
  auto c = make_synthetic_model("tiny-sdxl@7");
  ASSERT_TRUE(c.ok());
  EXPECT_NE(a->weights_sha256, c->weights_sha256);
  EXPECT_NE(get(*a, "unet", "conv_in.weight"), get(*c, "unet", "conv_in.weight"));
  // Equal names in two components still differ.
  EXPECT_NE(get(*a, "text_encoder", "text_model.encoder.layers.0.mlp.fc1.weight"),
            get(*a, "text_encoder_2", "text_model.encoder.layers.0.mlp.fc1.weight"));
}

TEST(SyntheticTest, ValuesFollowPyTorchDefaultInit) {
  auto m = make_synthetic_model("sd15");
  ASSERT_TRUE(m.ok());
  // Linear 320 -> 1280: U(+-1/sqrt(320)).
  std::vector<float> w = get(*m, "unet", "time_embedding.linear_1.weight");
  const double bound = 1.0 / std::sqrt(320.0);
  double sum = 0, sq = 0, mx = 0;
  for (float v : w) {
    sum += v;
    sq += static_cast<double>(v) * v;
    mx = std::max(mx, static_cast<double>(std::fabs(v)));
  }
  const double n = static_cast<double>(w.size());
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.99 * bound);
  EXPECT_NEAR(sum / n, 0.0, 0.01 * bound);
  EXPECT_NEAR(std::sqrt(sq / n), bound / std::sqrt(3.0), 0.01 * bound);
  // Token embedding N(0, 0.02^2).
  std::vector<float> e = get(*m, "text_encoder", "text_model.embeddings.token_embedding.weight");
  double es = 0;
  for (float v : e) es += static_cast<double>(v) * v;
  EXPECT_NEAR(std::sqrt(es / static_cast<double>(e.size())), 0.02, 0.0005);
  for (float v : get(*m, "unet", "conv_norm_out.weight")) ASSERT_EQ(v, 1.0f);
  for (float v : get(*m, "unet", "conv_norm_out.bias")) ASSERT_EQ(v, 0.0f);
}

TEST(SyntheticTest, ValuesDoNotDependOnHowTheTensorIsSplit) {
  ParamSpec s{"x.weight", {3000000}, ParamInit::uniform_fan_in(64)};
  std::vector<float> whole(3000000), part(1000);
  fill_synthetic(s, "unet", 5, whole.data(), 3000000);
  // A tensor is a pure function of (seed, component, name, index): the
  // first elements are the same whatever the size split into threads.
  fill_synthetic(s, "unet", 5, part.data(), 1000);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin()));
}

TEST(SyntheticTest, FullSdxlIsDescribedWithoutGeneratingIt) {
  const auto start = std::chrono::steady_clock::now();
  auto m = make_synthetic_model("sdxl");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 2.0);
  auto* unet = dynamic_cast<const SyntheticWeightSource*>(m->weights.at("unet").get());
  ASSERT_NE(unet, nullptr);
  EXPECT_EQ(unet->parameter_count(), 2567463684);
  EXPECT_EQ(m->configs.at("unet")["cross_attention_dim"], 2048);
  EXPECT_EQ(m->configs.at("scheduler")["_class_name"], "EulerDiscreteScheduler");
  EXPECT_EQ(m->configs.at("model_index")["_class_name"], "StableDiffusionXLPipeline");
  EXPECT_FALSE(m->vocab.empty());
  auto meta = unet->meta("down_blocks.2.attentions.1.transformer_blocks.9.attn2.to_k.weight");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(meta->shape, (std::vector<int64_t>{1280, 2048}));
}

// SD 2.1 768-v as diffusers holds it: the UNet and the 23-layer OpenCLIP-H
// text encoder of stabilityai/stable-diffusion-2-1, v_prediction.
TEST(SyntheticTest, FullSd21IsTheSd2Family) {
  auto m = make_synthetic_model("sd21");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sd2");
  auto* unet = dynamic_cast<const SyntheticWeightSource*>(m->weights.at("unet").get());
  auto* te = dynamic_cast<const SyntheticWeightSource*>(m->weights.at("text_encoder").get());
  ASSERT_TRUE(unet && te);
  EXPECT_EQ(unet->parameter_count(), 865910724);
  EXPECT_EQ(te->parameter_count(), 340387840);
  EXPECT_EQ(m->configs.at("text_encoder")["hidden_act"], "gelu");
  EXPECT_EQ(m->configs.at("scheduler")["prediction_type"], "v_prediction");
  EXPECT_EQ(m->configs.at("vae")["sample_size"], 768);
  EXPECT_EQ(m->configs.at("unet")["sample_size"], 96);
  EXPECT_FALSE(m->weights.count("text_encoder_2"));
}

TEST(SyntheticTest, UnknownNameAndBadSeedAreClearErrors) {
  auto a = make_synthetic_model("huge-sdxl");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("tiny-sdxl"), std::string::npos) << a.status().ToString();
  auto b = make_synthetic_model("tiny-sdxl@x1");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("seed"), std::string::npos);
  auto c = make_synthetic_model("tiny-sdxl")->weights.at("unet")->get("nope.weight");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
}

// The manifest accepts the names of spec/synthetic_models.h: the engine builds
// every one of them, and its error for an unknown name lists them.
TEST(SyntheticModel, EveryNameTheSpecListsHasAnArchitecture) {
  for (const std::string& name : spec::synthetic_model_names()) {
    auto a = synthetic_architecture(name);
    EXPECT_TRUE(a.ok()) << name << ": " << a.status().ToString();
  }
  auto unknown = synthetic_architecture("tiny-sdxxl");
  ASSERT_FALSE(unknown.ok());
  for (const std::string& name : spec::synthetic_model_names()) {
    EXPECT_NE(unknown.status().message().find(name), std::string::npos) << unknown.status().message();
  }
}

}  // namespace
}  // namespace hipq::engine
