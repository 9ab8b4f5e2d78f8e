// What `hipq run` leaves on disk, read back as other tools read it: each job's
// image is named after its batch, job and seed and carries its settings in a
// "parameters" text chunk (read here with libpng itself), and each job folder
// holds the timings.json that `hipq generate` writes; a TSV sampled across its
// categories runs one job per category, and `hipq stats --group-by tag:Category`
// groups them by it.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "base/fs.h"
#include "db/database.h"
#include "db/job_store.h"
#include "spec/png.h"
#include "tests/spec/png_text.h"

namespace hipq::cli {
namespace {

namespace fs = std::filesystem;

struct CmdResult {
  int status = -1;
  std::string out;
};

CmdResult hipq(const std::string& args) {
  const std::string cmd = std::string(HIPQ_EXE) + " " + args + " 2>&1";
  CmdResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

fs::path temp_dir(const std::string& name) {
  auto d = fs::path(::testing::TempDir()) / ("hipq_run_outputs_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

TEST(RunOutputsTest, ImagesAreNamedAfterTheirJobAndCarryTheirSettingsBesideTimingsJson) {
  const fs::path dir = temp_dir("tiny");
  const std::string manifest = R"(batch: meta-check
model: synthetic:tiny-sdxl
defaults: {width: 64, height: 48, steps: 2, guidance: 7.5, sampler: dpmpp_2m, precision: fp32, seeds: [5, 6]}
parity: {golden: none}
outputs: {directory: out, layout: "{prompt:02}-s{seed}"}
prompts:
  - text: "a lighthouse, at dawn"
    negative: blurry
)";
  ASSERT_TRUE(write_file_atomic(dir / "m.yaml", manifest).ok());
  CmdResult r = hipq("run " + (dir / "m.yaml").string() + " --db " + (dir / "hipq.db").string() + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.out;

  auto db = db::Database::open_and_migrate((dir / "hipq.db").string());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  db::JobStore store(**db);
  auto batches = store.list_batches();
  ASSERT_TRUE(batches.ok());
  ASSERT_EQ(batches->size(), 1u);
  const int64_t batch_id = batches->front().id;
  auto jobs = store.list_jobs(batch_id);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 2u);

  std::set<std::string> names;
  for (const auto& job : *jobs) {
    SCOPED_TRACE("job " + std::to_string(job.id));
    const fs::path folder = dir / "out" / job.output_dir;
    const std::string name = "meta-check-j" + std::to_string(job.id) + "-s" + std::to_string(job.seed) + ".png";
    names.insert(name);
    ASSERT_TRUE(fs::exists(folder / name)) << "expected " << (folder / name) << "\n" << r.out;
    EXPECT_FALSE(fs::exists(folder / "image.png"));

    auto bytes = read_file(folder / name);
    ASSERT_TRUE(bytes.ok());
    auto text = hipq::testing::read_png_text_with_libpng(*bytes);
    ASSERT_TRUE(text.error.empty()) << text.error;
    const std::string& params = text.text["parameters"];
    const std::string expected_start = "a lighthouse, at dawn\nNegative prompt: blurry\nSteps: 2, Sampler: DPM++ 2M, "
                                       "CFG scale: 7.5, Seed: " + std::to_string(job.seed) + ", Size: 64x48, Model hash: ";
    EXPECT_EQ(params.rfind(expected_start, 0), 0u) << params;
    const std::regex hash("Model hash: [0-9a-f]{10}, ");
    EXPECT_TRUE(std::regex_search(params, hash)) << params;
    EXPECT_NE(params.find("Batch: meta-check (" + std::to_string(batch_id) + "), Job: " + std::to_string(job.id) +
                          ", Precision: fp32, Build: hipq "),
              std::string::npos)
        << params;
    auto meta = nlohmann::json::parse(text.text["hipq"]);
    EXPECT_EQ(meta["settings"]["seed"], job.seed);
    EXPECT_EQ(meta["job"]["id"], job.id);

    auto timings = read_file(folder / "timings.json");
    ASSERT_TRUE(timings.ok()) << "hipq run wrote no timings.json in " << folder;
    auto t = nlohmann::json::parse(*timings);
    EXPECT_EQ(t["settings"]["seed"], job.seed);
    EXPECT_EQ(t["steps"].size(), 2u);
    std::set<std::string> phases;
    for (const auto& p : t["phases"]) phases.insert(p["phase"].get<std::string>());
    for (const char* want : {"text_encode", "denoise", "decode"}) EXPECT_TRUE(phases.count(want)) << want;
    EXPECT_EQ(t["parity"]["verdict"], "NO_GOLDEN");

    // The recorded outputs name the same files.
    auto result = store.get_result(job.id);
    ASSERT_TRUE(result.ok());
    std::set<std::string> kinds;
    for (const auto& o : result->outputs) {
      kinds.insert(o.kind);
      if (o.kind == "png") {
        EXPECT_EQ(fs::path(o.path).filename(), name);
      } else if (o.kind == "timings") {
        EXPECT_EQ(fs::path(o.path).filename(), "timings.json");
      }
    }
    EXPECT_EQ(kinds, (std::set<std::string>{"latent", "png", "timings"}));
  }
  EXPECT_EQ(names.size(), 2u);
}

TEST(RunOutputsTest, SaveWithoutTimingsWritesNone) {
  const fs::path dir = temp_dir("no_timings");
  const std::string manifest = R"(batch: lean
model: synthetic:tiny-sdxl
defaults: {width: 64, height: 64, steps: 1}
parity: {golden: none}
outputs: {directory: out, save: [png], layout: "{job}"}
prompts: [a cube]
)";
  ASSERT_TRUE(write_file_atomic(dir / "m.yaml", manifest).ok());
  CmdResult r = hipq("run " + (dir / "m.yaml").string() + " --db " + (dir / "hipq.db").string() + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir / "out"))
    if (e.is_regular_file()) files.push_back(e.path().filename().string());
  ASSERT_EQ(files.size(), 1u) << r.out;
  const std::regex name("lean-j[0-9]+-s0[.]png");
  EXPECT_TRUE(std::regex_match(files[0], name)) << files[0];
}

TEST(RunOutputsTest, ASampleAcrossCategoriesRunsAndStatsGroupsItByTag) {
  const fs::path dir = temp_dir("tags");
  std::string tsv = "Prompt\tCategory\n";
  for (int i = 0; i < 9; ++i) tsv += "prompt " + std::to_string(i) + "\t" + std::string(1, "XXXXXXYYZ"[i]) + "\n";
  ASSERT_TRUE(write_file_atomic(dir / "p.tsv", tsv).ok());
  const std::string manifest = R"(batch: tagged
model: synthetic:tiny-sdxl
defaults: {width: 64, height: 64, steps: 1}
parity: {golden: none}
outputs: {directory: out, save: [timings], layout: "{prompt}"}
prompts_file: {path: p.tsv, sample: 3, seed: 5, stratify: Category}
)";
  ASSERT_TRUE(write_file_atomic(dir / "m.yaml", manifest).ok());
  const std::string db = (dir / "hipq.db").string();
  CmdResult r = hipq("run " + (dir / "m.yaml").string() + " --db " + db + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.out;

  CmdResult s = hipq("stats --db " + db + " --group-by tag:Category --phase denoise --format json");
  ASSERT_EQ(s.status, 0) << s.out;
  auto j = nlohmann::json::parse(s.out.substr(s.out.find('{')));
  EXPECT_EQ(j["group_by"], nlohmann::json::array({"tag:Category"}));
  std::map<std::string, int64_t> runs;
  for (const auto& g : j["groups"]) runs[g["key"]["tag:Category"].get<std::string>()] += g["runs"].get<int64_t>();
  EXPECT_EQ(runs, (std::map<std::string, int64_t>{{"X", 1}, {"Y", 1}, {"Z", 1}})) << j.dump(1);

  CmdResult table = hipq("stats --db " + db + " --group-by tag:Category --phase denoise");
  ASSERT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("tag:Category"), std::string::npos) << table.out;

