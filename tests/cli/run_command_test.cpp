// hipq run as a real process: resume by manifest sha256, --new-batch, SIGINT
// stops cleanly and says how to resume, HIPQ_DB, wall time and images/hour,
// failure reasons in the results table, folders of two batches never shared,
// a configuration error failing the batch at once, the summary read through
// the query layer as `hipq stats` reads it.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../coordinator/process_harness.h"
#include "db/database.h"
#include "db/job_store.h"

namespace hipq {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::run_hipq;
using testing::TempDir;
using testing::write_sleep_manifest;

struct Counts {
  int64_t batches = 0;
  std::map<std::string, int64_t> by_state;
};

Counts counts_of(const std::filesystem::path& db_path) {
  Counts c;
  auto db = db::Database::open_and_migrate(db_path.string());
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  if (!db.ok()) return c;
  db::JobStore store(**db);
  auto all = store.all_batch_counts();
  EXPECT_TRUE(all.ok());
  for (const auto& b : *all) {
    ++c.batches;
    for (const auto& [k, v] : b.by_state) c.by_state[k] += v;
  }
  return c;
}

std::vector<std::string> run_args(const std::filesystem::path& manifest, const std::filesystem::path& db,
                                  const std::string& engine = "sleep:0") {
  return {"run", manifest.string(), "--db", db.string(), "--engine", engine, "--backend", "cpu"};
}

TEST(RunCommand, TheSameManifestResumesItsBatchAndNewBatchQueuesAnother) {
  TempDir dir;
  auto manifest = write_sleep_manifest(dir.path(), "again", 2, 2);
  auto db = dir.path() / "hipq.db";
  std::string out, err;
  ASSERT_EQ(run_hipq(dir.path(), "first", run_args(manifest, db), &out, &err), 0) << out << err;
  EXPECT_EQ(counts_of(db).batches, 1);

  ASSERT_EQ(run_hipq(dir.path(), "second", run_args(manifest, db), &out, &err), 0) << out << err;
  EXPECT_NE(out.find("already finished"), std::string::npos) << out;
  EXPECT_EQ(counts_of(db).batches, 1) << "the same command must not queue the manifest again";

  auto args = run_args(manifest, db);
  args.push_back("--new-batch");
  ASSERT_EQ(run_hipq(dir.path(), "third", args, &out, &err), 0) << out << err;
  Counts c = counts_of(db);
  EXPECT_EQ(c.batches, 2);
  EXPECT_EQ(c.by_state["done"], 8);
  // The default layout has the batch id: the two batches write apart.
  auto opened = db::Database::open_and_migrate(db.string());
  ASSERT_TRUE(opened.ok());
  db::JobStore store(**opened);
  for (int64_t batch : {1, 2}) {
    auto jobs = store.list_jobs(batch);
    ASSERT_TRUE(jobs.ok());
    for (const auto& j : *jobs) EXPECT_EQ(j.output_dir.rfind("again-" + std::to_string(batch) + "/", 0), 0u) << j.output_dir;
  }
}

TEST(RunCommand, SigintLetsRunningJobsEndLeavesTheRestQueuedAndTheSameCommandResumes) {
  TempDir dir;
  auto manifest = write_sleep_manifest(dir.path(), "long", 10, 2);  // 20 jobs of 300 ms
  auto db = dir.path() / "hipq.db";
  Process run(run_args(manifest, db, "sleep:300ms"), dir.path() / "run1");
  auto done_so_far = [&] {
    std::string o = run.out();
    size_t at = o.rfind("finished, done ");
    return at == std::string::npos ? 0 : std::atoi(o.c_str() + at + 15);
  };
  ASSERT_TRUE(testing::wait_until([&] { return done_so_far() >= 2 || !run.running(); }, 20s))
      << run.out() << run.err();
  run.signal(SIGINT);
  int code = run.wait(20s);
  std::string out = run.out();
  EXPECT_EQ(code, 130) << out << run.err();
  EXPECT_NE(out.find("stopped: "), std::string::npos) << out;
  EXPECT_NE(out.find("resume with: hipq run " + manifest.string() + " --db " + db.string()), std::string::npos) << out;
  Counts c = counts_of(db);
  EXPECT_EQ(c.by_state["leased"], 0) << "a stopped run leaves no job leased";
  EXPECT_GE(c.by_state["done"], 2);
  EXPECT_GT(c.by_state["queued"], 0);
  EXPECT_EQ(c.by_state["failed"] + c.by_state["dead"] + c.by_state["cancelled"], 0);

  std::string out2, err2;
  ASSERT_EQ(run_hipq(dir.path(), "run2", run_args(manifest, db, "sleep:10ms"), &out2, &err2), 0) << out2 << err2;
  EXPECT_NE(out2.find("resuming batch 1"), std::string::npos) << out2;
  c = counts_of(db);
  EXPECT_EQ(c.batches, 1);
  EXPECT_EQ(c.by_state["done"], 20);
}

TEST(RunCommand, HonoursHipqDbAndEndsWithWallTimeAndImagesPerHour) {
  TempDir dir;
  auto manifest = write_sleep_manifest(dir.path(), "env", 1, 3);
  auto db = dir.path() / "from-env.db";
  ASSERT_EQ(setenv("HIPQ_DB", db.string().c_str(), 1), 0);
  std::string out, err;
  int code = run_hipq(dir.path(), "env", {"run", manifest.string(), "--engine", "sleep:0", "--backend", "cpu"}, &out,
                      &err);
  unsetenv("HIPQ_DB");
  ASSERT_EQ(code, 0) << out << err;
  EXPECT_TRUE(std::filesystem::exists(db));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "hipq.db"));
  EXPECT_NE(out.find("wall time "), std::string::npos) << out;
  EXPECT_NE(out.find("3 image(s) this run"), std::string::npos) << out;
  EXPECT_NE(out.find("images/hour"), std::string::npos) << out;
  EXPECT_EQ(out.find(" info "), std::string::npos) << "log lines belong on stderr:\n" << out;
}

