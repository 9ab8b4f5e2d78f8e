#include "spec/generation_settings.h"

#include <gtest/gtest.h>

#include "tests/spec/sample_settings.h"

namespace hipq::spec {
namespace {

TEST(GenerationSettingsTest, JsonRoundTripKeepsEveryField) {
  const GenerationSettings s = testing::every_field_set();
  auto back = GenerationSettings::from_json(nlohmann::json::parse(s.to_json().dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(s.to_json()["guidance"].dump(), "7.1");
}

TEST(GenerationSettingsTest, AbsentFieldsKeepDefaults) {
  auto s = GenerationSettings::from_json(nlohmann::json{{"prompt", "x"}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->prompt, "x");
  EXPECT_EQ(s->width, 1024);
  EXPECT_EQ(s->steps, 30);
  EXPECT_EQ(s->sampler, "euler");
  EXPECT_EQ(s->rng, "torch-cpu");
  EXPECT_EQ(s->timestep_spacing, "");
  EXPECT_EQ(s->guidance_rescale, 0.0f);
}

// The schedule options appear in the JSON only when set, so every file written
// for a job without them (latents, goldens, timings) reads as before.
TEST(GenerationSettingsTest, ScheduleOptionsAreWrittenOnlyWhenSet) {
  GenerationSettings s;
  EXPECT_FALSE(s.to_json().contains("timestep_spacing"));
  EXPECT_FALSE(s.to_json().contains("guidance_rescale"));
  s.timestep_spacing = "trailing";
  s.guidance_rescale = 0.7f;
  EXPECT_EQ(s.to_json()["timestep_spacing"], "trailing");
  EXPECT_EQ(s.to_json()["guidance_rescale"].dump(), "0.7");
  auto bad = GenerationSettings::from_json(nlohmann::json{{"guidance_rescale", "high"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("settings.guidance_rescale"), std::string::npos);
}

// vae_precision too: a job that leaves the decode's dtype to the precision
// writes the JSON (and so the batch key and every file) it wrote before.
TEST(GenerationSettingsTest, VaePrecisionIsWrittenOnlyWhenSetAndRoundTrips) {
  GenerationSettings s;
  EXPECT_FALSE(s.to_json().contains("vae_precision"));
  EXPECT_TRUE(s.validate().ok());
  for (const char* v : {"fp32", "bf16"}) {
    s.vae_precision = v;
    EXPECT_EQ(s.to_json()["vae_precision"], v);
    auto back = GenerationSettings::from_json(s.to_json());
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, s);
    EXPECT_TRUE(s.validate().ok()) << v;
  }
  auto bad = GenerationSettings::from_json(nlohmann::json{{"vae_precision", 16}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("settings.vae_precision: expected a string"), std::string::npos)
      << bad.status().message();
}

TEST(GenerationSettingsTest, AnUnknownVaePrecisionIsRefusedNamingTheFieldAndTheAllowedValues) {
  GenerationSettings s;
  s.vae_precision = "fp16";  // overflows in SDXL's VAE: not offered
  const std::string m = s.validate().message();
  EXPECT_EQ(s.validate().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(m.find("unknown vae_precision \"fp16\""), std::string::npos) << m;
  EXPECT_NE(m.find("known: fp32, bf16"), std::string::npos) << m;
  s.vae_precision = "bf61";
  EXPECT_NE(s.validate().message().find("did you mean 'bf16'?"), std::string::npos) << s.validate().message();
  EXPECT_EQ(known_vae_precisions(), (std::vector<std::string>{"fp32", "bf16"}));
}

// img2img's fields too: absent from the JSON of a text-to-image job.
TEST(GenerationSettingsTest, Img2ImgFieldsAreWrittenOnlyWhenSetAndRoundTrip) {
  GenerationSettings s;
  EXPECT_FALSE(s.to_json().contains("init_image"));
  EXPECT_FALSE(s.to_json().contains("strength"));
  s.init_image = "inits/fox.png";
  EXPECT_EQ(s.to_json()["init_image"], "inits/fox.png");
  EXPECT_FALSE(s.to_json().contains("strength")) << "strength 1 is the default";
  s.strength = 0.6f;
  EXPECT_EQ(s.to_json()["strength"].dump(), "0.6");
  auto back = GenerationSettings::from_json(s.to_json());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);
  auto bad = GenerationSettings::from_json(nlohmann::json{{"strength", "half"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("settings.strength"), std::string::npos);
}

TEST(GenerationSettingsTest, StrengthIsCheckedAgainstTheInitImageAndTheSteps) {
  GenerationSettings s;
  s.prompt = "p";
  s.steps = 10;
  s.strength = 0.5f;
  ASSERT_FALSE(s.validate().ok());
  EXPECT_NE(s.validate().message().find("needs an init_image"), std::string::npos) << s.validate().message();
  s.init_image = "a.png";
  EXPECT_TRUE(s.validate().ok()) << s.validate().message();
  for (float bad : {0.0f, -0.5f, 1.5f}) {
    s.strength = bad;
    EXPECT_NE(s.validate().message().find("must be in (0, 1]"), std::string::npos) << bad;
  }
  s.strength = 0.05f;  // int(10 * 0.05) = 0
  EXPECT_NE(s.validate().message().find("runs no step"), std::string::npos) << s.validate().message();
  EXPECT_EQ(denoising_steps(10, 0.7f), 7);  // Python: 10 * 0.7 = 7.000000000000001
  EXPECT_EQ(denoising_steps(20, 0.35f), 7);
  EXPECT_EQ(denoising_steps(4, 1.0f), 4);
}

TEST(GenerationSettingsTest, WrongTypeNamesTheField) {
  auto s = GenerationSettings::from_json(nlohmann::json{{"steps", "ten"}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("settings.steps"), std::string::npos) << s.status().message();
  auto neg = GenerationSettings::from_json(nlohmann::json{{"seed", -1}});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("settings.seed"), std::string::npos);
  EXPECT_FALSE(GenerationSettings::from_json(nlohmann::json::array()).ok());
}

TEST(GenerationSettingsTest, ValidateRejectsImpossibleSettings) {
  GenerationSettings ok;
  EXPECT_TRUE(ok.validate().ok());
  auto msg = [](GenerationSettings s) -> std::string { return s.validate().message(); };
  GenerationSettings s = ok;
  s.width = 1004;
  EXPECT_NE(msg(s).find("width 1004"), std::string::npos);
  s = ok;
  s.height = 0;
  EXPECT_NE(msg(s).find("height 0"), std::string::npos);
  s = ok;
  s.steps = 0;
  EXPECT_NE(msg(s).find("steps 0"), std::string::npos);
  s = ok;
  s.sampler = "dpmpp_sde";  // not offered (docs/samplers.md says why)
  EXPECT_NE(msg(s).find("unknown sampler \"dpmpp_sde\""), std::string::npos) << msg(s);
  EXPECT_NE(msg(s).find("known: euler, euler_karras, euler_ancestral, ddim, dpmpp_2m"),
            std::string::npos)
      << msg(s);
  s.sampler = "euler_a";  // the web UI's "Euler a"
  EXPECT_NE(msg(s).find("did you mean 'euler_ancestral'?"), std::string::npos) << msg(s);
  s.sampler = "DPM++ 2M SDE";
  EXPECT_NE(msg(s).find("did you mean 'dpmpp_2m_sde'?"), std::string::npos) << msg(s);
  s.sampler = "eulr";
  EXPECT_NE(msg(s).find("did you mean 'euler'?"), std::string::npos) << msg(s);
  s = ok;
  s.timestep_spacing = "trialing";
  EXPECT_NE(msg(s).find("unknown timestep_spacing \"trialing\"; known: leading, trailing, linspace"),
            std::string::npos)
      << msg(s);
  s = ok;
  s.guidance_rescale = 1.5f;
  EXPECT_NE(msg(s).find("guidance_rescale 1.5 must be in 0..1"), std::string::npos) << msg(s);
  s = ok;
  s.precision = "int8";
  EXPECT_NE(msg(s).find("unknown precision"), std::string::npos);
  s = ok;
  s.rng = "numpy";
  EXPECT_NE(msg(s).find("unknown rng"), std::string::npos);
  s = ok;
  s.guidance = -1;
  EXPECT_FALSE(s.validate().ok());
}

TEST(GenerationSettingsTest, SamplerTableIsTheListOfKnownSamplers) {
  ASSERT_EQ(sampler_names().size(), known_samplers().size());
  for (size_t i = 0; i < known_samplers().size(); ++i) {
    EXPECT_EQ(sampler_names()[i].name, known_samplers()[i]);
    const SamplerName* found = find_sampler(known_samplers()[i]);
    ASSERT_NE(found, nullptr);
    EXPECT_FALSE(found->a1111.empty()) << found->name;
    EXPECT_EQ(found->karras, found->name.find("karras") != std::string::npos) << found->name;
  }
  EXPECT_EQ(find_sampler("dpmpp_sde"), nullptr);
  EXPECT_EQ(join_names({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(join_names({}), "");
}

TEST(GenerationSettingsTest, LorasAndRefinerAreWrittenOnlyWhenSetAndRoundTrip) {
  GenerationSettings plain;
  const nlohmann::json pj = plain.to_json();
  EXPECT_FALSE(pj.contains("loras"));
  EXPECT_FALSE(pj.contains("refiner"));
  EXPECT_FALSE(pj.contains("aesthetic_score"));

  GenerationSettings s;
  s.loras = {{"style.safetensors", 0.8f}, {"detail.safetensors", -0.5f}};
  s.refiner = "synthetic:tiny-sdxl-refiner";
  s.refiner_switch_at = 0.7f;
  s.aesthetic_score = 7.0f;
  const nlohmann::json j = s.to_json();
  ASSERT_TRUE(j.at("loras").is_array());
  EXPECT_EQ(j.at("loras").size(), 2u);
  auto back = GenerationSettings::from_json(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
  EXPECT_TRUE(s.validate().ok());

  s.refiner_switch_at = 1.0f;
  EXPECT_NE(s.validate().message().find("refiner_switch_at"), std::string::npos);
  s.refiner_switch_at = 0.8f;
  s.loras[1].scale = 1e9f;
  EXPECT_FALSE(s.validate().ok());

  auto bad = GenerationSettings::from_json(nlohmann::json{{"loras", {{{"path", 3}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("loras[0]"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(GenerationSettings::from_json(nlohmann::json{{"loras", "x"}}).ok());

  // The refiner as the img2img model: its aesthetic scores travel without a
  // refiner member (else the worker would run the defaults).
  GenerationSettings scored;
  scored.init_image = "init.png";
  scored.strength = 0.5f;
  scored.aesthetic_score = 9.0f;
  scored.negative_aesthetic_score = 1.5f;
  const nlohmann::json sj = scored.to_json();
  EXPECT_FALSE(sj.contains("refiner"));
  EXPECT_EQ(sj.at("aesthetic_score"), 9.0);
  auto scored_back = GenerationSettings::from_json(sj);
  ASSERT_TRUE(scored_back.ok());
  EXPECT_EQ(*scored_back, scored);
}

TEST(GenerationSettingsTest, GuidanceTextIsShortestSixDigits) {
  EXPECT_EQ(format_guidance(5.0f), "5");
  EXPECT_EQ(format_guidance(7.5f), "7.5");
  EXPECT_EQ(format_guidance(7.1f), "7.1");
  EXPECT_EQ(format_guidance(0.0f), "0");
}

}  // namespace
}  // namespace hipq::spec
