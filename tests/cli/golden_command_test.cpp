// `hipq golden` as a user runs it: the real binary on a real database, with
// the committed diffusers goldens, damaged copies of them, an unpinned one,
// a second-precision set for the floor, and a run promoted from `hipq generate`.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "db/database.h"
#include "db/golden_store.h"
#include "engine/golden.h"

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

fs::path goldens(const std::string& folder) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  return fs::path(src != nullptr ? src : ".") / "tests" / "data" / "goldens" / folder;
}

class GoldenCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("hipq_golden_cmd_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = (dir_ / "hipq.db").string();
  }
  CmdResult golden(const std::string& args) { return hipq("golden --db " + db_ + " " + args); }
  size_t count_files(const fs::path& d) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(d)) n += e.path().extension() == ".safetensors";
    return n;
  }
  fs::path dir_;
  std::string db_;
};

TEST_F(GoldenCommandTest, ImportListShowVerify) {
  const size_t n = count_files(goldens("tiny"));
  CmdResult imp = golden("import " + goldens("tiny").string());
  ASSERT_EQ(imp.status, 0) << imp.out;
  EXPECT_NE(imp.out.find(std::to_string(n) + " imported, 0 already present, 0 refused"), std::string::npos) << imp.out;
  EXPECT_EQ(count_files(dir_ / "goldens"), n) << "files are kept in <db dir>/goldens";
  CmdResult again = golden("import " + goldens("tiny").string());
  ASSERT_EQ(again.status, 0);
  EXPECT_NE(again.out.find("0 imported, " + std::to_string(n) + " already present"), std::string::npos) << again.out;

  CmdResult list = golden("list");
  ASSERT_EQ(list.status, 0) << list.out;
  EXPECT_NE(list.out.find(std::to_string(n) + " golden(s)"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("diffusers 0.40.0.dev0"), std::string::npos);
  EXPECT_EQ(list.out.find("UNPINNED"), std::string::npos);

  auto first = fs::directory_iterator(dir_ / "goldens")->path().stem().string();
  CmdResult show = hipq("golden show " + first.substr(0, 10) + " --db " + db_);  // --db after the sub-subcommand
  ASSERT_EQ(show.status, 0) << show.out;
  auto j = nlohmann::json::parse(show.out);
  EXPECT_EQ(j["key"], first);
  EXPECT_EQ(j["provenance"]["reference"], "diffusers");
  EXPECT_EQ(j["provenance"]["device"], "NVIDIA H200");

  CmdResult ok = golden("verify");
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find(std::to_string(n) + " golden(s), 0 bad, 0 latent-only"), std::string::npos) << ok.out;
  // Each golden says what it grades: the latent and, as these carry one, the image.
  EXPECT_NE(ok.out.find("latent [1, 4, 8, 8]  image 64x64 (default gate: cosine >= 0.999, psnr >= 40 dB at fp32)"),
            std::string::npos)
      << ok.out;

  // Damage one stored file and delete another: verify names both.
  auto victim = dir_ / "goldens" / (first + ".safetensors");
  std::string bytes = *read_file(victim);
  bytes[bytes.size() - 5] ^= 0x10;
  ASSERT_TRUE(write_file_atomic(victim, bytes).ok());
  auto it = fs::directory_iterator(dir_ / "goldens");
  fs::path other;
  for (; it != fs::directory_iterator(); ++it)
    if (it->path() != victim) other = it->path();
  fs::remove(other);
  CmdResult bad = golden("verify");
  EXPECT_EQ(bad.status, 1) << bad.out;
  EXPECT_NE(bad.out.find("MODIFIED"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("MISSING"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("2 bad"), std::string::npos) << bad.out;
}

TEST_F(GoldenCommandTest, ImportRefusesTruncatedAndTamperedFilesWithClearMessages) {
  auto src = *fs::directory_iterator(goldens("tiny"));
  std::string bytes = *read_file(src.path());
  ASSERT_TRUE(write_file_atomic(dir_ / "in" / "truncated.safetensors", bytes.substr(0, bytes.size() - 64)).ok());
  std::string flipped = bytes;
  flipped[flipped.size() - 9] ^= 0x01;
  ASSERT_TRUE(write_file_atomic(dir_ / "in" / "flipped.safetensors", flipped).ok());
  CmdResult r = golden("import " + (dir_ / "in").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("refused " + (dir_ / "in" / "truncated.safetensors").string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("content hash mismatch"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0 imported, 0 already present, 2 refused"), std::string::npos) << r.out;
}

TEST_F(GoldenCommandTest, UnpinnedOnlyWithTheFlagAndMarkedEverywhere) {
  auto g = engine::read_golden(fs::directory_iterator(goldens("tiny"))->path());
  ASSERT_TRUE(g.ok());
  engine::Golden stripped = *g;
  stripped.provenance = spec::GoldenProvenance{};
  stripped.provenance.reference = "diffusers";
  auto path = dir_ / "in" / "no-provenance.safetensors";
  ASSERT_TRUE(engine::write_golden(path, stripped).ok());
  CmdResult refused = golden("import " + path.string());
  EXPECT_EQ(refused.status, 1) << refused.out;
  EXPECT_NE(refused.out.find("provenance is incomplete"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--allow-unpinned"), std::string::npos);
  CmdResult ok = golden("import --allow-unpinned " + path.string());
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("[UNPINNED]"), std::string::npos) << ok.out;
  EXPECT_NE(golden("list").out.find("UNPINNED"), std::string::npos);
  CmdResult show = golden("show " + g->key);
  EXPECT_NE(show.out.find("UNPINNED"), std::string::npos) << show.out;
  CmdResult verify = golden("verify");
  EXPECT_EQ(verify.status, 0) << verify.out;
  EXPECT_NE(verify.out.find("[UNPINNED]"), std::string::npos) << verify.out;
}

TEST_F(GoldenCommandTest, FloorAgainstTheCpuReference) {
  ASSERT_EQ(golden("import " + goldens("tiny").string()).status, 0);
  // fp16 goldens are other keys (the precision is in the key): nothing to pair.
  CmdResult fp16 = golden(std::string("floor --against ") + goldens("tiny-fp16").string());
  EXPECT_EQ(fp16.status, 1) << fp16.out;
  EXPECT_NE(fp16.out.find("shares a key with the store"), std::string::npos) << fp16.out;
  CmdResult r = golden(std::string("floor --against ") + goldens("tiny-cpu").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("floor measured for 3 golden(s)"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
  auto d = db::Database::open(db_);
  ASSERT_TRUE(d.ok());
  db::GoldenStore store(**d);
  size_t with_floor = 0;
  auto rows = store.list();
  ASSERT_TRUE(rows.ok());
  for (const auto& r : *rows) {
    if (!r.provenance.contains("floor")) continue;
    ++with_floor;
    EXPECT_EQ(r.provenance["floor"]["against"]["device"], "x86_64") << "the CPU set was measured last";
    EXPECT_GT(r.provenance["floor"]["cosine"].get<double>(), 0.999);
  }
  EXPECT_EQ(with_floor, 3u);
  // verify reports the measured floors, latent and image.
  CmdResult v = golden("verify");
  ASSERT_EQ(v.status, 0) << v.out;
  EXPECT_NE(v.out.find("floor: cosine 1.00000000 max_abs "), std::string::npos) << v.out;
  EXPECT_NE(v.out.find(" psnr inf dB"), std::string::npos) << v.out;
}

TEST_F(GoldenCommandTest, VerifyNamesLatentOnlyGoldens) {
  auto g = engine::read_golden(fs::directory_iterator(goldens("tiny"))->path());
  ASSERT_TRUE(g.ok());
  engine::Golden latent_only = *g;
  latent_only.image.clear();
  latent_only.image_width = latent_only.image_height = 0;
  auto path = dir_ / "in" / "latent-only.safetensors";
  ASSERT_TRUE(engine::write_golden(path, latent_only).ok());
  ASSERT_EQ(golden("import " + path.string()).status, 0);
  CmdResult v = golden("verify");
  ASSERT_EQ(v.status, 0) << v.out;
  EXPECT_NE(v.out.find("no image (latent-only gate: cosine >= 0.999 at fp32)"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("1 golden(s), 0 bad, 1 latent-only"), std::string::npos) << v.out;
}

TEST_F(GoldenCommandTest, PromoteAFinishedRun) {
  // A run's outputs as the coordinator records them: a generate output folder
  // under the batch's output root, and the job/result rows pointing at it.
  const fs::path root = dir_ / "out";
  CmdResult gen = hipq("generate --model synthetic:tiny-sd15 --prompt 'a kite' --seed 11 --width 64 --height 64 --steps 2 "
                 "--backend cpu --no-progress --out " + (root / "job-1").string());
  ASSERT_EQ(gen.status, 0) << gen.out;
  {
    auto d = db::Database::open_and_migrate(db_);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    std::string sql =
        "INSERT INTO manifests (id, sha256, path, text, created_at) VALUES (1, 'm', 'm.yaml', 'x', 0);"
        "INSERT INTO batches (id, manifest_id, name, state, max_attempts, output_root, job_count, created_at)"
        "  VALUES (3, 1, 'b', 'done', 1, '" + root.string() + "', 1, 0);"
        "INSERT INTO jobs (id, batch_id, ordinal, model, prompt, seed, width, height, steps, guidance, sampler,"
        "  precision, rng, output_dir, state, created_at, updated_at) VALUES (1, 3, 0, 'synthetic:tiny-sd15',"
        "  'a kite', 11, 64, 64, 2, 5, 'euler', 'fp32', 'torch-cpu', 'job-1', 'done', 0, 0);"
        "INSERT INTO attempts (id, job_id, attempt, worker_id, started_at, state) VALUES (1, 1, 1, 'w0', 0, 'done');"
        "INSERT INTO results (job_id, attempt_id, worker_id, verdict, outputs, recorded_at) VALUES (1, 1, 'w0',"
        "  'NO_GOLDEN', '[{\"kind\":\"latent\",\"path\":\"job-1/latent.safetensors\"},"
        "{\"kind\":\"png\",\"path\":\"job-1/image.png\"}]', 0);";
    ASSERT_TRUE((*d)->execute(sql).ok());
  }
  CmdResult promote = golden("promote batch:3");
  ASSERT_EQ(promote.status, 0) << promote.out;
  EXPECT_NE(promote.out.find("1 promoted"), std::string::npos) << promote.out;
  EXPECT_NE(promote.out.find("latent + image 64x64"), std::string::npos) << "hipq's image is kept: " << promote.out;
  auto d = db::Database::open(db_);
  db::GoldenStore store(**d);
  auto rows = *store.list();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].reference, "hipq");
  EXPECT_TRUE(rows[0].pinned);
  EXPECT_NE(rows[0].provenance["provenance"]["source"].get<std::string>().find("job 1 of batch 3"), std::string::npos);
  auto g = engine::read_golden(rows[0].path);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(g->has_image());
  EXPECT_EQ(g->settings.seed, 11u);
  // The same run again, with that golden: PASS, bit for bit.
  CmdResult again = hipq("generate --model synthetic:tiny-sd15 --prompt 'a kite' --seed 11 --width 64 --height 64 "
                   "--steps 2 --backend cpu --no-progress --golden " + (dir_ / "goldens").string() + " --out " +
                   (dir_ / "again").string());
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("parity: PASS  cosine 1.00000000  max_abs 0"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("psnr inf dB"), std::string::npos) << "the image is graded too: " << again.out;
  EXPECT_EQ(golden("promote batch:3").status, 1) << "promoting twice needs --replace";
  EXPECT_EQ(golden("promote nonsense").status, 2);
}

}  // namespace
}  // namespace hipq::cli
