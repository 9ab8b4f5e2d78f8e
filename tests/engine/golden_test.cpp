#include "engine/golden.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/fs.h"
#include "tests/spec/sample_settings.h"
#include "engine/safetensors.h"

namespace hipq::engine {
namespace {

using spec::testing::sample_settings;

using spec::GenerationSettings;
using spec::GoldenProvenance;
using spec::find_golden_file;
using spec::golden_file_name;
using spec::golden_key;

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::path(::testing::TempDir()) / ("hipq_golden_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

GoldenProvenance full_provenance() {
  GoldenProvenance p;
  p.reference = "diffusers";
  p.reference_version = "0.31.0";
  p.torch_version = "2.5.1";
  p.device = "cpu";
  p.precision = "fp32";
  p.pipeline_class = "StableDiffusionXLPipeline";
  p.scheduler_class = "EulerDiscreteScheduler";
  p.created_at = "2026-01-01T00:00:00Z";
  return p;
}

Golden sample_golden(bool with_image) {
  Golden g;
  g.model = "synthetic:tiny-sdxl";
  g.weights_sha256 = std::string(64, 'a');
  g.settings = sample_settings();
  g.scheduler_config = {{"beta_schedule", "scaled_linear"}};
  g.provenance = full_provenance();
  g.latent_shape = {1, 4, 6, 8};
  for (int i = 0; i < 4 * 6 * 8; ++i) g.latent.push_back(0.01f * static_cast<float>(i) - 0.5f);
  if (with_image) {
    g.image_width = 64;
    g.image_height = 48;
    g.image.resize(64 * 48 * 3);
    for (size_t i = 0; i < g.image.size(); ++i) g.image[i] = static_cast<uint8_t>(i % 251);
  }
  return g;
}

TEST(GoldenTest, WriteReadRoundTripKeepsEverything) {
  auto dir = temp_dir("round");
  Golden g = sample_golden(true);
  std::string key = golden_key(g.weights_sha256, g.settings);
  auto path = dir / golden_file_name(key);
  ASSERT_TRUE(write_golden(path, g).ok());
  auto back = read_golden(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, key);
  EXPECT_EQ(back->model, g.model);
  EXPECT_EQ(back->weights_sha256, g.weights_sha256);
  EXPECT_EQ(back->settings, g.settings);
  EXPECT_EQ(back->scheduler_config, g.scheduler_config);
  EXPECT_EQ(back->provenance.to_json(), g.provenance.to_json());
  EXPECT_EQ(back->latent_shape, g.latent_shape);
  EXPECT_EQ(back->latent, g.latent);
  EXPECT_EQ(back->image, g.image);
  EXPECT_EQ(back->image_width, 64);
  EXPECT_EQ(back->image_height, 48);
  EXPECT_TRUE(back->pinned);
  EXPECT_EQ(back->content_sha256, golden_content_sha256(g));
  auto found = find_golden_file(dir, key);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, path);
  EXPECT_EQ(find_golden_file(dir, std::string(64, '0')).status().code(), StatusCode::kNotFound);
}

TEST(GoldenTest, LatentOnlyGoldenHasNoImage) {
  auto dir = temp_dir("latent_only");
  ASSERT_TRUE(write_golden(dir / "g.safetensors", sample_golden(false)).ok());
  auto back = read_golden(dir / "g.safetensors");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->has_image());
}

TEST(GoldenTest, TruncatedFileIsRefusedAsCorruption) {
  auto dir = temp_dir("truncated");
  auto path = dir / "g.safetensors";
  ASSERT_TRUE(write_golden(path, sample_golden(true)).ok());
  auto bytes = read_file(path);
  ASSERT_TRUE(bytes.ok());
  ASSERT_TRUE(write_file_atomic(path, bytes->substr(0, bytes->size() - 100)).ok());
  auto r = read_golden(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find("g.safetensors"), std::string::npos) << r.status().message();
}

TEST(GoldenTest, ModifiedTensorBytesFailTheContentHash) {
  auto dir = temp_dir("hash");
  auto path = dir / "g.safetensors";
  ASSERT_TRUE(write_golden(path, sample_golden(false)).ok());
  auto bytes = read_file(path);
  ASSERT_TRUE(bytes.ok());
  std::string b = *bytes;
  b[b.size() - 3] ^= 0x40;  // inside the latent data
  ASSERT_TRUE(write_file_atomic(path, b).ok());
  auto r = read_golden(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("content hash mismatch"), std::string::npos) << r.status().message();
}

TEST(GoldenTest, MissingProvenanceIsRefusedUnlessUnpinnedAllowed) {
  auto dir = temp_dir("provenance");
  auto path = dir / "g.safetensors";
  Golden g = sample_golden(false);
  g.provenance = GoldenProvenance{};
  g.provenance.reference = "diffusers";
  g.provenance.device = "cpu";
  ASSERT_TRUE(write_golden(path, g).ok());
  auto r = read_golden(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("reference_version"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("torch_version"), std::string::npos);
  EXPECT_NE(r.status().message().find("--allow-unpinned"), std::string::npos);
  GoldenReadOptions allow;
  allow.allow_unpinned = true;
  auto ok = read_golden(path, allow);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_FALSE(ok->pinned);
}

TEST(GoldenTest, KeyThatDisagreesWithSettingsIsCorruption) {
  // A file whose settings were edited after it was made: the key no longer fits.
  auto dir = temp_dir("key");
  auto path = dir / "g.safetensors";
  ASSERT_TRUE(write_golden(path, sample_golden(false)).ok());
  auto bytes = read_file(path);
  ASSERT_TRUE(bytes.ok());
  std::string b = *bytes;
  auto pos = b.rfind("lighthouse");  // the "settings" entry comes last
  ASSERT_NE(pos, std::string::npos);
  b.replace(pos, 10, "LIGHTHOUSE");
  ASSERT_TRUE(write_file_atomic(path, b).ok());
  auto r = read_golden(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("does not match"), std::string::npos) << r.status().message();
}

TEST(GoldenTest, NotAGoldenIsNamedAsSuch) {
  auto dir = temp_dir("notgolden");
  auto path = dir / "x.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"latent", HostTensor::from_f32({1, 2, 3, 4}, {1, 1, 2, 2})}}, {}).ok());
  auto r = read_golden(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a hipq golden"), std::string::npos) << r.status().message();
  EXPECT_EQ(read_golden(dir / "missing.safetensors").status().code(), StatusCode::kNotFound);
}

TEST(GoldenTest, WriteRejectsInconsistentSizes) {
  auto dir = temp_dir("sizes");
  Golden g = sample_golden(true);
  g.latent.pop_back();
  EXPECT_EQ(write_golden(dir / "a.safetensors", g).code(), StatusCode::kInvalidArgument);
  g = sample_golden(true);
  g.image_width = 10;
  EXPECT_EQ(write_golden(dir / "b.safetensors", g).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::engine
