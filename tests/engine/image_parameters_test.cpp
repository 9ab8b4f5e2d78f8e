#include "engine/image_parameters.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/build_info.h"

namespace hipq::engine {
namespace {

using spec::GenerationSettings;

GenerationSettings settings() {
  GenerationSettings s;
  s.prompt = "a watercolor painting of a lighthouse at dawn";
  s.negative_prompt = "blurry, low quality";
  s.seed = 1;
  s.width = 64;
  s.height = 48;
  s.steps = 4;
  s.guidance = 7.5f;
  s.sampler = "dpmpp_2m_karras";
  s.precision = "fp16";
  return s;
}

ImageProvenance in_batch() {
  return ImageProvenance{"/models/sd_xl_base_1.0.safetensors", std::string(64, 'a').replace(0, 10, "0123456789"),
                         "quickstart", 3, 17, 1, {}};
}

TEST(ImageParametersTest, FollowsTheWebUiLayoutWithHipqFieldsAfterwards) {
  std::string p = a1111_parameters(settings(), in_batch());
  std::string sha = build_info::kGitSha;
  EXPECT_EQ(p,
            "a watercolor painting of a lighthouse at dawn\n"
            "Negative prompt: blurry, low quality\n"
            "Steps: 4, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7.5, Seed: 1, Size: 64x48, "
            "Model hash: 0123456789, Model: sd_xl_base_1.0, RNG: CPU, Batch: quickstart (3), Job: 17, "
            "Precision: fp16, Build: hipq " +
                std::string(build_info::kVersion) + (sha.empty() ? "" : " (" + sha.substr(0, 7) + ")") +
                ", Version: hipq");
}

TEST(ImageParametersTest, Img2ImgAddsTheWebUisDenoisingStrengthAfterTheModel) {
  GenerationSettings s = settings();
  EXPECT_EQ(a1111_parameters(s, in_batch()).find("Denoising strength"), std::string::npos);
  s.init_image = "/data/inits/fox.png";
  s.strength = 0.6f;
  const std::string p = a1111_parameters(s, in_batch());
  EXPECT_NE(p.find("Model: sd_xl_base_1.0, Denoising strength: 0.6, RNG: CPU"), std::string::npos) << p;
}

TEST(ImageParametersTest, RefinerAddsTheWebUisRefinerAndSwitchPointAfterTheDenoisingStrength) {
  GenerationSettings s = settings();
  EXPECT_EQ(a1111_parameters(s, in_batch()).find("Refiner"), std::string::npos);
  s.init_image = "/data/inits/fox.png";
  s.strength = 0.6f;
  s.refiner = "/models/sd_xl_refiner_1.0.safetensors";
  s.refiner_switch_at = 0.75f;
  const std::string p = a1111_parameters(s, in_batch());
  EXPECT_NE(p.find("Denoising strength: 0.6, Refiner: sd_xl_refiner_1.0, Refiner switch at: 0.75, RNG: CPU"),
            std::string::npos)
      << p;
}

TEST(ImageParametersTest, VaePrecisionFollowsThePrecisionOnlyWhenTheJobChoseIt) {
  GenerationSettings s = settings();
  EXPECT_EQ(a1111_parameters(s, in_batch()).find("VAE precision"), std::string::npos);
  s.vae_precision = "bf16";
  const std::string p = a1111_parameters(s, in_batch());
  EXPECT_NE(p.find("Precision: fp16, VAE precision: bf16, Build: "), std::string::npos) << p;
}

TEST(ImageParametersTest, NoNegativeLineWithoutANegativePromptAndNoBatchOutsideOne) {
  GenerationSettings s = settings();
  s.negative_prompt.clear();
  s.sampler = "euler";
  s.guidance = 5.0f;
  s.rng = "torch-cuda";
  ImageProvenance p;
  p.model_spec = "synthetic:tiny-sdxl";
  std::string text = a1111_parameters(s, p);
  EXPECT_EQ(text.find("Negative prompt"), std::string::npos) << text;
  EXPECT_NE(text.find("\nSteps: 4, Sampler: Euler, CFG scale: 5, Seed: 1,"), std::string::npos) << text;
  EXPECT_NE(text.find("Model: \"synthetic:tiny-sdxl\""), std::string::npos) << text;  // ':' is quoted
  EXPECT_NE(text.find("RNG: GPU"), std::string::npos) << text;
  EXPECT_EQ(text.find("Batch:"), std::string::npos) << text;
  EXPECT_EQ(text.find("Job:"), std::string::npos) << text;
  EXPECT_EQ(text.find("Model hash"), std::string::npos) << text;
}

TEST(ImageParametersTest, ValuesWithSeparatorsAreJsonStringsAndTheNegativePromptStaysOnOneLine) {
  GenerationSettings s = settings();
  s.negative_prompt = "blurry\nugly";
  ImageProvenance p = in_batch();
  p.model_spec = "/models/my, model: v2/";
  std::string text = a1111_parameters(s, p);
  EXPECT_NE(text.find("\nNegative prompt: blurry ugly\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Model: \"my, model: v2\""), std::string::npos) << text;
}

TEST(ImageParametersTest, MetadataHoldsParametersJsonAndSoftware) {
  auto chunks = png_metadata(settings(), in_batch());
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].key, "parameters");
  EXPECT_EQ(chunks[1].key, "hipq");
  EXPECT_EQ(chunks[2].key, "Software");
  auto j = nlohmann::json::parse(chunks[1].text);
  EXPECT_EQ(j["format"], "hipq-image/1");
  EXPECT_EQ(j["settings"], settings().to_json());
  EXPECT_EQ(j["batch"]["name"], "quickstart");
  EXPECT_EQ(j["job"]["id"], 17);
  EXPECT_EQ(j["job"]["attempt"], 1);
}

TEST(ImageParametersTest, SamplerNamesAreTheWebUis) {
  EXPECT_EQ(a1111_sampler_name("euler"), "Euler");
  EXPECT_EQ(a1111_sampler_name("euler_karras"), "Euler");
  EXPECT_EQ(a1111_sampler_name("ddim"), "DDIM");
  EXPECT_EQ(a1111_sampler_name("dpmpp_2m"), "DPM++ 2M");
  EXPECT_EQ(a1111_sampler_name("dpm2_ancestral"), "DPM2 a");
  EXPECT_EQ(a1111_sampler_name("dpmpp_3m_sde_karras"), "DPM++ 3M SDE");
  EXPECT_EQ(a1111_sampler_name("dpmpp_sde"), "");
  for (const auto& s : spec::known_samplers()) EXPECT_FALSE(a1111_sampler_name(s).empty()) << s;
}

}  // namespace
}  // namespace hipq::engine