TEST(RunCommand, ThePhaseTimingsAreWhatHipqStatsSaysForTheBatch) {
  TempDir dir;
  auto manifest = write_sleep_manifest(dir.path(), "summary", 2, 2);
  auto db = dir.path() / "hipq.db";
  std::string out, err;
  ASSERT_EQ(run_hipq(dir.path(), "run", run_args(manifest, db, "sleep:5ms"), &out, &err), 0) << out << err;
  size_t table = out.find("phase timings (host ms)");
  ASSERT_NE(table, std::string::npos) << out;
  std::string stats_out;
  ASSERT_EQ(run_hipq(dir.path(), "stats", {"stats", "--db", db.string(), "--batch", "1", "--format", "json"},
                     &stats_out, &err),
            0)
      << err;
  const auto stats = nlohmann::json::parse(stats_out);
  int64_t runs = 0;
  int rows = 0;
  for (const auto& g : stats["groups"]) {
    runs += g["runs"].get<int64_t>();
    for (const auto& p : g["phases"]) {
      const std::string phase = p["phase"].get<std::string>();
      if (phase == "step" || phase == "total") continue;
      char line[256];
      std::snprintf(line, sizeof line, "%-12s %-6s %5lld %10.1f %10.1f %10.1f %10.1f\n", phase.c_str(),
                    g["warmth"].get<std::string>().c_str(), static_cast<long long>(p["n"].get<int64_t>()),
                    p["mean"].get<double>(), p["p50"].get<double>(), p["p90"].get<double>(),
                    p["max"].get<double>());
      EXPECT_NE(out.find(line, table), std::string::npos) << line << "\nnot in:\n" << out.substr(table);
      ++rows;
    }
  }
  EXPECT_EQ(runs, 4) << stats_out;
  EXPECT_GT(rows, 0) << stats_out;
}

