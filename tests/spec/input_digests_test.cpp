#include "spec/input_digests.h"

#include <gtest/gtest.h>

#include "tests/spec/sample_settings.h"

namespace hipq::spec {
namespace {

const std::string kA(64, 'a');
const std::string kB(64, 'b');
const std::string kC(64, 'c');

TEST(InputDigestsTest, JsonRoundTripsAndNamesOnlyWhatIsSet) {
  const InputDigests d{{kA, kB}, kC, ""};
  EXPECT_EQ(d.to_json().dump(), "{\"init_image\":\"" + kC + "\",\"loras\":[\"" + kA + "\",\"" + kB + "\"]}");
  auto back = InputDigests::from_json(d.to_json());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, d);
  EXPECT_EQ(InputDigests{}.to_json().dump(), "{}");
  EXPECT_TRUE(InputDigests{}.empty());
}

TEST(InputDigestsTest, WhatIsNotASha256IsRefusedNamingTheField) {
  auto upper = InputDigests::from_json({{"init_image", std::string(64, 'A')}});
  ASSERT_FALSE(upper.ok());
  EXPECT_NE(upper.status().message().find("input digests.init_image"), std::string::npos);
  auto short_lora = InputDigests::from_json({{"loras", {kA, "abc"}}});
  ASSERT_FALSE(short_lora.ok());
  EXPECT_NE(short_lora.status().message().find("loras[1]"), std::string::npos);
  auto unknown = InputDigests::from_json({{"model", kA}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown member 'model'"), std::string::npos);
  EXPECT_FALSE(InputDigests::from_json(nlohmann::json::array()).ok());
}

TEST(InputDigestsTest, DigestsMustFitTheSettings) {
  GenerationSettings s = testing::every_field_set();  // two LoRAs, an init image, a refiner
  EXPECT_TRUE((InputDigests{{kA, kB}, kC, ""}).check_against(s).ok());
  EXPECT_TRUE((InputDigests{{kA, kB}, kC, kA}).check_against(s).ok());
  EXPECT_FALSE((InputDigests{{kA}, kC, ""}).check_against(s).ok());
  EXPECT_FALSE((InputDigests{{kA, kB}, "", ""}).check_against(s).ok());
  const GenerationSettings plain = testing::sample_settings();
  EXPECT_TRUE(InputDigests{}.check_against(plain).ok());
  EXPECT_FALSE((InputDigests{{}, kC, ""}).check_against(plain).ok());
  EXPECT_FALSE((InputDigests{{}, "", kA}).check_against(plain).ok());
}

TEST(InputDigestsTest, TheLoraSetKeyIsTheFilesAndScalesInOrder) {
  EXPECT_EQ(lora_set_key({}, {}), "");
  const std::vector<LoraSpec> loras{{"/a/x.safetensors", 0.8f}, {"/b/y.safetensors", 1.0f}};
  EXPECT_EQ(lora_set_key(loras, {kA, kB}), kA + "*0.8," + kB + "*1");
  // The path does not matter, the order and the scale do.
  EXPECT_EQ(lora_set_key({{"/moved/x.safetensors", 0.8f}, {"/b/y.safetensors", 1.0f}}, {kA, kB}),
            lora_set_key(loras, {kA, kB}));
  EXPECT_NE(lora_set_key(loras, {kB, kA}), lora_set_key(loras, {kA, kB}));
  EXPECT_NE(lora_set_key({{"/a/x.safetensors", 0.7f}, {"/b/y.safetensors", 1.0f}}, {kA, kB}),
            lora_set_key(loras, {kA, kB}));
}

}  // namespace
}  // namespace hipq::spec
