#include "engine/models/clip_text.h"

#include <gtest/gtest.h>

#include "naive_ops.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

ClipTextConfig small_config(bool projection, const std::string& act) {
  ClipTextConfig c;
  c.vocab_size = 50;
  c.hidden_size = 8;
  c.intermediate_size = 12;
  c.num_hidden_layers = 3;
  c.num_attention_heads = 2;
  c.max_position_embeddings = 7;
  c.hidden_act = act;
  c.projection_dim = 5;
  c.with_projection = projection;
  return c;
}

struct NaiveOut {
  Vec penultimate, last, pooled;
};

NaiveOut naive_clip(const ClipTextConfig& c, const WeightSource& w, const std::vector<int32_t>& ids, int64_t b,
                    int64_t s) {
  const int64_t d = c.hidden_size;
  Vec tok = param(w, "text_model.embeddings.token_embedding.weight");
  Vec pos = param(w, "text_model.embeddings.position_embedding.weight");
  Vec x(static_cast<size_t>(b * s * d));
  for (int64_t i = 0; i < b * s; ++i)
    for (int64_t k = 0; k < d; ++k) x[i * d + k] = tok[ids[i] * d + k] + pos[(i % s) * d + k];
  NaiveOut out;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (l == c.num_hidden_layers - 1) out.penultimate = x;
    const std::string p = "text_model.encoder.layers." + std::to_string(l);
    auto lin = [&](const Vec& v, const std::string& n, int64_t in, int64_t o) {
      Vec bias = param(w, p + n + ".bias");
      return linear(v, b * s, in, param(w, p + n + ".weight"), o, &bias);
    };
    Vec h = layer_norm(x, d, c.layer_norm_eps, param(w, p + ".layer_norm1.weight"), param(w, p + ".layer_norm1.bias"));
    Vec a = attention(lin(h, ".self_attn.q_proj", d, d), lin(h, ".self_attn.k_proj", d, d),
                      lin(h, ".self_attn.v_proj", d, d), b, s, s, c.num_attention_heads, d / c.num_attention_heads, true);
    x = add(lin(a, ".self_attn.out_proj", d, d), x);
    h = layer_norm(x, d, c.layer_norm_eps, param(w, p + ".layer_norm2.weight"), param(w, p + ".layer_norm2.bias"));
    Vec f = lin(h, ".mlp.fc1", d, c.intermediate_size);
    f = c.hidden_act == "gelu" ? map(f, gelu) : map(f, quick_gelu);
    x = add(lin(f, ".mlp.fc2", c.intermediate_size, d), x);
  }
  out.last = layer_norm(x, d, c.layer_norm_eps, param(w, "text_model.final_layer_norm.weight"),
                        param(w, "text_model.final_layer_norm.bias"));
  Vec pooled(static_cast<size_t>(b * d));
  for (int64_t i = 0; i < b; ++i) {
    int64_t am = 0;
    for (int64_t j = 1; j < s; ++j)
      if (ids[i * s + j] > ids[i * s + am]) am = j;
    for (int64_t k = 0; k < d; ++k) pooled[i * d + k] = out.last[(i * s + am) * d + k];
  }
  out.pooled = c.with_projection ? linear(pooled, b, d, param(w, "text_projection.weight"), c.projection_dim, nullptr)
                                 : pooled;
  return out;
}

