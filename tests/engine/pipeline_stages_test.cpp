// Per-stage parity with diffusers: token ids, prompt embeddings (both text
// encoders, zero negative for SDXL), one UNet evaluation on the CFG batch, and
// one VAE decode — each through the Pipeline's stage functions (the code
// generate() runs) against tensors dumped by tools/golden/dump_stages.py
// (tests/data/goldens/stages, provenance in its README).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "engine/pipeline.h"
#include "engine/safetensors.h"

namespace hipq::engine {
namespace {

using spec::GenerationSettings;

namespace fs = std::filesystem;

// Stated bounds (max abs error, CPU backend fp32 vs diffusers fp32 on an H200).
constexpr double kEmbeddingsMaxAbs = 1e-4;
constexpr double kUnetMaxAbs = 1e-4;
constexpr double kVaeMaxAbs = 1e-4;

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

struct Stages {
  std::shared_ptr<SafetensorsFile> file;
  std::vector<float> f32(const char* name) const { return file->get(name)->to_f32(); }
  std::vector<int> ids(const char* name) const {
    std::vector<float> v = file->get(name)->to_f32();
    return std::vector<int>(v.begin(), v.end());
  }
  std::vector<int64_t> shape(const char* name) const { return file->get(name)->shape; }
};

void check_model(const std::string& model, const std::string& dump) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  auto file = SafetensorsFile::open(fs::path(src != nullptr ? src : ".") / "tests/data/goldens/stages" / dump);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Stages st{*file};
  auto settings = GenerationSettings::from_json(nlohmann::json::parse(st.file->metadata().at("settings")));
  ASSERT_TRUE(settings.ok());
  auto backend = kernels::make_backend("cpu");
  ASSERT_TRUE(backend.ok());
  auto p = Pipeline::load(model, **backend);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const bool sdxl = (*p)->family() == "sdxl";

  EXPECT_EQ((*p)->token_ids(settings->prompt, 1), st.ids("ids_1"));
  if (sdxl) {
    EXPECT_EQ((*p)->token_ids(settings->prompt, 2), st.ids("ids_2")) << "tokenizer_2 pads with \"!\"";
  }

  auto emb = (*p)->encode_prompt(*settings);
  ASSERT_TRUE(emb.ok()) << emb.status().ToString();
  EXPECT_EQ(emb->hidden_shape, st.shape("prompt_embeds"));
  double e_hidden = max_abs_diff(emb->hidden, st.f32("prompt_embeds"));
  double e_pooled = sdxl ? max_abs_diff(emb->pooled, st.f32("pooled_embeds")) : 0.0;
  auto unet = (*p)->unet_output(*settings, st.f32("unet_input"), st.f32("unet_timestep")[0]);
  ASSERT_TRUE(unet.ok()) << unet.status().ToString();
  double e_unet = max_abs_diff(*unet, st.f32("unet_output"));
  const auto zs = st.shape("vae_input");
  auto vae = (*p)->vae_decode(st.f32("vae_input"), zs[2], zs[3]);
  ASSERT_TRUE(vae.ok()) << vae.status().ToString();
  double e_vae = max_abs_diff(*vae, st.f32("vae_output"));
  std::printf("  %s: max abs error  prompt_embeds %.2e  pooled %.2e  unet %.2e  vae %.2e\n", model.c_str(), e_hidden,
              e_pooled, e_unet, e_vae);
  EXPECT_LE(e_hidden, kEmbeddingsMaxAbs);
  EXPECT_LE(e_pooled, kEmbeddingsMaxAbs);
  EXPECT_LE(e_unet, kUnetMaxAbs);
  EXPECT_LE(e_vae, kVaeMaxAbs);
}

TEST(PipelineStagesTest, TinySdxlMatchesDiffusersStageByStage) { check_model("synthetic:tiny-sdxl", "tiny-sdxl.safetensors"); }
TEST(PipelineStagesTest, TinySd15MatchesDiffusersStageByStage) { check_model("synthetic:tiny-sd15", "tiny-sd15.safetensors"); }

}  // namespace
}  // namespace hipq::engine
