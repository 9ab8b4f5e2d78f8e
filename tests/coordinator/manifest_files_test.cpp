#include "coordinator/manifest_files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "base/fs.h"
#include "spec/png.h"
#include "tests/coordinator/manifest_test_util.h"

namespace hipq::coordinator {
namespace {

using testing::ManifestDir;

using testing::safetensors_with;

TEST(ManifestFilesTest, ALoraFileIsCheckedFromItsHeaderAndPinnedByItsSha256) {
  ManifestDir dir;
  const std::string bytes = safetensors_with({"lora_unet_mid_block_attentions_0_proj_in.lora_down.weight",
                                              "lora_unet_mid_block_attentions_0_proj_in.lora_up.weight"});
  auto file = dir.write("style.safetensors", bytes);
  auto sha = check_lora_file(file);
  ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  EXPECT_EQ(*sha, sha256_hex(bytes));

  auto peft = check_lora_file(dir.write("peft.safetensors", safetensors_with({"unet.x.lora_A.weight", "unet.x.lora_B.weight"})));
  EXPECT_TRUE(peft.ok()) << peft.status().ToString();
}

TEST(ManifestFilesTest, WhatIsNotALoraIsRefusedWithItsName) {
  ManifestDir dir;
  auto missing = check_lora_file(dir.path() / "gone.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("gone.safetensors does not exist"), std::string::npos);

  auto text = check_lora_file(dir.write("notes.safetensors", "this is not a safetensors file at all"));
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("notes.safetensors is not a safetensors file"), std::string::npos)
      << text.status().message();

  auto model = check_lora_file(dir.write("unet.safetensors", safetensors_with({"conv_in.weight"})));
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("holds no LoRA pairs"), std::string::npos) << model.status().message();

  auto loha = check_lora_file(dir.write("loha.safetensors", safetensors_with({"lora_unet_x.hada_w1_a"})));
  ASSERT_FALSE(loha.ok());
  EXPECT_EQ(loha.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(loha.status().message().find("LoHa"), std::string::npos) << loha.status().message();

  // A header that claims data past the end of the file.
  std::string lying = safetensors_with({"unet.x.lora_A.weight"});
  lying.resize(lying.size() - 2);
  auto cut = check_lora_file(dir.write("cut.safetensors", lying));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("data_offsets"), std::string::npos) << cut.status().message();

  auto folder = check_lora_file(dir.path());
  EXPECT_FALSE(folder.ok());
}

TEST(ManifestFilesTest, AnInitImageMustBeTheJobsSize) {
  ManifestDir dir;
  const auto file = dir.path() / "init.png";
  ASSERT_TRUE(spec::write_png(file, spec::RgbImage{64, 48, std::vector<uint8_t>(64 * 48 * 3, 128)}).ok());
  auto sha = check_init_image_file(file, 64, 48);
  ASSERT_TRUE(sha.ok()) << sha.status().ToString();
  EXPECT_EQ(*sha, *sha256_file(file));
  auto wrong = check_init_image_file(file, 64, 64);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("init.png"), std::string::npos) << wrong.status().message();
  EXPECT_FALSE(check_init_image_file(dir.path() / "none.png", 64, 48).ok());
}

}  // namespace
}  // namespace hipq::coordinator