void check(bool projection, const std::string& act) {
  const ClipTextConfig cfg = small_config(projection, act);
  auto specs = ClipTextModel::parameters(cfg);
  ASSERT_TRUE(specs.ok());
  auto w = random_weights(*specs, 21);
  auto be = cpu_backend();
  auto model = ClipTextModel::load(cfg, *w, *be, kernels::DType::kF32);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  // Two prompts; the second pads with id 0 after its EOS (SDXL's tokenizer_2 rule).
  const std::vector<int32_t> ids = {48, 3, 7, 49, 49, 49, 49, 48, 9, 49, 0, 0, 0, 0};
  ClipTextRequest req;
  req.penultimate = true;
  req.pooled = true;
  auto out = model->forward(*be, ids, 2, req);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  NaiveOut ref = naive_clip(cfg, *w, ids, 2, 7);
  EXPECT_LT(max_abs_diff(download(*be, out->penultimate.t), ref.penultimate), 2e-4);
  EXPECT_LT(max_abs_diff(download(*be, out->last_hidden_state.t), ref.last), 2e-4);
  EXPECT_LT(max_abs_diff(download(*be, out->pooled.t), ref.pooled), 2e-4);

  // Penultimate alone skips the last layer and gives the same values.
  ClipTextRequest only;
  only.last_hidden_state = false;
  only.penultimate = true;
  auto out2 = model->forward(*be, ids, 2, only);
  ASSERT_TRUE(out2.ok());
  EXPECT_EQ(out2->last_hidden_state.buffer.data(), nullptr);
  EXPECT_LT(max_abs_diff(download(*be, out2->penultimate.t), ref.penultimate), 2e-4);
}

TEST(ClipTextModelTest, ClipLStyleMatchesNaive) { check(false, "quick_gelu"); }
TEST(ClipTextModelTest, OpenClipStyleWithProjectionMatchesNaive) { check(true, "gelu"); }

TEST(ClipTextModelTest, RejectsOutOfVocabularyIdsAndLongSequences) {
  const ClipTextConfig cfg = small_config(false, "quick_gelu");
  auto w = random_weights(*ClipTextModel::parameters(cfg), 1);
  auto be = cpu_backend();
  auto model = ClipTextModel::load(cfg, *w, *be, kernels::DType::kF32);
  ASSERT_TRUE(model.ok());
  auto bad = model->forward(*be, {1, 2, 50}, 1, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("vocabulary"), std::string::npos);
  auto long_seq = model->forward(*be, std::vector<int32_t>(8, 1), 1, {});
  ASSERT_FALSE(long_seq.ok());
  EXPECT_NE(long_seq.status().message().find("max_position_embeddings"), std::string::npos);
}

TEST(ClipTextConfigTest, JsonRoundTripAndWeightsDerivation) {
  const ClipTextConfig big = ClipTextConfig::open_clip_bigg14();
  auto back = ClipTextConfig::from_json(big.to_json(), "text_encoder_2/config.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->to_json(), big.to_json());
  EXPECT_TRUE(back->with_projection);

  const ClipTextConfig cfg = small_config(true, "gelu");
  auto w = random_weights(*ClipTextModel::parameters(cfg), 1);
  auto derived = ClipTextConfig::from_weights(*w);
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  EXPECT_EQ(derived->num_hidden_layers, 3);
  EXPECT_EQ(derived->hidden_size, 8);
  EXPECT_EQ(derived->intermediate_size, 12);
  EXPECT_EQ(derived->projection_dim, 5);
  EXPECT_EQ(derived->max_position_embeddings, 7);

  nlohmann::json bad = big.to_json();
  bad["hidden_act"] = "relu";
  auto r = ClipTextConfig::from_json(bad, "text_encoder/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("text_encoder/config.json"), std::string::npos);
  EXPECT_NE(r.status().message().find("hidden_act"), std::string::npos);
}

TEST(ClipTextModelTest, FullSizeParameterCountsMatchTransformers) {
  auto count = [](const ClipTextConfig& c) {
    int64_t n = 0;
    const std::vector<ParamSpec> specs = ClipTextModel::parameters(c).value();
    for (const auto& s : specs) {
      int64_t k = 1;
      for (int64_t d : s.shape) k *= d;
      n += k;
    }
    return n;
  };
  // transformers' CLIPTextModel (ViT-L/14) and CLIPTextModelWithProjection
  // (bigG/14) parameter counts, position_ids buffers excluded.
  EXPECT_EQ(count(ClipTextConfig::clip_vit_l14()), 123060480);
  EXPECT_EQ(count(ClipTextConfig::open_clip_bigg14()), 694659840);
}

}  // namespace
}  // namespace hipq::engine
