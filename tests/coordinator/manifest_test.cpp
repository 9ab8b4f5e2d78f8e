#include "coordinator/manifest.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "base/fs.h"
#include "db/database.h"
#include "db/job_store.h"
#include "db/schema.h"
#include "spec/png.h"
#include "tests/coordinator/manifest_test_util.h"

namespace hipq::coordinator {
namespace {

using testing::ManifestDir;

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// True when some problem line starts with "<file>:<line>:<col>: <field>:" and contains `text`.
bool has_problem(const Status& s, const std::string& file, int line, int col, const std::string& field,
                 const std::string& text) {
  std::string head = file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + field + ":";
  for (const auto& l : lines_of(s.message())) {
    if (l.rfind(head, 0) == 0 && l.find(text) != std::string::npos) return true;
  }
  return false;
}

constexpr char kMinimal[] = R"yaml(
model: synthetic:tiny-sdxl
prompts:
  - a cat
)yaml";

TEST(ManifestTest, MinimalManifestTakesDefaults) {
  ManifestDir dir;
  auto path = dir.write("my run.yaml", kMinimal);
  auto m = parse_manifest(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->batch_name, "my-run");  // from the file name
  EXPECT_EQ(m->model, "synthetic:tiny-sdxl");
  EXPECT_EQ(m->max_attempts, 3);
  EXPECT_EQ(m->priority, 0);
  EXPECT_EQ(m->defaults.width, 1024);
  EXPECT_EQ(m->defaults.steps, 30);
  EXPECT_EQ(m->defaults.seeds, (std::vector<uint64_t>{0}));
  EXPECT_EQ(m->parity.golden, "store");
  EXPECT_EQ(m->outputs.root, dir.path() / "out");
  EXPECT_EQ(m->outputs.save, (std::vector<std::string>{"latent", "png", "timings"}));
  EXPECT_EQ(m->text, std::string(kMinimal));
  EXPECT_EQ(m->sha256, sha256_hex(kMinimal));
  EXPECT_EQ(m->job_count(), 1);
}

constexpr char kFull[] = R"yaml(
batch: sweep-1
priority: 4
max_attempts: 5
model: weights/model.safetensors
defaults:
  width: 512
  height: 768
  steps: 20
  guidance: 7.1
  sampler: dpmpp_2m_karras
  precision: bf16
  rng: torch-cuda
  seeds: {from: 10, count: 3}
  repeats: 2
  negative_prompt: ugly
parity:
  golden: goldens
  gate: {cosine_min: 0.99, max_abs_max: 0.5}
  allow_unpinned: yes
outputs:
  directory: results
  save: [latent]
  layout: "{batch}/p{prompt:03}/s{seed}-r{repeat}"
prompts:
  - first prompt
  - text: second prompt
    negative: ""
    tags: [a, b]
    seeds: [99]
  - text: third prompt
    tags: {style: oil}
)yaml";

// The manifest accepts exactly the samplers of spec/generation_settings.h (the
// engine's list): a sampler added there is accepted by hipq check / submit.
TEST(ManifestTest, EverySharedSamplerIsAcceptedAndAnUnknownOneListsThem) {
  ManifestDir dir;
  for (const std::string& sampler : spec::known_samplers()) {
    auto m = parse_manifest(dir.write(sampler + ".yaml", std::string("model: synthetic:tiny-sdxl\ndefaults:\n  sampler: ") +
                                                             sampler + "\nprompts:\n  - a cat\n"));
    ASSERT_TRUE(m.ok()) << sampler << ": " << m.status().ToString();
    EXPECT_EQ(m->expand_jobs().front().settings.sampler, sampler);
  }
  auto bad = parse_manifest(dir.write("sde.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  sampler: dpmpp_sde\n"
                                                  "prompts:\n  - a cat\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sde.yaml:3:12: defaults.sampler: unknown value 'dpmpp_sde'"), std::string::npos)
      << bad.status().message();
  EXPECT_NE(bad.status().message().find("(known: " + spec::join_names(spec::known_samplers()) + ")"),
            std::string::npos)
      << bad.status().message();
}

