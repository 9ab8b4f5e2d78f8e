#include "engine/export.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/fs.h"
#include "engine/model_files.h"
#include "engine/models/unet.h"
#include "engine/safetensors.h"
#include "engine/synthetic.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("hipq_export_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(read_file(p).value()); }

TEST(ExportTest, TinySd15WritesACompleteDiffusersFolder) {
  auto m = make_synthetic_model("tiny-sd15");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const fs::path out = temp_dir("sd15");
  ASSERT_TRUE(export_diffusers_folder(*m, out).ok());
  for (const char* f : {"model_index.json", "unet/config.json", "unet/diffusion_pytorch_model.safetensors",
                        "vae/config.json", "vae/diffusion_pytorch_model.safetensors", "text_encoder/config.json",
                        "text_encoder/model.safetensors", "tokenizer/vocab.json", "tokenizer/merges.txt",
                        "tokenizer/tokenizer_config.json", "tokenizer/special_tokens_map.json",
                        "scheduler/scheduler_config.json"})
    EXPECT_TRUE(fs::exists(out / f)) << f;
  EXPECT_FALSE(fs::exists(out / "text_encoder_2"));
  EXPECT_EQ(read_json(out / "model_index.json")["_class_name"], "StableDiffusionPipeline");

  // Weights read back bit-identical, every tensor present.
  auto file = SafetensorsFile::open(out / "unet" / "diffusion_pytorch_model.safetensors");
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->names(), m->weights.at("unet")->names());
  EXPECT_EQ((*file)->get("conv_in.weight")->to_f32(), m->weights.at("unet")->get("conv_in.weight")->to_f32());

  // The config parses back to the same UNet.
  auto cfg = UNetConfig::from_json(read_json(out / "unet" / "config.json"), "unet/config.json");
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->to_json(), m->configs.at("unet"));

  const nlohmann::json vocab = read_json(out / "tokenizer" / "vocab.json");
  EXPECT_EQ(vocab.size(), 49408u);
  EXPECT_EQ(vocab["!"], 0);
  EXPECT_EQ(vocab["a</w>"], 320);
  EXPECT_EQ(vocab["<|startoftext|>"], 49406);
  EXPECT_EQ(vocab["<|endoftext|>"], 49407);
  std::ifstream merges(out / "tokenizer" / "merges.txt");
  std::string first;
  std::getline(merges, first);
  EXPECT_EQ(first, "#version: 0.2");
  fs::remove_all(out);
}

TEST(ExportTest, TinySdxlHasSecondEncoderAndTokenizerPaddingWithBang) {
  auto m = make_synthetic_model("tiny-sdxl");
  ASSERT_TRUE(m.ok());
  const fs::path out = temp_dir("sdxl");
  ExportOptions o;
  o.dtype = kernels::DType::kF16;
  o.components = {"text_encoder_2"};
  ASSERT_TRUE(export_diffusers_folder(*m, out, o).ok());
  EXPECT_FALSE(fs::exists(out / "unet"));
  EXPECT_EQ(read_json(out / "tokenizer_2" / "special_tokens_map.json")["pad_token"], "!");
  EXPECT_EQ(read_json(out / "tokenizer" / "special_tokens_map.json")["pad_token"], "<|endoftext|>");
  EXPECT_EQ(read_json(out / "text_encoder_2" / "config.json")["architectures"][0], "CLIPTextModelWithProjection");
  auto file = SafetensorsFile::open(out / "text_encoder_2" / "model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->info("text_projection.weight")->dtype, kernels::DType::kF16);
  fs::remove_all(out);
}

// What hipq exports, hipq opens again as the same family (the toy models'
// cross-attention width is none of the real ones: the "text_time" conditioning,
// the pipeline class and the text encoder's activation tell).
TEST(ExportTest, ExportedFoldersOpenAgainAsTheirFamily) {
  for (const auto& [name, family] :
       {std::pair{"tiny-sdxl", "sdxl"}, std::pair{"tiny-sd15", "sd1"}, std::pair{"tiny-sd2", "sd2"}}) {
    auto m = make_synthetic_model(name);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const fs::path out = temp_dir(std::string("reopen_") + name);
    ASSERT_TRUE(export_diffusers_folder(*m, out).ok());
    auto back = open_model(out.string());
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().ToString();
    EXPECT_EQ(back->family, family) << name;
    EXPECT_EQ(back->weights.at("unet")->names(), m->weights.at("unet")->names());
    // SD 2.x's OpenCLIP tokenizer pads with "!", as diffusers' does.
    auto special = read_file(out / "tokenizer" / "special_tokens_map.json");
    ASSERT_TRUE(special.ok());
    EXPECT_EQ(nlohmann::json::parse(*special)["pad_token"], std::string(family) == "sd2" ? "!" : "<|endoftext|>");
    fs::remove_all(out);
  }
}

TEST(ExportTest, UnknownComponentIsRejected) {
  auto m = make_synthetic_model("tiny-sd15");
  ASSERT_TRUE(m.ok());
  ExportOptions o;
  o.components = {"text_encoder_2"};
  Status st = export_diffusers_folder(*m, temp_dir("bad"), o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("text_encoder_2"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
