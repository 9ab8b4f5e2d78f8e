#include "engine/checkpoint_keys.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

HostTensor iota(std::vector<int64_t> shape, float start = 0) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return HostTensor::from_f32(std::move(v), std::move(shape));
}

class CheckpointKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hipq_ckpt_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::shared_ptr<const SafetensorsFile> write(const std::vector<std::pair<std::string, HostTensor>>& t) {
    const auto p = dir_ / "model.safetensors";
    EXPECT_TRUE(write_safetensors(p, t).ok());
    auto f = SafetensorsFile::open(p);
    EXPECT_TRUE(f.ok());
    return *f;
  }
  fs::path dir_;
};

TEST_F(CheckpointKeysTest, SdxlKeysMapOntoDiffusersNames) {
  const int d = 4;
  auto file = write({
      {"model.diffusion_model.input_blocks.0.0.weight", iota({2, 4, 3, 3})},
      {"model.diffusion_model.input_blocks.1.0.in_layers.2.weight", iota({2, 2, 3, 3})},
      {"model.diffusion_model.input_blocks.3.0.op.weight", iota({2, 2, 3, 3})},
      {"model.diffusion_model.input_blocks.4.1.transformer_blocks.0.attn2.to_k.weight", iota({2, 8})},
      {"model.diffusion_model.input_blocks.4.0.skip_connection.weight", iota({2, 2, 1, 1})},
      {"model.diffusion_model.middle_block.2.emb_layers.1.bias", iota({2})},
      {"model.diffusion_model.output_blocks.2.1.conv.weight", iota({2, 2, 3, 3})},
      {"model.diffusion_model.output_blocks.4.1.proj_out.weight", iota({2, 2})},
      {"model.diffusion_model.output_blocks.5.2.conv.bias", iota({2})},
      {"model.diffusion_model.label_emb.0.2.weight", iota({2, 2})},
      {"model.diffusion_model.time_embed.0.bias", iota({2})},
      {"model.diffusion_model.out.2.weight", iota({4, 2, 3, 3})},
      {"first_stage_model.decoder.up.0.block.1.nin_shortcut.weight", iota({2, 2, 1, 1})},
      {"first_stage_model.decoder.up.3.upsample.conv.weight", iota({2, 2, 3, 3})},
      {"first_stage_model.decoder.mid.attn_1.q.weight", iota({2, 2, 1, 1})},
      {"first_stage_model.encoder.norm_out.weight", iota({2})},
      {"first_stage_model.post_quant_conv.bias", iota({4})},
      {"conditioner.embedders.0.transformer.text_model.final_layer_norm.weight", iota({d})},
      {"conditioner.embedders.1.model.transformer.resblocks.0.attn.in_proj_weight", iota({3 * d, d})},
      {"conditioner.embedders.1.model.transformer.resblocks.0.attn.in_proj_bias", iota({3 * d}, 100)},
      {"conditioner.embedders.1.model.transformer.resblocks.0.mlp.c_fc.weight", iota({8, d})},
      {"conditioner.embedders.1.model.text_projection", iota({d, 3})},
      {"conditioner.embedders.1.model.positional_embedding", iota({7, d})},
      {"conditioner.embedders.1.model.logit_scale", iota({1})},
  });
  auto m = map_checkpoint(file);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sdxl");
  const auto& unet = *m->components.at("unet");
  for (const char* n : {"conv_in.weight", "down_blocks.0.resnets.0.conv1.weight", "down_blocks.0.downsamplers.0.conv.weight",
                        "down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight",
                        "down_blocks.1.resnets.0.conv_shortcut.weight", "mid_block.resnets.1.time_emb_proj.bias",
                        "up_blocks.0.upsamplers.0.conv.weight", "up_blocks.1.attentions.1.proj_out.weight",
                        "up_blocks.1.upsamplers.0.conv.bias", "add_embedding.linear_2.weight",
                        "time_embedding.linear_1.bias", "conv_out.weight"})
    EXPECT_TRUE(unet.contains(n)) << n;
  const auto& vae = *m->components.at("vae");
  for (const char* n : {"decoder.up_blocks.3.resnets.1.conv_shortcut.weight", "decoder.up_blocks.0.upsamplers.0.conv.weight",
                        "decoder.mid_block.attentions.0.to_q.weight", "encoder.conv_norm_out.weight",
                        "post_quant_conv.bias"})
    EXPECT_TRUE(vae.contains(n)) << n;
  EXPECT_EQ(vae.meta("decoder.mid_block.attentions.0.to_q.weight")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(vae.get("decoder.mid_block.attentions.0.to_q.weight")->to_f32(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_TRUE(m->components.at("text_encoder")->contains("text_model.final_layer_norm.weight"));

  const auto& te2 = *m->components.at("text_encoder_2");
  EXPECT_FALSE(te2.contains("logit_scale"));
  // in_proj_weight rows [0,d) -> q, [d,2d) -> k, [2d,3d) -> v.
  auto k = te2.get("text_model.encoder.layers.0.self_attn.k_proj.weight");
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  EXPECT_EQ(k->shape, (std::vector<int64_t>{d, d}));
  EXPECT_EQ(k->to_f32()[0], float(d * d));
  EXPECT_EQ(te2.get("text_model.encoder.layers.0.self_attn.v_proj.bias")->to_f32(),
            (std::vector<float>{108, 109, 110, 111}));
  EXPECT_TRUE(te2.contains("text_model.encoder.layers.0.mlp.fc1.weight"));
  EXPECT_TRUE(te2.contains("text_model.embeddings.position_embedding.weight"));
  // text_projection [d, 3] becomes the Linear weight [3, d].
  auto proj = te2.get("text_projection.weight");
  ASSERT_TRUE(proj.ok());
  EXPECT_EQ(proj->shape, (std::vector<int64_t>{3, d}));
  EXPECT_EQ(proj->to_f32(), (std::vector<float>{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}));
  EXPECT_EQ(te2.meta("text_projection.weight")->shape, (std::vector<int64_t>{3, d}));
  auto missing = te2.get("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("model.safetensors"), std::string::npos);
}

TEST_F(CheckpointKeysTest, Sd1KeysAndUnknownLayouts) {
  auto file = write({{"model.diffusion_model.input_blocks.0.0.bias", iota({2})},
                     {"cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", iota({5, 2})}});
  auto m = map_checkpoint(file);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->family, "sd1");
  EXPECT_TRUE(m->components.at("text_encoder")->contains("text_model.embeddings.token_embedding.weight"));
  EXPECT_EQ(m->components.count("text_encoder_2"), 0u);

  auto other = map_checkpoint(write({{"some.other.weight", iota({2})}}));
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