// SDXL-Turbo-shaped settings: the schedule options reach every job, the
// database row and the wire's settings; bad values are found at check time.
TEST(ManifestTest, ScheduleOptionsReachEveryJobAndBadOnesAreNamed) {
  ManifestDir dir;
  auto m = parse_manifest(dir.write("turbo.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  sampler: euler_ancestral\n"
                                                  "  steps: 1\n  guidance: 0\n  timestep_spacing: trailing\n"
                                                  "  guidance_rescale: 0.7\nprompts:\n  - a cat\n  - a dog\n"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const auto& j : m->expand_jobs()) {
    EXPECT_EQ(j.settings.timestep_spacing, "trailing");
    EXPECT_FLOAT_EQ(j.settings.guidance_rescale, 0.7f);
    EXPECT_TRUE(j.settings.validate().ok());
  }
  const db::NewBatch b = m->to_new_batch();
  ASSERT_EQ(b.jobs.size(), 2u);
  EXPECT_EQ(b.jobs[0].timestep_spacing, "trailing");
  EXPECT_DOUBLE_EQ(b.jobs[0].guidance_rescale, 0.7);  // the float's 6-digit text, as guidance

  auto bad = parse_manifest(dir.write("bad.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  timestep_spacing: trail\n"
                                                  "  guidance_rescale: 2\nprompts:\n  - a cat\n"));
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.status().message();
  EXPECT_NE(msg.find("bad.yaml:3:21: defaults.timestep_spacing: unknown value 'trail'; did you mean 'trailing'?"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("bad.yaml:4:21: defaults.guidance_rescale"), std::string::npos) << msg;
}

// vae_precision: absent, every job leaves the decode's dtype to the precision
// (""); in defaults it reaches every job, the database row and the wire's
// settings; a prompt's own overrides it for that prompt's jobs; an unknown
// value is named with its place and the allowed values.
TEST(ManifestTest, VaePrecisionReachesEveryJobAPromptOverridesItAndBadValuesAreNamed) {
  ManifestDir dir;
  auto plain = parse_manifest(dir.write("plain.yaml", "model: synthetic:tiny-sdxl\nprompts:\n  - a cat\n"));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->defaults.vae_precision, "");
  EXPECT_EQ(plain->expand_jobs().front().settings.vae_precision, "");
  EXPECT_FALSE(plain->expand_jobs().front().settings.to_json().contains("vae_precision"));
  EXPECT_EQ(plain->to_new_batch().jobs.front().vae_precision, "");

  auto m = parse_manifest(dir.write("fast.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  precision: fp16\n"
                                                 "  vae_precision: bf16\n  seeds: [1, 2]\nprompts:\n  - a cat\n"
                                                 "  - {text: a dog, vae_precision: fp32}\n"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto jobs = m->expand_jobs();
  ASSERT_EQ(jobs.size(), 4u);
  for (const auto& j : jobs) {
    EXPECT_EQ(j.settings.vae_precision, j.prompt == "a cat" ? "bf16" : "fp32") << j.prompt;
    EXPECT_TRUE(j.settings.validate().ok());
  }
  const db::NewBatch b = m->to_new_batch();
  ASSERT_EQ(b.jobs.size(), 4u);
  EXPECT_EQ(b.jobs[0].vae_precision, "bf16");
  EXPECT_EQ(b.jobs[1].vae_precision, "bf16");
  EXPECT_EQ(b.jobs[2].vae_precision, "fp32");
  EXPECT_EQ(b.jobs[3].vae_precision, "fp32");

  auto bad = parse_manifest(dir.write("bad.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  vae_precision: fp16\n"
                                                  "prompts:\n  - {text: a cat, vae_precision: bf61}\n"));
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.status().message();
  EXPECT_NE(msg.find("bad.yaml:3:18: defaults.vae_precision: unknown value 'fp16'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("(known: fp32, bf16)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("prompts[0].vae_precision: unknown value 'bf61'; did you mean 'bf16'?"), std::string::npos)
      << msg;
}

TEST(ManifestTest, LorasInitImageAndRefinerReachEveryJobPinnedByTheirFiles) {
  ManifestDir dir;
  const std::string lora = testing::safetensors_with({"lora_unet_x.lora_down.weight", "lora_unet_x.lora_up.weight"});
  dir.write("adapters/style.safetensors", lora);
  dir.write("adapters/detail.safetensors", testing::safetensors_with({"unet.x.lora_A.weight", "unet.x.lora_B.weight"}));
  ASSERT_TRUE(spec::write_png(dir.path() / "inits/fox.png", spec::RgbImage{64, 48, std::vector<uint8_t>(64 * 48 * 3, 9)}).ok());
  auto m = parse_manifest(dir.write("i2i.yaml", R"yaml(
model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 48
  steps: 10
  loras:
    - {path: adapters/style.safetensors, scale: 0.8}
    - adapters/detail.safetensors
  init_image: inits/fox.png
  strength: 0.7
prompts:
  - a fox
  - a hare
)yaml"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const std::string style = (dir.path() / "adapters/style.safetensors").string();
  const std::string detail = (dir.path() / "adapters/detail.safetensors").string();
  const std::string init = (dir.path() / "inits/fox.png").string();
  const std::vector<spec::LoraSpec> want_loras = {{style, 0.8f}, {detail, 1.0f}};
  const auto jobs = m->expand_jobs();
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& j : jobs) {
    EXPECT_EQ(j.settings.loras, want_loras);
    EXPECT_EQ(j.settings.init_image, init);
    EXPECT_FLOAT_EQ(j.settings.strength, 0.7f);
    EXPECT_EQ(j.settings.refiner, "");
    EXPECT_TRUE(j.settings.validate().ok()) << j.settings.validate().ToString();
  }
  const spec::InputDigests want_inputs{{sha256_hex(lora), *sha256_file(detail)}, *sha256_file(init), ""};
  EXPECT_EQ(m->defaults.inputs, want_inputs);

  // Through the database and back, as the worker will be sent them.
  auto db = db::Database::open_in_memory();
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(db::migrate(**db).ok());
  db::JobStore store(**db);
  auto id = store.insert_batch(m->to_new_batch(), 1);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto rows = store.list_jobs(*id);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].generation_settings(), jobs[1].settings);
  EXPECT_EQ((*rows)[1].inputs, want_inputs);
}

TEST(ManifestTest, BadLorasInitImagesAndRefinersAreNamedWithTheirPlace) {
  ManifestDir dir;
  dir.write("not-a-lora.safetensors", testing::safetensors_with({"conv_in.weight"}));
  ASSERT_TRUE(spec::write_png(dir.path() / "small.png", spec::RgbImage{8, 8, std::vector<uint8_t>(8 * 8 * 3, 1)}).ok());
  auto bad = parse_manifest(dir.write("bad.yaml", R"yaml(model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 48
  loras:
    - {path: missing.safetensors, scal: 2}
    - not-a-lora.safetensors
    - {path: not-a-lora.safetensors, scale: 40}
  init_image: small.png
  refiner: {model: synthetic:tiny-sdxll, switch_at: 1}
prompts: [a cat]
)yaml"));
  ASSERT_FALSE(bad.ok());
  const Status& s = bad.status();
  const std::string file = (dir.path() / "bad.yaml").string();
  EXPECT_TRUE(has_problem(s, file, 6, 35, "defaults.loras[0].scal", "unknown key 'scal'; did you mean 'scale'?"))
      << s.message();
  EXPECT_TRUE(has_problem(s, file, 7, 7, "defaults.loras[1]", "holds no LoRA pairs")) << s.message();
  EXPECT_TRUE(has_problem(s, file, 8, 45, "defaults.loras[2].scale", "40 is out of range -16..16")) << s.message();
  EXPECT_TRUE(has_problem(s, file, 9, 15, "defaults.init_image", "small.png")) << s.message();
  EXPECT_TRUE(has_problem(s, file, 10, 20, "defaults.refiner.model", "did you mean 'tiny-sdxl'?")) << s.message();
  EXPECT_TRUE(has_problem(s, file, 10, 53, "defaults.refiner.switch_at", "must be in (0, 1)")) << s.message();

  auto missing = parse_manifest(dir.write("missing.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n"
                                                          "  loras: [{path: gone.safetensors}]\nprompts: [a cat]\n"));
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(has_problem(missing.status(), (dir.path() / "missing.yaml").string(), 3, 18, "defaults.loras[0]",
                          "gone.safetensors does not exist"))
      << missing.status().message();

  auto lone = parse_manifest(dir.write("lone.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  strength: 0.5\n"
                                                    "prompts: [a cat]\n"));
  ASSERT_FALSE(lone.ok());
  EXPECT_TRUE(has_problem(lone.status(), (dir.path() / "lone.yaml").string(), 3, 3, "defaults.strength",
                          "strength needs init_image"))
      << lone.status().message();
}

TEST(ManifestTest, ARefinerReachesEveryJobAndItsUnimplementedCombinationsAreNamed) {
  ManifestDir dir;
  auto m = parse_manifest(dir.write("refined.yaml", R"yaml(model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 64
  refiner: {model: synthetic:tiny-sdxl-refiner, switch_at: 0.75, aesthetic_score: 7}
prompts: [a fox, a hare]
)yaml"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto jobs = m->expand_jobs();
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& j : jobs) {
    EXPECT_EQ(j.settings.refiner, "synthetic:tiny-sdxl-refiner");
    EXPECT_FLOAT_EQ(j.settings.refiner_switch_at, 0.75f);
    EXPECT_FLOAT_EQ(j.settings.aesthetic_score, 7.0f);
    EXPECT_FLOAT_EQ(j.settings.negative_aesthetic_score, 2.5f);
    EXPECT_TRUE(j.settings.validate().ok()) << j.settings.validate().ToString();
  }

  ASSERT_TRUE(spec::write_png(dir.path() / "fox.png", spec::RgbImage{64, 64, std::vector<uint8_t>(64 * 64 * 3, 9)}).ok());
  auto bad = parse_manifest(dir.write("bad-refiner.yaml", R"yaml(model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 64
  sampler: heun
  refiner: synthetic:tiny-sdxl-refiner
prompts: [a cat]
)yaml"));
  ASSERT_FALSE(bad.ok());
  const std::string file = (dir.path() / "bad-refiner.yaml").string();
  EXPECT_TRUE(has_problem(bad.status(), file, 6, 3, "defaults.refiner", "sampler 'heun' with a refiner"))
      << bad.status().message();
  auto both = parse_manifest(dir.write("both.yaml", R"yaml(model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 64
  init_image: fox.png
  strength: 0.5
  refiner: synthetic:tiny-sdxl-refiner
prompts: [a cat]
)yaml"));
  ASSERT_FALSE(both.ok());
  EXPECT_TRUE(has_problem(both.status(), (dir.path() / "both.yaml").string(), 7, 3, "defaults.refiner",
                          "a refiner with init_image is not implemented"))
      << both.status().message();
}

// The refiner run as the img2img model takes its aesthetic scores from the
// defaults; beside a refiner: mapping they are refused with where they go.
TEST(ManifestTest, AestheticScoresForTheRefinerAsTheImg2imgModel) {
  ManifestDir dir;
  ASSERT_TRUE(spec::write_png(dir.path() / "fox.png", spec::RgbImage{64, 64, std::vector<uint8_t>(64 * 64 * 3, 9)}).ok());
  auto m = parse_manifest(dir.write("scored.yaml", R"yaml(model: synthetic:tiny-sdxl-refiner
defaults:
  width: 64
  height: 64
  init_image: fox.png
  strength: 0.5
  aesthetic_score: 9
  negative_aesthetic_score: 1.5
prompts: [a fox]
)yaml"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const auto jobs = m->expand_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_FLOAT_EQ(jobs[0].settings.aesthetic_score, 9.0f);
  EXPECT_FLOAT_EQ(jobs[0].settings.negative_aesthetic_score, 1.5f);

  auto twice = parse_manifest(dir.write("twice.yaml", R"yaml(model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 64
  refiner: {model: synthetic:tiny-sdxl-refiner}
  aesthetic_score: 9
prompts: [a fox]
)yaml"));
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(has_problem(twice.status(), (dir.path() / "twice.yaml").string(), 6, 3, "defaults.aesthetic_score",
                          "set it inside refiner:"))
      << twice.status().message();
  auto range = parse_manifest(dir.write("range.yaml", "model: synthetic:tiny-sdxl\ndefaults:\n  aesthetic_score: 11\n"
                                                      "prompts: [a cat]\n"));
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("defaults.aesthetic_score"), std::string::npos) << range.status().message();
}

TEST(ManifestTest, FullManifestExpandsPromptsTimesSeedsTimesRepeats) {
  ManifestDir dir;
  dir.write("weights/model.safetensors", "x");
  std::filesystem::create_directories(dir.path() / "goldens");
  auto m = parse_manifest(dir.write("sub/../m.yaml", kFull));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->model, (dir.path() / "weights/model.safetensors").string());
  EXPECT_EQ(m->parity.golden, (dir.path() / "goldens").string());
  spec::ParityGate gate;
  ASSERT_TRUE(gate.set("cosine_min", 0.99).ok());
  gate.max_abs_max = 0.5;
  EXPECT_EQ(m->parity.gate, gate);
  EXPECT_TRUE(m->parity.allow_unpinned);
  EXPECT_EQ(m->outputs.root, dir.path() / "results");
  // 3 seeds x 2 repeats for prompts 0 and 2, 1 seed x 2 repeats for prompt 1.
  EXPECT_EQ(m->job_count(), 6 + 2 + 6);
  std::vector<ManifestJob> jobs = m->expand_jobs();
  ASSERT_EQ(jobs.size(), 14u);
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(jobs[i].ordinal, static_cast<int64_t>(i));
  EXPECT_EQ(jobs[0].seed, 10u);
  EXPECT_EQ(jobs[0].repeat, 0);
  EXPECT_EQ(jobs[1].seed, 10u);
  EXPECT_EQ(jobs[1].repeat, 1);
  EXPECT_EQ(jobs[5].seed, 12u);
  EXPECT_EQ(jobs[6].prompt, "second prompt");
  EXPECT_EQ(jobs[6].seed, 99u);
  EXPECT_EQ(jobs[6].negative_prompt, "");  // explicit empty beats the default
  EXPECT_EQ(jobs[6].tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(jobs[0].negative_prompt, "ugly");
  EXPECT_EQ(jobs[13].tags, (std::vector<std::string>{"style:oil"}));
  EXPECT_EQ(jobs[0].output_dir, "sweep-1/p000/s10-r0");
  EXPECT_EQ(jobs[13].output_dir, "sweep-1/p002/s12-r1");
  const nlohmann::json s = jobs[6].settings.to_json();
  EXPECT_EQ(s["prompt"], "second prompt");
  EXPECT_EQ(s["seed"], 99);
  EXPECT_EQ(s["width"], 512);
  EXPECT_EQ(s["height"], 768);
  EXPECT_EQ(s["steps"], 20);
  EXPECT_EQ(s["guidance"].get<double>(), 7.1);  // through the engine's 6-digit form
  EXPECT_EQ(s["sampler"], "dpmpp_2m_karras");
  EXPECT_EQ(s["precision"], "bf16");
  EXPECT_EQ(s["rng"], "torch-cuda");
  EXPECT_EQ(s.size(), 10u);
}

TEST(ManifestTest, NewBatchCarriesEverythingAndInsertsIntoTheJobStore) {
  ManifestDir dir;
  dir.write("weights/model.safetensors", "x");
  std::filesystem::create_directories(dir.path() / "goldens");
  auto m = parse_manifest(dir.write("m.yaml", kFull));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  db::NewBatch b = m->to_new_batch();
  EXPECT_EQ(b.name, "sweep-1");
  EXPECT_EQ(b.priority, 4);
  EXPECT_EQ(b.max_attempts, 5);
  EXPECT_EQ(b.save, (std::vector<std::string>{"latent"}));
  EXPECT_EQ(b.manifest_text, std::string(kFull));
  ASSERT_EQ(b.jobs.size(), 14u);
  EXPECT_EQ(b.jobs[6].model, m->model);
  EXPECT_EQ(b.jobs[6].seed, 99u);
  EXPECT_EQ(b.jobs[6].width, 512);
  EXPECT_EQ(b.jobs[6].prompt, "second prompt");
  EXPECT_EQ(b.jobs[6].rng, "torch-cuda");

  auto database = db::Database::open_in_memory();
  ASSERT_TRUE(database.ok());
  ASSERT_TRUE(db::migrate(**database).ok());
  db::JobStore store(**database);
  auto id = store.insert_batch(b, 1000.0);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto jobs = store.list_jobs(*id);
  ASSERT_EQ(jobs->size(), 14u);
  EXPECT_EQ((*jobs)[13].output_dir, "sweep-1/p002/s12-r1");
  EXPECT_EQ(store.get_batch(*id)->parity_gate, m->parity.gate) << "the gate reads back as it was given";
  auto manifest = store.get_manifest(store.get_batch(*id)->manifest_id);
  EXPECT_EQ(manifest->sha256, m->sha256);
  EXPECT_EQ(manifest->text, m->text);
}

// The acceptance case: one malformed manifest, every problem reported with
// file, line, column and field.
constexpr char kMalformed[] =
    "batch: \"my batch!\"\n"               // 1
    "modle: synthetic:tiny-sdxl\n"         // 2
    "defaults:\n"                          // 3
    "  width: 100\n"                       // 4
    "  steps: many\n"                      // 5
    "  sampler: eulr\n"                    // 6
    "  seeeds: [1, 2]\n"                   // 7
    "parity:\n"                            // 8
    "  gate: {cosine: 0.9}\n"              // 9
    "outputs:\n"                           // 10
    "  save: [latent, jpeg]\n"             // 11
    "prompts:\n"                           // 12
    "  - a cat\n"                          // 13
    "  - {negative: x}\n"                  // 14
    "  - text: \"\"\n";                    // 15

TEST(ManifestTest, MalformedManifestReportsEveryProblemWithLineAndColumn) {
  ManifestDir dir;
  auto path = dir.write("bad.yaml", kMalformed);
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  const Status& s = m.status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  std::string f = path.string();
  EXPECT_TRUE(has_problem(s, f, 1, 8, "batch", "not a valid batch name")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 2, 1, "modle", "did you mean 'model'")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 1, 1, "model", "missing")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 4, 10, "defaults.width", "not a multiple of 8")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 5, 10, "defaults.steps", "expected an integer")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 6, 12, "defaults.sampler", "did you mean 'euler'")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 7, 3, "defaults.seeeds", "did you mean 'seeds'")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 9, 10, "parity.gate.cosine", "did you mean 'cosine_min'")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 11, 18, "outputs.save[1]", "unknown value 'jpeg'")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 14, 5, "prompts[1]", "missing text")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 15, 11, "prompts[2].text", "empty prompt")) << s.message();
  EXPECT_EQ(lines_of(s.message()).size(), 11u) << s.message();
}

