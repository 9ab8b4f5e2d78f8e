#include "engine/model_files.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/fs.h"
#include "engine/tokenizer.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

class ModelFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hipq_model_files_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void put(const fs::path& rel, const std::string& text) { ASSERT_TRUE(write_file_atomic(dir_ / rel, text).ok()); }
  void put_tensors(const fs::path& rel, const std::vector<std::pair<std::string, HostTensor>>& t) {
    ASSERT_TRUE(write_safetensors(dir_ / rel, t).ok());
  }

  // A minimal SDXL-shaped diffusers folder: a full-precision unet, an fp16-only
  // vae, a sharded text encoder, a scheduler config and tokenizer files.
  void make_folder() {
    put("model_index.json", R"({"_class_name":"StableDiffusionXLPipeline"})");
    put("unet/config.json", R"({"cross_attention_dim":2048})");
    put_tensors("unet/diffusion_pytorch_model.safetensors",
                {{"down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight",
                  HostTensor::owned(kernels::DType::kF16, {4, 2048})},
                 {"add_embedding.linear_1.weight", HostTensor::owned(kernels::DType::kF16, {4, 4})}});
    put("vae/config.json", R"({"latent_channels":4})");
    put_tensors("vae/diffusion_pytorch_model.fp16.safetensors", {{"post_quant_conv.bias", HostTensor::from_f32({1, 2, 3, 4}, {4})}});
    put("text_encoder/config.json", R"({"hidden_size":768})");
    put_tensors("text_encoder/model-00001-of-00002.safetensors", {{"a", HostTensor::from_f32({1}, {1})}});
    put_tensors("text_encoder/model-00002-of-00002.safetensors", {{"b", HostTensor::from_f32({2}, {1})}});
    put("text_encoder/model.safetensors.index.json",
        R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
    put("scheduler/scheduler_config.json", R"({"_class_name":"EulerDiscreteScheduler","steps_offset":1})");
    auto vocab = find_default_clip_vocab();
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    auto tok = ClipTokenizer::load(*vocab);
    ASSERT_TRUE(tok.ok());
    ASSERT_TRUE(tok->write_vocab_and_merges(dir_ / "tokenizer").ok());
  }
  fs::path dir_;
};

TEST_F(ModelFilesTest, OpensADiffusersFolder) {
  make_folder();
  auto m = open_model(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sdxl");
  EXPECT_EQ(m->weights.count("unet"), 1u);
  EXPECT_EQ(m->weights.at("vae")->get("post_quant_conv.bias")->to_f32()[3], 4.0f);
  EXPECT_EQ(m->weights.at("text_encoder")->get("b")->to_f32()[0], 2.0f);
  EXPECT_EQ(m->weights.count("text_encoder_2"), 0u);
  EXPECT_EQ(m->configs.at("scheduler")["steps_offset"], 1);
  EXPECT_EQ(m->configs.at("vae")["latent_channels"], 4);
  EXPECT_EQ(m->configs.count("model_index"), 1u);
  EXPECT_EQ(m->vocab.filename(), "vocab.json");
  EXPECT_EQ(m->merges.filename(), "merges.txt");
  EXPECT_EQ(m->weights_sha256.size(), 64u);
  EXPECT_EQ(open_model(dir_.string())->weights_sha256, m->weights_sha256);

  // New weights, new identity.
  put_tensors("vae/diffusion_pytorch_model.fp16.safetensors", {{"post_quant_conv.bias", HostTensor::from_f32({1, 2, 3, 5}, {4})}});
  EXPECT_NE(open_model(dir_.string())->weights_sha256, m->weights_sha256);
}

TEST_F(ModelFilesTest, FamilyFromWeightsWhenConfigIsSilent) {
  make_folder();
  put("unet/config.json", "{}");
  auto m = open_model(dir_.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sdxl");
}

// A whole checkpoint opens in single_file_test; one whose tensors do not make a
// model is refused at open (its configs are derived then), naming what is missing.
TEST_F(ModelFilesTest, AnIncompleteSingleFileCheckpointIsRefusedNamingTheTensor) {
  put_tensors("sd15.safetensors",
              {{"model.diffusion_model.input_blocks.0.0.weight", HostTensor::from_f32({1, 2}, {2})},
               {"first_stage_model.post_quant_conv.bias", HostTensor::from_f32({3}, {1})},
               {"cond_stage_model.transformer.text_model.final_layer_norm.bias", HostTensor::from_f32({4}, {1})}});
  auto m = open_model((dir_ / "sd15.safetensors").string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound) << m.status().ToString();
  EXPECT_NE(m.status().message().find("sd15.safetensors"), std::string::npos) << m.status().ToString();
  EXPECT_NE(m.status().message().find("conv_"), std::string::npos) << m.status().ToString();
}

TEST_F(ModelFilesTest, ReportsWhatIsWrong) {
  auto none = open_model((dir_ / "missing").string());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  put("model.ckpt", "pickle");
  EXPECT_EQ(open_model((dir_ / "model.ckpt").string()).status().code(), StatusCode::kInvalidArgument);
  fs::create_directories(dir_ / "empty");
  auto empty = open_model((dir_ / "empty").string());
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("model_index.json"), std::string::npos);
  make_folder();
  fs::remove(dir_ / "unet/diffusion_pytorch_model.safetensors");
  auto no_unet = open_model(dir_.string());
  ASSERT_FALSE(no_unet.ok());
  EXPECT_NE(no_unet.status().message().find("unet"), std::string::npos) << no_unet.status().ToString();
  put("unet/diffusion_pytorch_model.safetensors", "junk");
  auto junk = open_model(dir_.string());
  EXPECT_EQ(junk.status().code(), StatusCode::kCorruption);
  EXPECT_EQ(open_model("").status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ModelFilesTest, SyntheticSpecGoesToTheGenerator) {
  auto m = open_model("synthetic:tiny-sdxl");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sdxl");
  EXPECT_EQ(m->weights.count("unet"), 1u);
  EXPECT_FALSE(m->weights_sha256.empty());
  EXPECT_FALSE(open_model("synthetic:no-such-model").ok());
}

}  // namespace
}  // namespace hipq::engine
