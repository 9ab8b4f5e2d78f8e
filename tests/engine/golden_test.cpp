#include "engine/golden.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/fs.h"
#include "engine/safetensors.h"

namespace hipq::engine {
namespace {

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::path(::testing::TempDir()) / ("hipq_golden_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

GenerationSettings sample_settings() {
  GenerationSettings s;
  s.prompt = "a lighthouse at dusk";
  s.negative_prompt = "";
  s.seed = 42;
  s.width = 64;
  s.height = 48;
  s.steps = 3;
  s.guidance = 5.0f;
  return s;
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

TEST(GoldenTest, SameInputsGiveTheSameKeyAndEveryChangeANewOne) {
  const std::string w(64, 'b');
  GenerationSettings base = sample_settings();
  const std::string k = golden_key(w, base);
  EXPECT_EQ(k.size(), 64u);
  EXPECT_EQ(golden_key(w, sample_settings()), k);
  std::vector<std::pair<std::string, GenerationSettings>> variants;
  auto vary = [&](const char* what, auto fn) {
    GenerationSettings s = base;
    fn(s);
    variants.emplace_back(what, s);
  };
  vary("prompt", [](auto& s) { s.prompt += "."; });
  vary("negative", [](auto& s) { s.negative_prompt = "blurry"; });
  vary("seed", [](auto& s) { s.seed = 43; });
  vary("width", [](auto& s) { s.width = 72; });
  vary("height", [](auto& s) { s.height = 56; });
  vary("steps", [](auto& s) { s.steps = 4; });
  vary("guidance", [](auto& s) { s.guidance = 5.5f; });
  vary("sampler", [](auto& s) { s.sampler = "ddim"; });
  vary("rng", [](auto& s) { s.rng = "torch-cuda"; });
  std::set<std::string> keys = {k};
  for (const auto& [what, s] : variants) {
    std::string vk = golden_key(w, s);
    EXPECT_NE(vk, k) << what;
    keys.insert(vk);
  }
  EXPECT_EQ(keys.size(), variants.size() + 1);
  EXPECT_NE(golden_key(std::string(64, 'c'), base), k) << "weights";
  GenerationSettings fp16 = base;
  fp16.precision = "fp16";
  // The reference draws fp16/bf16 noise from the same seed: another image, another key.
  EXPECT_NE(golden_key(w, fp16), k) << "fp16 is part of the key";
  GenerationSettings bf16 = base;
  bf16.precision = "bf16";
  EXPECT_NE(golden_key(w, bf16), golden_key(w, fp16));
  EXPECT_EQ(golden_key_material(w, base).find("precision"), std::string::npos) << "fp32 keys are unchanged";
}

TEST(GoldenTest, KeyMaterialIsTheDocumentedCanonicalJson) {
  GenerationSettings s = sample_settings();
  s.prompt = "caf\xC3\xA9 \"q\"\n";
  s.guidance = 7.1f;
  EXPECT_EQ(golden_key_material("abc", s),
            "{\"guidance\":\"7.1\",\"height\":48,\"key_version\":1,\"negative_prompt\":\"\","
            "\"prompt\":\"caf\xC3\xA9 \\\"q\\\"\\n\",\"rng\":\"torch-cpu\",\"sampler\":\"euler\",\"seed\":42,"
            "\"steps\":3,\"weights_sha256\":\"abc\",\"width\":64}");
}

// tools/golden/golden_key.py must compute the same key for the same inputs.
TEST(GoldenTest, PythonToolComputesTheSameKey) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  if (src == nullptr) GTEST_SKIP() << "HIPQ_SOURCE_DIR not set";
  if (std::system("python3 -c 'import json, hashlib' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  auto dir = temp_dir("python");
  std::vector<GenerationSettings> cases;
  cases.push_back(sample_settings());
  GenerationSettings u = sample_settings();
  u.prompt = "\xE6\x9D\xB1\xE4\xBA\xAC, tab\t, ctrl\x01, quote \" backslash \\ / end";
  u.negative_prompt = "low quality";
  u.seed = 18446744073709551615ull;
  u.guidance = 7.1f;
  u.sampler = "dpmpp_2m_karras";
  u.rng = "torch-cuda";
  cases.push_back(u);
  for (size_t i = 0; i < cases.size(); ++i) {
    auto settings_path = dir / ("s" + std::to_string(i) + ".json");
    auto out_path = dir / ("k" + std::to_string(i) + ".txt");
    ASSERT_TRUE(write_file_atomic(settings_path, cases[i].to_json().dump()).ok());
    std::string cmd = "python3 \"" + std::string(src) + "/tools/golden/golden_key.py\" w0 \"$(cat '" +
                      settings_path.string() + "')\" > '" + out_path.string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto text = read_file(out_path);
    ASSERT_TRUE(text.ok());
    std::string expected = golden_key_material("w0", cases[i]) + "\n" + golden_key("w0", cases[i]) + "\n";
    EXPECT_EQ(*text, expected) << "case " << i;
  }
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