TEST(ManifestTest, YamlSyntaxErrorHasLineAndColumn) {
  ManifestDir dir;
  auto path = dir.write("syntax.yaml", "model: synthetic:tiny-sdxl\nprompts: [a cat, b dog\nbatch: x\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  auto lines = lines_of(m.status().message());
  ASSERT_EQ(lines.size(), 1u) << m.status().message();
  EXPECT_EQ(lines[0].rfind(path.string() + ":3:", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(": yaml: "), std::string::npos) << lines[0];
}

TEST(ManifestTest, TabIndentationAndDuplicateKeysAndWrongShapes) {
  ManifestDir dir;
  auto path = dir.write("shapes.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "model: synthetic:tiny-sd15\n"
                        "defaults: [1, 2]\n"
                        "outputs: {save: latent, layout: \"{batch}/{sed}\"}\n"
                        "prompts: a single string\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  const Status& s = m.status();
  std::string f = path.string();
  EXPECT_TRUE(has_problem(s, f, 2, 1, "model", "duplicate key (first given at line 1)")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 3, 11, "defaults", "expected a mapping")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 4, 17, "outputs.save", "non-empty list")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 4, 33, "outputs.layout", "unknown placeholder {sed}; did you mean 'seed'"))
      << s.message();
  EXPECT_TRUE(has_problem(s, f, 5, 10, "prompts", "expected a list")) << s.message();
}