TEST(RunCommand, TheResultsTableShowsWhyAJobFailedAndJsonCarriesItWhole) {
  TempDir dir;
  auto manifest = write_sleep_manifest(dir.path(), "reasons", 1, 1, 0, "this one fails [fail]");
  auto db = dir.path() / "hipq.db";
  std::string out, err;
  ASSERT_EQ(run_hipq(dir.path(), "run", run_args(manifest, db), &out, &err), 1) << out << err;
  size_t row = out.find("this one fails [fail]");
  ASSERT_NE(row, std::string::npos) << out;
  std::string line = out.substr(row, out.find('\n', row) - row);
  EXPECT_NE(line.find("failed"), std::string::npos) << line;
  EXPECT_NE(line.find("InvalidArgument: sleep test"), std::string::npos) << line;

  ASSERT_EQ(run_hipq(dir.path(), "runs", {"runs", "--db", db.string(), "--state", "failed"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("InvalidArgument: sleep"), std::string::npos) << out;
  ASSERT_EQ(run_hipq(dir.path(), "json", {"runs", "--db", db.string(), "--state", "failed", "--format", "json"}, &out,
                     &err),
            0)
      << err;
  EXPECT_NE(out.find("InvalidArgument: sleep test double: prompt asks to fail ([fail])"), std::string::npos) << out;
}

TEST(RunCommand, TwoBatchesNeverShareAJobFolder) {
  TempDir dir;
  auto db = dir.path() / "hipq.db";
  auto write = [&](const std::string& file, const std::string& prompt) {
    std::ofstream(dir.path() / file) << "batch: same\nmodel: synthetic:tiny-sdxl\nparity: {golden: none}\n"
                                     << "outputs: {directory: out, save: [latent], layout: \"{batch}/{prompt}\"}\n"
                                     << "prompts: [\"" << prompt << "\"]\n";
    return dir.path() / file;
  };
  std::string out, err;
  ASSERT_EQ(run_hipq(dir.path(), "a", run_args(write("a.yaml", "first"), db), &out, &err), 0) << out << err;
  EXPECT_NE(run_hipq(dir.path(), "b", run_args(write("b.yaml", "second"), db), &out, &err), 0) << out << err;
  EXPECT_NE(err.find("out/same/0' belongs to batch 1"), std::string::npos) << err;
  EXPECT_NE(err.find("{batch_id}"), std::string::npos) << err;
  EXPECT_EQ(counts_of(db).batches, 1);
}

TEST(RunCommand, AConfigurationErrorFailsTheBatchAtOnceWithoutRetries) {
  TempDir dir;
  std::ofstream(dir.path() / "cfg.yaml") << "batch: cfg\nmodel: synthetic:tiny-sdxl\nmax_attempts: 3\n"
                                         << "defaults: {seeds: {from: 0, count: 40}}\nparity: {golden: none}\n"
                                         << "outputs: {directory: out, save: [latent]}\n"
                                         << "prompts: [\"broken set-up [config]\"]\n";
  auto db = dir.path() / "hipq.db";
  std::string out, err;
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(run_hipq(dir.path(), "run", run_args(dir.path() / "cfg.yaml", db, "sleep:50ms"), &out, &err), 1)
      << out << err;
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 15) << "a configuration error must not be retried job by job";
  Counts c = counts_of(db);
  EXPECT_EQ(c.by_state["failed"], 40);
  EXPECT_EQ(c.by_state["queued"] + c.by_state["leased"], 0);
  auto opened = db::Database::open_and_migrate(db.string());
  ASSERT_TRUE(opened.ok());
  db::JobStore store(**opened);
  auto jobs = store.list_jobs(1);
  ASSERT_TRUE(jobs.ok());
  int ran = 0;
  for (const auto& j : *jobs) {
    auto attempts = store.list_attempts(j.id);
    ASSERT_TRUE(attempts.ok());
    ASSERT_EQ(attempts->size(), 1u) << "job " << j.id << " was tried more than once";
    if (attempts->front().worker_id != "coordinator") ++ran;
    else EXPECT_NE(attempts->front().error->find("configuration error"), std::string::npos);
  }
  EXPECT_LE(ran, 2) << "only the job that hit the error (and at most one already leased) ran";
  EXPECT_NE(out.find("not run: job "), std::string::npos) << out;
}

}  // namespace
}  // namespace hipq
