// A single-file checkpoint and the diffusers folder it was made from give the
// same outputs end to end: identical latents and identical PNG bytes, per
// family. The checkpoints are written in the original key layout by
// tests/engine/original_checkpoint.cpp from hipq's tiny synthetic models.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "engine/export.h"
#include "spec/png.h"
#include "engine/decoded_image.h"
#include "engine/model_files.h"
#include "engine/pipeline.h"
#include "engine/synthetic.h"
#include "tests/engine/original_checkpoint.h"

namespace hipq::engine {
namespace {

using spec::GenerationSettings;
using spec::encode_png;
using spec::read_png;

namespace fs = std::filesystem;

// What a toy-width checkpoint cannot imply from its shapes (the families'
// rules are 64-wide heads, or 8 heads for SD 1.x; the tiny models use 2 and 4).
std::map<std::string, std::string> tiny_architecture_metadata(const ModelComponents& folder) {
  std::map<std::string, std::string> meta;
  meta["hipq.config.unet"] =
      nlohmann::json{{"attention_head_dim", folder.configs.at("unet").at("attention_head_dim")}}.dump();
  for (const char* te : {"text_encoder", "text_encoder_2"}) {
    auto it = folder.configs.find(te);
    if (it == folder.configs.end()) continue;
    meta[std::string("hipq.config.") + te] =
        nlohmann::json{{"num_attention_heads", it->second.at("num_attention_heads")}}.dump();
  }
  return meta;
}

class SingleFileTest : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("hipq_single_file_test_" + std::to_string(::getpid()));
    fs::create_directories(root_);
    auto b = kernels::make_backend("cpu");
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value().release();
  }
  static void TearDownTestSuite() {
    delete backend_;
    backend_ = nullptr;
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // The synthetic model exported as a diffusers folder, and the checkpoint
  // written from that folder (with `metadata`, or the tiny architecture's).
  struct Pair {
    fs::path folder, checkpoint;
    ModelComponents folder_model;
  };
  static Pair make_models(const std::string& name, std::optional<std::map<std::string, std::string>> metadata = {},
                        const std::string& tag = "") {
    Pair p;
    p.folder = root_ / name;
    if (!fs::exists(p.folder / "model_index.json")) {
      auto syn = make_synthetic_model(name);
      EXPECT_TRUE(syn.ok()) << syn.status().ToString();
      Status st = export_diffusers_folder(*syn, p.folder);
      EXPECT_TRUE(st.ok()) << st.ToString();
    }
    auto folder = open_model(p.folder.string());
    EXPECT_TRUE(folder.ok()) << folder.status().ToString();
    p.folder_model = *folder;
    p.checkpoint = root_ / (name + tag + ".safetensors");
    Status st = testing::write_original_checkpoint(*folder, p.checkpoint,
                                                   metadata ? *metadata : tiny_architecture_metadata(*folder));
    EXPECT_TRUE(st.ok()) << st.ToString();
    return p;
  }

  static fs::path root_;
  static kernels::Backend* backend_;
};

fs::path SingleFileTest::root_;
kernels::Backend* SingleFileTest::backend_ = nullptr;

TEST_P(SingleFileTest, CheckpointAndItsFolderGiveIdenticalLatentsAndPngBytes) {
  const std::string name = GetParam();
  Pair p = make_models(name);
  auto ckpt = open_model(p.checkpoint.string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ckpt->family, p.folder_model.family);
  // The settings that decide the picture, as the folder's config files say them.
  EXPECT_EQ(ckpt->configs.at("vae").at("scaling_factor"), p.folder_model.configs.at("vae").at("scaling_factor"));
  EXPECT_EQ(ckpt->configs.at("vae").at("force_upcast"), p.folder_model.configs.at("vae").at("force_upcast"));
  EXPECT_EQ(ckpt->configs.at("scheduler").at("prediction_type"),
            p.folder_model.configs.at("scheduler").at("prediction_type"));

  GenerationSettings s;
  s.prompt = "a red fox sleeping in the snow";
  s.negative_prompt = name == "tiny-sdxl" ? "" : "blurry";
  s.seed = 7;
  s.width = 64;
  s.height = 64;
  s.steps = 3;
  s.guidance = 5.0f;
  s.sampler = "euler";
  auto from_folder = Pipeline::load(p.folder.string(), *backend_);
  ASSERT_TRUE(from_folder.ok()) << from_folder.status().ToString();
  auto from_file = Pipeline::load(p.checkpoint.string(), *backend_);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  EXPECT_EQ((*from_file)->family(), (*from_folder)->family());
  auto a = (*from_folder)->generate(s);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto b = (*from_file)->generate(s);
  ASSERT_TRUE(b.ok()) << b.status().ToString();

  ASSERT_EQ(a->latent_shape, b->latent_shape);
  ASSERT_EQ(a->latent.size(), b->latent.size());
  EXPECT_EQ(std::memcmp(a->latent.data(), b->latent.data(), a->latent.size() * sizeof(float)), 0)
      << name << ": the checkpoint's latent differs from the folder's";
  auto png_a = encode_png({a->width, a->height, a->rgb});
  auto png_b = encode_png({b->width, b->height, b->rgb});
  ASSERT_TRUE(png_a.ok() && png_b.ok());
  EXPECT_TRUE(*png_a == *png_b) << name << ": the checkpoint's PNG (" << png_b->size()
                                << " bytes) differs from the folder's (" << png_a->size() << " bytes)";
}

INSTANTIATE_TEST_SUITE_P(Families, SingleFileTest, ::testing::Values("tiny-sd15", "tiny-sd2", "tiny-sdxl"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

using SingleFileConfigTest = SingleFileTest;

TEST_F(SingleFileConfigTest, SdxlSettingsComeFromTheFamilyWithoutMetadata) {
  Pair p = make_models("tiny-sdxl", std::map<std::string, std::string>{}, "-bare");
  auto m = open_model(p.checkpoint.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sdxl");
  EXPECT_DOUBLE_EQ(m->configs.at("vae").at("scaling_factor").get<double>(), 0.13025);  // not SD 1's 0.18215
  EXPECT_TRUE(m->configs.at("vae").at("force_upcast").get<bool>());
  EXPECT_TRUE(m->configs.at("vae").at("shift_factor").is_null());
  EXPECT_EQ(m->configs.at("vae").at("sample_size"), 1024);
  EXPECT_EQ(m->configs.at("unet").at("addition_time_embed_dim"), 8);  // (80 - 32) / 6
  EXPECT_EQ(m->configs.at("unet").at("sample_size"), 128);
  EXPECT_EQ(m->configs.at("text_encoder").at("hidden_act"), "quick_gelu");
  EXPECT_EQ(m->configs.at("text_encoder_2").at("hidden_act"), "gelu");
  EXPECT_EQ(m->configs.at("text_encoder_2").at("architectures")[0], "CLIPTextModelWithProjection");
  EXPECT_EQ(m->configs.at("scheduler").at("prediction_type"), "epsilon");
  EXPECT_EQ(m->configs.at("model_index").at("_class_name"), "StableDiffusionXLPipeline");
  EXPECT_TRUE(m->warnings.empty());
}

TEST_F(SingleFileConfigTest, Sd2DropsTheLastTextLayerAndWarnsAboutThePredictionType) {
  Pair p = make_models("tiny-sd2");
  auto m = open_model(p.checkpoint.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->family, "sd2");
  EXPECT_EQ(m->configs.at("text_encoder").at("num_hidden_layers"), 2);  // 3 resblocks in the file
  EXPECT_EQ(m->configs.at("text_encoder").at("hidden_act"), "gelu");
  EXPECT_EQ(m->configs.at("scheduler").at("prediction_type"), "v_prediction");
  EXPECT_TRUE(m->configs.at("unet").at("use_linear_projection").get<bool>());
  ASSERT_EQ(m->warnings.size(), 2u);
  EXPECT_NE(m->warnings[0].find("prediction_type"), std::string::npos) << m->warnings[0];
  EXPECT_NE(m->warnings[0].find("assumed v_prediction"), std::string::npos) << m->warnings[0];
  EXPECT_NE(m->warnings[1].find("sample_size"), std::string::npos) << m->warnings[1];
  // hipq's own metadata pins the scheduler as a folder's config would.
  auto meta = tiny_architecture_metadata(make_models("tiny-sd2").folder_model);
  meta["hipq.config.scheduler"] = R"({"prediction_type": "epsilon", "timestep_spacing": "trailing"})";
  Pair pinned = make_models("tiny-sd2", meta, "-pinned");
  auto e = open_model(pinned.checkpoint.string());
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->configs.at("scheduler").at("prediction_type"), "epsilon");
  EXPECT_EQ(e->configs.at("scheduler").at("timestep_spacing"), "trailing");
  ASSERT_EQ(e->warnings.size(), 1u);
  EXPECT_NE(e->warnings[0].find("sample_size"), std::string::npos);
}

TEST_F(SingleFileConfigTest, ModelSpecMetadataPinsTheSd2Variant) {
  auto folder = make_models("tiny-sd2").folder_model;
  auto meta = tiny_architecture_metadata(folder);
  meta["modelspec.architecture"] = "stable-diffusion-v2-512";
  Pair base = make_models("tiny-sd2", meta, "-512");
  auto m = open_model(base.checkpoint.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->configs.at("scheduler").at("prediction_type"), "epsilon");
  EXPECT_EQ(m->configs.at("vae").at("sample_size"), 512);
  EXPECT_EQ(m->configs.at("unet").at("sample_size"), 64);
  EXPECT_TRUE(m->warnings.empty()) << m->warnings[0];

  meta.erase("modelspec.architecture");
  meta["modelspec.prediction_type"] = "v";
  meta["modelspec.resolution"] = "768x768";
  Pair v = make_models("tiny-sd2", meta, "-768v");
  m = open_model(v.checkpoint.string());
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->configs.at("scheduler").at("prediction_type"), "v_prediction");
  EXPECT_EQ(m->configs.at("unet").at("sample_size"), 96);
  EXPECT_TRUE(m->warnings.empty());

  meta["modelspec.prediction_type"] = "x0";
  Pair bad = make_models("tiny-sd2", meta, "-bad");
  auto b = open_model(bad.checkpoint.string());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kCorruption);
  EXPECT_NE(b.status().message().find("modelspec.prediction_type"), std::string::npos);
  meta["modelspec.prediction_type"] = "v";
  meta["hipq.config.vae"] = "[1]";
  Pair bad2 = make_models("tiny-sd2", meta, "-bad2");
  b = open_model(bad2.checkpoint.string());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("hipq.config.vae"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