TEST(ManifestTest, SeedFormsAndTheirErrors) {
  ManifestDir dir;
  auto ok = parse_manifest(dir.write("ok.yaml",
                                     "model: synthetic:tiny-sdxl\n"
                                     "defaults: {seeds: 18446744073709551615}\n"
                                     "prompts: [a, {text: b, seeds: {count: 2}}]\n"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  auto jobs = ok->expand_jobs();
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].seed, 18446744073709551615ull);
  EXPECT_EQ(jobs[1].seed, 0u);
  EXPECT_EQ(jobs[2].seed, 1u);

  auto path = dir.write("bad.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "defaults: {seeds: [1, -2, 1]}\n"
                        "prompts:\n"
                        "  - {text: a, seeds: {from: 0}}\n"
                        "  - {text: b, seeds: []}\n"
                        "  - {text: c, seeds: {from: 18446744073709551615, count: 2}}\n");
  auto bad = parse_manifest(path);
  ASSERT_FALSE(bad.ok());
  const Status& s = bad.status();
  std::string f = path.string();
  EXPECT_TRUE(has_problem(s, f, 2, 23, "defaults.seeds[1]", "non-negative")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 2, 27, "defaults.seeds[2]", "appears twice")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 4, 22, "prompts[0].seeds", "needs count")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 5, 22, "prompts[1].seeds", "empty")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 6, 22, "prompts[2].seeds", "passes 2^64 - 1")) << s.message();
}

