#include "spec/golden_format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "base/fs.h"
#include "tests/spec/sample_settings.h"

namespace hipq::spec {
namespace {

using testing::sample_settings;

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::path(::testing::TempDir()) / ("hipq_golden_format_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

GoldenHeader sample_header() {
  GoldenHeader h;
  h.model = "synthetic:tiny-sdxl";
  h.weights_sha256 = std::string(64, 'a');
  h.settings = sample_settings();
  h.key = golden_key(h.weights_sha256, h.settings);
  h.content_sha256 = std::string(64, 'c');
  h.provenance.reference = "diffusers";
  h.provenance.reference_version = "0.31.0";
  h.provenance.torch_version = "2.5.1";
  h.provenance.device = "cpu";
  h.provenance.precision = "fp32";
  h.provenance.created_at = "2026-01-01T00:00:00Z";
  return h;
}

TEST(GoldenFormatTest, SameInputsGiveTheSameKeyAndEveryChangeANewOne) {
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

// LoRA files, the init image and the refiner enter the key by content and
// only when set: a plain job's key is what it was.
TEST(GoldenFormatTest, FilesEnterTheKeyByContentOnlyWhenSet) {
  const std::string w(64, 'b');
  const std::string da(64, '1'), db(64, '2'), dc(64, '3');
  GenerationSettings base = sample_settings();
  const std::string plain = golden_key(w, base);
  EXPECT_EQ(golden_key(w, base, InputDigests{}), plain);

  GenerationSettings lora = base;
  lora.loras = {{"/a/style.safetensors", 0.8f}};
  const std::string k_lora = golden_key(w, lora, InputDigests{{da}, "", ""});
  EXPECT_NE(k_lora, plain);
  GenerationSettings moved = lora;
  moved.loras[0].path = "/elsewhere/renamed.safetensors";
  EXPECT_EQ(golden_key(w, moved, InputDigests{{da}, "", ""}), k_lora) << "the path is not the file";
  EXPECT_NE(golden_key(w, lora, InputDigests{{db}, "", ""}), k_lora) << "another file";
  GenerationSettings rescaled = lora;
  rescaled.loras[0].scale = 0.5f;
  EXPECT_NE(golden_key(w, rescaled, InputDigests{{da}, "", ""}), k_lora) << "another scale";

  GenerationSettings i2i = base;
  i2i.init_image = "/in/fox.png";
  i2i.strength = 0.6f;
  const std::string k_i2i = golden_key(w, i2i, InputDigests{{}, dc, ""});
  EXPECT_NE(k_i2i, plain);
  EXPECT_NE(golden_key(w, i2i, InputDigests{{}, da, ""}), k_i2i) << "another image";
  GenerationSettings stronger = i2i;
  stronger.strength = 0.7f;
  EXPECT_NE(golden_key(w, stronger, InputDigests{{}, dc, ""}), k_i2i) << "another strength";
  EXPECT_NE(golden_key_material(w, i2i, InputDigests{{}, dc, ""}).find("\"strength\":\"0.6\""), std::string::npos);

  GenerationSettings refined = base;
  refined.refiner = "synthetic:sdxl-refiner";
  const std::string k_ref = golden_key(w, refined, InputDigests{{}, "", da});
  EXPECT_NE(k_ref, plain);
  EXPECT_NE(golden_key(w, refined, InputDigests{{}, "", db}), k_ref) << "another refiner";
  GenerationSettings later = refined;
  later.refiner_switch_at = 0.9f;
  EXPECT_NE(golden_key(w, later, InputDigests{{}, "", da}), k_ref) << "another switch point";
  GenerationSettings aesthetic = refined;
  aesthetic.aesthetic_score = 7.0f;
  EXPECT_NE(golden_key(w, aesthetic, InputDigests{{}, "", da}), k_ref);
  aesthetic = refined;
  aesthetic.negative_aesthetic_score = 2.0f;
  EXPECT_NE(golden_key(w, aesthetic, InputDigests{{}, "", da}), k_ref);
}

TEST(GoldenFormatTest, KeyMaterialIsTheDocumentedCanonicalJson) {
  GenerationSettings s = sample_settings();
  s.prompt = "caf\xC3\xA9 \"q\"\n";
  s.guidance = 7.1f;
  EXPECT_EQ(golden_key_material("abc", s),
            "{\"guidance\":\"7.1\",\"height\":48,\"key_version\":1,\"negative_prompt\":\"\","
            "\"prompt\":\"caf\xC3\xA9 \\\"q\\\"\\n\",\"rng\":\"torch-cpu\",\"sampler\":\"euler\",\"seed\":42,"
            "\"steps\":3,\"weights_sha256\":\"abc\",\"width\":64}");
}

// tools/golden/golden_key.py must compute the same key for the same inputs.
TEST(GoldenFormatTest, PythonToolComputesTheSameKey) {
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
  GenerationSettings few = sample_settings();  // an SDXL-Turbo-shaped job
  few.sampler = "euler_ancestral";
  few.timestep_spacing = "trailing";
  few.guidance = 0.0f;
  few.guidance_rescale = 0.7f;
  cases.push_back(few);
  // A refiner as the img2img model with its own aesthetic scores (no refiner
  // member: the scores enter the key at the top level).
  GenerationSettings scored = sample_settings();
  scored.aesthetic_score = 9.0f;
  scored.negative_aesthetic_score = 1.5f;
  cases.push_back(scored);
  GenerationSettings fast_decode = sample_settings();  // an fp16 job decoding in bf16
  fast_decode.precision = "fp16";
  fast_decode.vae_precision = "bf16";
  cases.push_back(fast_decode);
  std::vector<InputDigests> inputs(cases.size());
  // Two LoRAs, an init image and a refiner, with scales and strengths whose
  // float32 value prints differently from the decimal written.
  cases.push_back(testing::every_field_set());
  cases.back().loras[0].scale = 0.3f;
  cases.back().strength = 0.35f;
  inputs.push_back(InputDigests{{std::string(64, 'a'), std::string(64, 'b')}, std::string(64, 'c'), std::string(64, 'd')});
  for (size_t i = 0; i < cases.size(); ++i) {
    auto settings_path = dir / ("s" + std::to_string(i) + ".json");
    auto inputs_path = dir / ("i" + std::to_string(i) + ".json");
    auto out_path = dir / ("k" + std::to_string(i) + ".txt");
    ASSERT_TRUE(write_file_atomic(settings_path, cases[i].to_json().dump()).ok());
    ASSERT_TRUE(write_file_atomic(inputs_path, inputs[i].to_json().dump()).ok());
    std::string cmd = "python3 \"" + std::string(src) + "/tools/golden/golden_key.py\" w0 \"$(cat '" +
                      settings_path.string() + "')\" \"$(cat '" + inputs_path.string() + "')\" > '" +
                      out_path.string() + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    auto text = read_file(out_path);
    ASSERT_TRUE(text.ok());
    GoldenHeader stored;
    stored.settings = cases[i];
    // ... and the settings as a golden stores them (what read_golden keys on).
    std::string expected = golden_key_material("w0", cases[i], inputs[i]) + "\n" +
                           golden_key("w0", cases[i], inputs[i]) + "\n" + golden_metadata(stored).at("settings") +
                           "\n";
    EXPECT_EQ(*text, expected) << "case " << i;
  }
}

TEST(GoldenFormatTest, AestheticScoresWithoutARefinerEnterTheKeyOnlyWhenSet) {
  GenerationSettings plain = sample_settings();
  GenerationSettings scored = plain;
  scored.aesthetic_score = 9.0f;
  EXPECT_NE(golden_key("w0", plain), golden_key("w0", scored));
  EXPECT_NE(golden_key_material("w0", scored).find("\"aesthetic_score\":\"9\""), std::string::npos);
  GenerationSettings neg = plain;
  neg.negative_aesthetic_score = 1.0f;
  EXPECT_NE(golden_key("w0", plain), golden_key("w0", neg));
  EXPECT_EQ(golden_key_material("w0", plain).find("aesthetic"), std::string::npos);
}

// The decode's dtype changes the image: a job that asks for one has its own
// golden, and every key of a job that does not stays as it was.
TEST(GoldenFormatTest, VaePrecisionEntersTheKeyOnlyWhenSet) {
  GenerationSettings plain = sample_settings();
  plain.precision = "fp16";
  EXPECT_EQ(golden_key_material("w0", plain).find("vae_precision"), std::string::npos);
  GenerationSettings bf16 = plain;
  bf16.vae_precision = "bf16";
  GenerationSettings fp32 = plain;
  fp32.vae_precision = "fp32";
  EXPECT_NE(golden_key("w0", bf16), golden_key("w0", plain));
  EXPECT_NE(golden_key("w0", fp32), golden_key("w0", bf16));
  EXPECT_NE(golden_key_material("w0", bf16).find("\"vae_precision\":\"bf16\""), std::string::npos);
}

TEST(GoldenFormatTest, MetadataRoundTripsAndIsChecked) {
  const GoldenHeader h = sample_header();
  auto meta = golden_metadata(h);
  EXPECT_EQ(meta.at("format"), kGoldenFormat);
  EXPECT_EQ(meta.at("key_material"), golden_key_material(h.weights_sha256, h.settings));
  auto back = read_golden_metadata(meta, "g.safetensors");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, h.key);
  EXPECT_EQ(back->settings, h.settings);
  EXPECT_EQ(back->provenance.torch_version, "2.5.1");
  auto pinned = check_golden_header(*back, "g.safetensors", false);
  ASSERT_TRUE(pinned.ok()) << pinned.status().ToString();
  EXPECT_TRUE(*pinned);

  meta["format"] = "something-else/1";
  auto not_golden = read_golden_metadata(meta, "g.safetensors");
  EXPECT_EQ(not_golden.status().code(), StatusCode::kCorruption);
  EXPECT_NE(not_golden.status().message().find("g.safetensors: not a hipq golden"), std::string::npos);
}

TEST(GoldenFormatTest, InputDigestsTravelInTheMetadataAndTheKeyIsCheckedAgainstThem) {
  GoldenHeader h = sample_header();
  h.settings.loras = {{"/a/style.safetensors", 0.8f}};
  h.settings.init_image = "/in/fox.png";
  h.settings.strength = 0.5f;
  h.inputs = InputDigests{{std::string(64, '1')}, std::string(64, '2'), ""};
  h.key = golden_key(h.weights_sha256, h.settings, h.inputs);
  auto meta = golden_metadata(h);
  EXPECT_EQ(meta.at("inputs"), h.inputs.to_json().dump());
  auto back = read_golden_metadata(meta, "g.safetensors");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->inputs, h.inputs);
  EXPECT_TRUE(check_golden_header(*back, "g.safetensors", false).ok());
  EXPECT_EQ(golden_metadata(sample_header()).count("inputs"), 0u) << "a plain golden has no inputs entry";

  // Another LoRA file under the same key: the key no longer matches.
  meta["inputs"] = InputDigests{{std::string(64, '9')}, std::string(64, '2'), ""}.to_json().dump();
  auto swapped = read_golden_metadata(meta, "g.safetensors");
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(check_golden_header(*swapped, "g.safetensors", false).status().code(), StatusCode::kCorruption);
  // Digests that do not fit the settings are a corrupt golden.
  meta["inputs"] = InputDigests{{}, std::string(64, '2'), ""}.to_json().dump();
  EXPECT_EQ(read_golden_metadata(meta, "g.safetensors").status().code(), StatusCode::kCorruption);
}

TEST(GoldenFormatTest, HeaderChecksNameTheFile) {
  GoldenHeader wrong_key = sample_header();
  wrong_key.key = std::string(64, '0');
  auto k = check_golden_header(wrong_key, "x.safetensors", true);
  EXPECT_EQ(k.status().code(), StatusCode::kCorruption);
  EXPECT_NE(k.status().message().find("x.safetensors: key"), std::string::npos);

  GoldenHeader unpinned = sample_header();
  unpinned.provenance = GoldenProvenance{};
  auto refused = check_golden_header(unpinned, "x.safetensors", false);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("missing: reference, reference_version"), std::string::npos);
  auto accepted = check_golden_header(unpinned, "x.safetensors", true);
  ASSERT_TRUE(accepted.ok());
  EXPECT_FALSE(*accepted);
}

TEST(GoldenFormatTest, FindGoldenFileLooksForTheKeyedName) {
  auto dir = temp_dir("find");
  const std::string key(64, 'f');
  EXPECT_EQ(find_golden_file(dir, key).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(write_file_atomic(dir / golden_file_name(key), "x").ok());
  auto found = find_golden_file(dir, key);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->filename().string(), key + ".safetensors");
}

}  // namespace
}  // namespace hipq::spec