  CmdResult bad = hipq("stats --db " + db + " --group-by tag:");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("tag:NAME"), std::string::npos) << bad.out;
}

// A manifest's LoRA and init image reach the worker: the pipeline merges the
// LoRA (its <lora:> tag and "Lora hashes" in the PNG come from the applied
// set), runs img2img, the database keeps the files' digests, and `hipq stats`
// groups the runs by LoRA set and mode.
TEST(RunOutputsTest, AManifestsLoraAndInitImageRunOnTheWorkerAndStatsGroupsByThem) {
  const fs::path dir = temp_dir("lora");
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  const fs::path corpus = fs::path(src != nullptr ? src : ".") / "tests" / "fuzz" / "corpus" / "lora";
  fs::copy_file(corpus / "kohya-sgm-linear", dir / "fox_style.safetensors");
  ASSERT_TRUE(spec::write_png(dir / "init.png", spec::RgbImage{64, 48, std::vector<uint8_t>(64 * 48 * 3, 90)}).ok());
  const std::string manifest = R"(batch: adapted
model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 48
  steps: 2
  loras: [{path: fox_style.safetensors, scale: 4}]
  init_image: init.png
  strength: 0.5
parity: {golden: none}
outputs: {directory: out, save: [png], layout: "{prompt}"}
prompts: [a red fox sleeping in the snow]
)";
  ASSERT_TRUE(write_file_atomic(dir / "m.yaml", manifest).ok());
  const std::string db = (dir / "hipq.db").string();
  CmdResult r = hipq("run " + (dir / "m.yaml").string() + " --db " + db + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.out;

  auto opened = db::Database::open_and_migrate(db);
  ASSERT_TRUE(opened.ok());
  db::JobStore store(**opened);
  auto jobs = store.list_jobs(1);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const db::JobRecord& job = jobs->front();
  EXPECT_EQ(job.inputs.loras, std::vector<std::string>{*sha256_file(dir / "fox_style.safetensors")});
  EXPECT_EQ(job.inputs.init_image, *sha256_file(dir / "init.png"));

  const fs::path png = dir / "out" / "0" / ("adapted-j" + std::to_string(job.id) + "-s0.png");
  auto bytes = read_file(png);
  ASSERT_TRUE(bytes.ok()) << png << "\n" << r.out;
  auto text = hipq::testing::read_png_text_with_libpng(*bytes);
  ASSERT_TRUE(text.error.empty()) << text.error;
  const std::string& params = text.text["parameters"];
  EXPECT_EQ(params.rfind("a red fox sleeping in the snow <lora:fox_style:4>\n", 0), 0u) << params;
  EXPECT_NE(params.find("Lora hashes: \"fox_style: "), std::string::npos) << params;
  EXPECT_NE(params.find("Denoising strength: 0.5"), std::string::npos) << params;

  CmdResult s = hipq("stats --db " + db + " --group-by lora,mode --phase denoise --format json");
  ASSERT_EQ(s.status, 0) << s.out;
  auto j = nlohmann::json::parse(s.out.substr(s.out.find('{')));
  ASSERT_EQ(j["groups"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["groups"][0]["key"]["lora"], "fox_style:4") << j.dump(1);
  EXPECT_EQ(j["groups"][0]["key"]["mode"], "img2img") << j.dump(1);
}

// A manifest's refiner reaches the worker: the worker loads the refiner beside
// the base from its model cache, the job runs base then refiner, the PNG
// names the refiner and its switch point, and `hipq stats` calls it a refiner
// run.
TEST(RunOutputsTest, AManifestsRefinerRunsOnTheWorkerBesideTheBase) {
  const fs::path dir = temp_dir("refiner");
  const std::string manifest = R"(batch: refined
model: synthetic:tiny-sdxl
defaults:
  width: 64
  height: 64
  steps: 4
  refiner: {model: synthetic:tiny-sdxl-refiner, switch_at: 0.5}
parity: {golden: none}
outputs: {directory: out, save: [png, timings], layout: "{prompt}"}
prompts: [a red fox sleeping in the snow]
)";
  ASSERT_TRUE(write_file_atomic(dir / "m.yaml", manifest).ok());
  const std::string db = (dir / "hipq.db").string();
  CmdResult r = hipq("run " + (dir / "m.yaml").string() + " --db " + db + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.out;

  auto opened = db::Database::open_and_migrate(db);
  ASSERT_TRUE(opened.ok());
  db::JobStore store(**opened);
  auto jobs = store.list_jobs(1);
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 1u);
  const db::JobRecord& job = jobs->front();
  EXPECT_EQ(job.state, db::JobState::kDone) << r.out;
  const fs::path png = dir / "out" / "0" / ("refined-j" + std::to_string(job.id) + "-s0.png");
  auto bytes = read_file(png);
  ASSERT_TRUE(bytes.ok()) << png << "\n" << r.out;
  auto text = hipq::testing::read_png_text_with_libpng(*bytes);
  ASSERT_TRUE(text.error.empty()) << text.error;
  const std::string& params = text.text["parameters"];
  EXPECT_NE(params.find("Refiner: "), std::string::npos) << params;
  EXPECT_NE(params.find("Refiner switch at: 0.5"), std::string::npos) << params;

  CmdResult s = hipq("stats --db " + db + " --group-by mode --phase denoise --format json");
  ASSERT_EQ(s.status, 0) << s.out;
  auto j = nlohmann::json::parse(s.out.substr(s.out.find('{')));
  ASSERT_EQ(j["groups"].size(), 1u) << j.dump(1);
  EXPECT_EQ(j["groups"][0]["key"]["mode"], "refiner") << j.dump(1);
}

}  // namespace
}  // namespace hipq::cli