TEST(ManifestTest, PathsAreRelativeToTheManifestNotTheWorkingDirectory) {
  ManifestDir dir;
  dir.write("cfg/prompts/list.txt", "from a file\n");
  auto m = parse_manifest(dir.write("cfg/m.yaml",
                                    "model: synthetic:tiny-sdxl\n"
                                    "outputs: {directory: ../runs}\n"
                                    "prompts_file: prompts/list.txt\n"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->outputs.root, dir.path() / "runs");
  ASSERT_EQ(m->prompts.size(), 1u);
  EXPECT_EQ(m->prompts[0].where.file, (dir.path() / "cfg/prompts/list.txt").string());
  EXPECT_EQ(m->prompts[0].where.line, 1);
}

TEST(ManifestTest, MissingFilesAreReportedWithTheirManifestLocation) {
  ManifestDir dir;
  auto path = dir.write("m.yaml",
                        "model: no/such/model\n"
                        "parity: {golden: no-goldens}\n"
                        "prompts_file: [missing.txt, {path: bad.jsonl}]\n");
  dir.write("bad.jsonl", "{\"prompt\": \"fine\"}\n{\"prompt\": 3}\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  const Status& s = m.status();
  std::string f = path.string();
  EXPECT_TRUE(has_problem(s, f, 1, 8, "model", "does not exist")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 2, 18, "parity.golden", "not a directory")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 3, 16, "prompts_file[0]", "cannot read")) << s.message();
  // A problem inside a prompt file names that file and its line.
  EXPECT_TRUE(has_problem(s, (dir.path() / "bad.jsonl").string(), 2, 1, "prompts_file[1]", "\"prompt\""))
      << s.message();
}

TEST(ManifestTest, PartiPromptsManifestExpandsWithTags) {
  if (testing::source_dir().empty()) GTEST_SKIP() << "HIPQ_SOURCE_DIR not set (run through ctest)";
  ManifestDir dir;
  auto tsv = std::filesystem::weakly_canonical(testing::parti_prompts_tsv());
  auto m = parse_manifest(dir.write("parti.yaml", "model: synthetic:tiny-sdxl\n"
                                                  "defaults: {seeds: [0, 1]}\n"
                                                  "prompts_file: " + tsv.string() + "\n"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->prompts.size(), 1632u);
  EXPECT_EQ(m->job_count(), 3264);
  db::NewBatch b = m->to_new_batch();
  ASSERT_EQ(b.jobs.size(), 3264u);
  EXPECT_EQ(b.jobs[0].prompt, "bond");
  EXPECT_EQ(b.jobs[0].tags[0], "Category:Abstract");
  EXPECT_EQ(b.jobs[3263].seed, 1u);
  std::set<std::string> dirs;
  for (const auto& j : b.jobs) dirs.insert(j.output_dir);
  EXPECT_EQ(dirs.size(), 3264u);
}

// ---- output confinement ----------------------------------------------------------

TEST(ManifestTest, LayoutThatLeavesTheRootIsRefused) {
  ManifestDir dir;
  auto path = dir.write("m.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "outputs: {layout: \"../{batch}-{seed}\"}\n"
                        "prompts: [a]\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has_problem(m.status(), path.string(), 2, 19, "outputs.layout", "'..'")) << m.status().message();
  auto abs = parse_manifest(dir.write("abs.yaml",
                                      "model: synthetic:tiny-sdxl\n"
                                      "outputs: {layout: \"/{batch}/{seed}\"}\n"
                                      "prompts: [a]\n"));
  ASSERT_FALSE(abs.ok());
  EXPECT_NE(abs.status().message().find("is absolute"), std::string::npos) << abs.status().message();
}

TEST(ManifestTest, SymlinkEscapeIsRefusedOnTheRealFilesystem) {
  ManifestDir dir;
  ManifestDir elsewhere;
  std::filesystem::create_directories(dir.path() / "out");
  std::filesystem::create_directory_symlink(elsewhere.path(), dir.path() / "out" / "escape");
  std::filesystem::create_directories(dir.path() / "out" / "real");
  std::filesystem::create_directory_symlink(dir.path() / "out" / "real", dir.path() / "out" / "inside");
  auto path = dir.write("m.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "outputs: {layout: \"escape/{seed}\"}\n"
                        "prompts: [a]\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has_problem(m.status(), path.string(), 2, 19, "outputs.layout", "symbolic link"))
      << m.status().message();
  // A link that stays inside the root is fine.
  auto ok = parse_manifest(dir.write("ok.yaml",
                                     "model: synthetic:tiny-sdxl\n"
                                     "outputs: {layout: \"inside/{seed}\"}\n"
                                     "prompts: [a]\n"));
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(ManifestTest, CheckConfinedDirectly) {
  ManifestDir dir;
  EXPECT_TRUE(check_confined(dir.path(), "a/b/c").ok());
  EXPECT_TRUE(check_confined(dir.path() / "not-yet", "a").ok());
  EXPECT_FALSE(check_confined(dir.path(), "").ok());
  EXPECT_FALSE(check_confined(dir.path(), "/etc").ok());
  EXPECT_FALSE(check_confined(dir.path(), "a/../../b").ok());
  EXPECT_FALSE(check_confined(dir.path(), "./a").ok());
  std::filesystem::create_directory_symlink("/", dir.path() / "root-link");
  Status s = check_confined(dir.path(), "root-link/etc");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos);
}

TEST(ManifestTest, LayoutThatMergesJobsIsRefused) {
  ManifestDir dir;
  auto path = dir.write("m.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "defaults: {seeds: [1, 2]}\n"
                        "outputs: {layout: \"{batch}/{prompt}\"}\n"
                        "prompts: [a, b]\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has_problem(m.status(), path.string(), 3, 19, "outputs.layout", "jobs 0 and 1 would both write"))
      << m.status().message();
  EXPECT_EQ(lines_of(m.status().message()).size(), 2u);  // (0,1) and (2,3)
}

TEST(ManifestTest, TheBatchCapIsASettingAndItsRefusalNamesIt) {
  ManifestDir dir;
  auto path = dir.write("m.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "defaults: {seeds: {from: 0, count: 10}}\n"
                        "prompts: [a, b, c]\n");
  auto capped = parse_manifest(path, 29);
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("expands to 30 jobs, more than 29 jobs, the batch cap (--max-batch-jobs"),
            std::string::npos)
      << capped.status().message();
  auto ranged = parse_manifest(dir.write("r.yaml",
                                         "model: synthetic:tiny-sdxl\n"
                                         "defaults: {seeds: {from: 0, count: 40}}\n"
                                         "prompts: [a]\n"),
                               29);
  ASSERT_FALSE(ranged.ok());
  EXPECT_NE(ranged.status().message().find("--max-batch-jobs"), std::string::npos) << ranged.status().message();
  auto fits = parse_manifest(path, 30);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->job_count(), 30);
  // The default cap, and one past the hard bound is the hard bound.
  EXPECT_TRUE(parse_manifest(path).ok());
  EXPECT_TRUE(parse_manifest(path, kMaxBatchJobsLimit + 1).ok());
}

TEST(ManifestTest, StreamedJobsAreTheExpandedJobs) {
  ManifestDir dir;
  auto m = parse_manifest(dir.write("m.yaml",
                                    "model: synthetic:tiny-sdxl\n"
                                    "defaults: {seeds: [3, 1], repeats: 2, negative_prompt: blur}\n"
                                    "prompts: [a, {text: b, tags: [x:y], seeds: [9]}]\n"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const db::NewBatch whole = m->to_new_batch();
  const db::NewBatch streamed = m->to_streamed_batch();
  EXPECT_TRUE(streamed.jobs.empty());
  std::vector<db::NewJob> seen;
  ASSERT_TRUE(db::for_each_new_job(streamed, [&](const db::NewJob& j) {
                seen.push_back(j);
                return Status::Ok();
              }).ok());
  ASSERT_EQ(seen.size(), whole.jobs.size());
  ASSERT_EQ(seen.size(), 6u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].ordinal, whole.jobs[i].ordinal);
    EXPECT_EQ(seen[i].prompt, whole.jobs[i].prompt);
    EXPECT_EQ(seen[i].seed, whole.jobs[i].seed);
    EXPECT_EQ(seen[i].tags, whole.jobs[i].tags);
    EXPECT_EQ(seen[i].output_dir, whole.jobs[i].output_dir);
    EXPECT_EQ(seen[i].negative_prompt, "blur");
  }
  EXPECT_EQ(seen[4].tags, (std::vector<std::string>{"x:y"}));
  EXPECT_EQ(streamed.manifest_text, whole.manifest_text);
}

TEST(ManifestTest, ManyJobsUnderOneParentAreConfinedAndTheirDuplicatesFound) {
  ManifestDir dir;
  ManifestDir elsewhere;
  std::filesystem::create_directories(dir.path() / "out" / "b");
  // A job folder that exists as a link out of the root, among siblings that
  // do not exist yet under the same parent: only the link is refused.
  std::filesystem::create_directory_symlink(elsewhere.path(), dir.path() / "out" / "b" / "7");
  auto path = dir.write("m.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "defaults: {seeds: {from: 0, count: 2000}}\n"
                        "outputs: {layout: \"b/{seed}\"}\n"
                        "prompts: [a]\n");
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(has_problem(m.status(), path.string(), 3, 19, "outputs.layout", "symbolic link")) << m.status().message();
  EXPECT_EQ(lines_of(m.status().message()).size(), 1u) << m.status().message();
  std::filesystem::remove(dir.path() / "out" / "b" / "7");
  EXPECT_TRUE(parse_manifest(path).ok());
  // 2,000 jobs in pairs on one folder each: every pair is found by its hash
  // and compared by text; five are named, the rest counted.
  auto merged = parse_manifest(dir.write("merged.yaml",
                                         "model: synthetic:tiny-sdxl\n"
                                         "defaults: {seeds: {from: 0, count: 1000}, repeats: 2}\n"
                                         "outputs: {layout: \"b/{seed}\"}\n"
                                         "prompts: [a]\n"));
  ASSERT_FALSE(merged.ok());
  EXPECT_TRUE(has_problem(merged.status(), path.parent_path().string() + "/merged.yaml", 3, 19, "outputs.layout",
                          "jobs 0 and 1 would both write to 'b/0'"))
      << merged.status().message();
  EXPECT_NE(merged.status().message().find("995 more duplicate output directories"), std::string::npos)
      << merged.status().message();
}

TEST(ManifestTest, EmptyAndMultiDocumentFiles) {
  ManifestDir dir;
  auto empty = parse_manifest(dir.write("empty.yaml", "# nothing here\n"));
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty"), std::string::npos);
  auto two = parse_manifest(dir.write("two.yaml", std::string(kMinimal) + "---\nmodel: x\n"));
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("more than one YAML document"), std::string::npos);
  auto missing = parse_manifest(dir.path() / "nope.yaml");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST(ManifestTest, PromptFileSampleSeedStratifyAndOffset) {
  ManifestDir dir;
  dir.write("p.tsv", "Prompt\tCategory\na\tX\nb\tX\nc\tX\nd\tY\ne\tY\nf\tZ\n");
  auto m = parse_manifest(dir.write("m.yaml",
                                    "model: synthetic:tiny-sdxl\n"
                                    "prompts_file: {path: p.tsv, sample: 3, seed: 11, stratify: Category}\n"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->prompts.size(), 3u);
  std::set<std::string> cats;
  for (const auto& p : m->prompts) cats.insert(p.tags.at(0));
  EXPECT_EQ(cats, (std::set<std::string>{"Category:X", "Category:Y", "Category:Z"}));
  auto again = parse_manifest(dir.write("m2.yaml",
                                        "model: synthetic:tiny-sdxl\n"
                                        "prompts_file: {path: p.tsv, sample: 3, seed: 11, stratify: Category}\n"));
  ASSERT_TRUE(again.ok());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(m->prompts[i].text, again->prompts[i].text);

  auto off = parse_manifest(dir.write("off.yaml", "model: synthetic:tiny-sdxl\n"
                                                  "prompts_file: {path: p.tsv, offset: 4, limit: 1}\n"));
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  ASSERT_EQ(off->prompts.size(), 1u);
  EXPECT_EQ(off->prompts[0].text, "e");
}

TEST(ManifestTest, PromptFileSamplingProblemsHaveLineAndColumn) {
  ManifestDir dir;
  dir.write("p.tsv", "Prompt\tCategory\na\tX\nb\tY\n");
  auto path = dir.write("bad.yaml",
                        "model: synthetic:tiny-sdxl\n"                                   // 1
                        "prompts_file:\n"                                                // 2
                        "  - {path: p.tsv, sample: 1, limit: 1}\n"                      // 3
                        "  - {path: p.tsv, seed: 4}\n"                                   // 4
                        "  - {path: p.tsv, sample: 0}\n"                                 // 5
                        "  - {path: p.tsv, sample: 1, stratify: 'Category:X'}\n"         // 6
                        "  - {path: p.tsv, offset: -1}\n");                              // 7
  auto m = parse_manifest(path);
  ASSERT_FALSE(m.ok());
  const Status& s = m.status();
  std::string f = path.string();
  EXPECT_TRUE(has_problem(s, f, 3, 37, "prompts_file[0].limit", "limit and sample exclude each other")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 4, 19, "prompts_file[1].seed", "seed needs sample")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 5, 27, "prompts_file[2].sample", "out of range 1..")) << s.message();
  EXPECT_TRUE(has_problem(s, f, 6, 40, "prompts_file[3].stratify", "expected a tag name such as Category"))
      << s.message();
  EXPECT_TRUE(has_problem(s, f, 7, 27, "prompts_file[4].offset", "out of range 0..")) << s.message();
  EXPECT_EQ(lines_of(s.message()).size(), 5u) << s.message();

  // Problems found once the file is read: too large a sample, a tag no prompt has.
  auto late = dir.write("late.yaml",
                        "model: synthetic:tiny-sdxl\n"
                        "prompts_file:\n"
                        "  - {path: p.tsv, sample: 3}\n"
                        "  - {path: p.tsv, sample: 1, stratify: Categroy}\n"
                        "  - {path: p.tsv, offset: 2}\n");
  auto l = parse_manifest(late);
  ASSERT_FALSE(l.ok());
  const Status& t = l.status();
  std::string lf = late.string();
  EXPECT_TRUE(has_problem(t, lf, 3, 27, "prompts_file[0].sample", "sample 3 is more than the 2 prompts")) << t.message();
  EXPECT_TRUE(has_problem(t, lf, 4, 40, "prompts_file[1].stratify", "did you mean 'Category'")) << t.message();
  EXPECT_TRUE(has_problem(t, lf, 5, 5, "prompts_file[2]", "offset 2 skips every prompt")) << t.message();
}

TEST(ManifestTest, ExamplesAreValid) {
  if (testing::source_dir().empty()) GTEST_SKIP() << "HIPQ_SOURCE_DIR not set (run through ctest)";
  struct Example {
    const char* file;
    int64_t jobs;
  };
  for (Example e : {Example{"quickstart.yaml", 4}, Example{"seed-sweep.yaml", 32}, Example{"prompt-files.yaml", 8},
                    Example{"partiprompts-sdxl.yaml", 1632}, Example{"partiprompts-sample.yaml", 48}}) {
    auto m = parse_manifest(testing::source_dir() / "examples" / e.file);
    ASSERT_TRUE(m.ok()) << e.file << ": " << m.status().ToString();
    EXPECT_EQ(m->job_count(), e.jobs) << e.file;
  }
  auto q = parse_manifest(testing::source_dir() / "examples" / "quickstart.yaml");
  EXPECT_EQ(q->defaults.width, 64);
  EXPECT_EQ(q->defaults.steps, 4);
  EXPECT_EQ(q->outputs.root.filename(), "hipq-out");
}

}  // namespace
}  // namespace hipq::coordinator
