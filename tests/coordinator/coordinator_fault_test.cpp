// The coordinator under faults of its own machine, with real processes: the
// database's disk filling up and coming back (a small tmpfs; needs root to
// mount, skips otherwise), and long queries beside the write loop. Each test
// prints one "[ figures  ]" line.
#include <algorithm>
#include <sys/mount.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "db/database.h"
#include "db/statement.h"
#include "tests/base/test_strings.h"
#include "tests/coordinator/process_harness.h"
#include "tests/coordinator/raw_peer.h"

namespace hipq::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int64_t query_int(const fs::path& db_path, const std::string& sql) {
  auto db = db::Database::open(db_path);
  if (!db.ok()) return -1;
  db::Statement s = (*db)->prepare(sql);
  auto row = s.step();
  if (!row.ok() || !*row) return -1;
  return s.column_int64(0);
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A tmpfs of `size` mounted on `dir` (created); no mount when `size` is null.
class SmallTmpfs {
 public:
  SmallTmpfs(const fs::path& dir, const char* size) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = size != nullptr &&
               ::mount("tmpfs", dir.c_str(), "tmpfs", 0, (std::string("size=") + size).c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  fs::path dir_;
  bool mounted_ = false;
};

// Writes until the file system says ENOSPC; returns the bytes written.
int64_t fill(const fs::path& file) {
  FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) return 0;
  std::string chunk(64 * 1024, 'x');
  int64_t n = 0;
  while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
    if (std::fflush(f) != 0) break;
    n += static_cast<int64_t>(chunk.size());
  }
  std::fclose(f);
  return n;
}

TEST(CoordinatorFaultTest, DatabaseDiskFullForSecondsThenBackLosesNothingAndTheQueueMovesAgain) {
  TempDir tmp;
  SmallTmpfs dbfs(tmp.path() / "dbfs", "16m");
  if (!dbfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  const fs::path db = tmp.path() / "dbfs" / "hipq.db";
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep, "tcp://127.0.0.1:*",
                                 {"--db", db.string(), "--golden-dir", (tmp.path() / "goldens").string()});
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:20ms"));
  }
  fs::path manifest = write_sleep_manifest(tmp.path(), "full", 30, 20);  // 600 jobs
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  auto done = [&] { return query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'done'"); };
  ASSERT_TRUE(wait_until([&] { return done() >= 50; }, 30s)) << coord->err();
  int64_t filled = fill(tmp.path() / "dbfs" / "filler");
  std::this_thread::sleep_for(4s);
  int64_t done_while_full = done();
  fs::remove(tmp.path() / "dbfs" / "filler");
  auto back = Clock::now();
  // Within a few seconds of space returning, jobs finish again.
  ASSERT_TRUE(wait_until([&] { return done() > done_while_full + 20; }, 20s))
      << "queue stalled after the disk came back: " << done() << " done\n"
      << coord->err().substr(0, 20000);
  double resume_s = seconds_since(back);
  ASSERT_TRUE(wait_until([&] { return done() == 600; }, 90s)) << done() << " done\n" << coord->err().substr(0, 20000);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results"), 600);
  EXPECT_EQ(query_int(db, "SELECT COUNT(DISTINCT job_id) FROM results"), 600);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'done'"), 600);
  auto h = db::Database::open(db);
  ASSERT_TRUE(h.ok());
  db::Statement ic = (*h)->prepare("PRAGMA integrity_check");
  ASSERT_TRUE(ic.step().ok());
  EXPECT_EQ(ic.column_text(0), "ok");
  const std::string log = coord->err();
  size_t failures = 0;
  for (size_t p = log.find("group commit failed"); p != std::string::npos; p = log.find("group commit failed", p + 1)) {
    ++failures;
  }
  EXPECT_GT(failures, 0u) << "the fault did not bite: no commit failed";
  std::cout << "[ figures  ] db disk full 4 s (" << filled / 1024 << " KiB filler): jobs 600, failed commits "
            << failures << ", lost 0, doubled 0, resumed " << resume_s << " s after space returned\n";
}

// Files left in `dir` whose names show an unfinished write (write_file_atomic's
// temporaries) or that are empty.
std::vector<std::string> unfinished_files(const fs::path& dir) {
  std::vector<std::string> bad;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::string name = it->path().filename().string();
    if (name.find(".tmp") != std::string::npos || name.rfind(".hipq-", 0) == 0 || it->file_size() == 0)
      bad.push_back(it->path().string());
  }
  return bad;
}

// One real worker (real pipeline, tiny model on the CPU) running `jobs` jobs
// whose outputs go to a tmpfs of `size` at dir/outfs (a plain folder when
// `size` is null); the batch is submitted.
struct OutputDiskBatch {
  OutputDiskBatch(const fs::path& dir, const char* size, const std::string& batch, int jobs, int max_attempts)
      : mount(dir / "outfs", size), db(dir / "hipq.db"), out(dir / "outfs" / "out") {
    if (size != nullptr && !mount.mounted()) return;
    coord = start_coordinator(dir, "coord", &ep);
    worker = start_worker(dir, "w0", ep, "engine");
    std::ostringstream m;
    m << "batch: " << batch << "\nmax_attempts: " << max_attempts << "\nmodel: synthetic:tiny-sdxl\n"
      << "defaults: {width: 64, height: 64, steps: 2, seeds: {from: 0, count: " << jobs / 2 << "}}\n"
      << "parity: {golden: none}\noutputs: {directory: " << out.string() << ", save: [latent, png, timings]}\n"
      << "prompts:\n  - a red fox\n  - a blue bird\n";
    const fs::path manifest = dir / (batch + ".yaml");
    std::ofstream(manifest) << m.str();
    submitted = run_hipq(dir, "submit", {"submit", manifest.string(), "--connect", ep}) == 0;
  }
  int64_t done() const { return query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'done'"); }
  std::string logs() const { return coord->err().substr(0, 10000) + worker->err().substr(0, 10000); }

  SmallTmpfs mount;
  fs::path db, out;
  std::string ep;
  std::unique_ptr<Process> coord, worker;
  bool submitted = false;
};

// The output disk fills up under a real worker (real pipeline, tiny model on
// the CPU), then space comes back. Writes that fail are I/O errors, retried;
// every job ends done exactly once, and no half-written or temporary file is
// left where the outputs go.
TEST(CoordinatorFaultTest, OutputDiskFullForSecondsThenBackFinishesEveryJobAndLeavesNoPartialFile) {
  TempDir tmp;
  constexpr int kJobs = 12;
  OutputDiskBatch b(tmp.path(), "4m", "outfull", kJobs, 20);
  if (!b.mount.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  ASSERT_TRUE(b.submitted);
  const fs::path& db = b.db;
  auto done = [&] { return b.done(); };
  auto failed_attempts = [&] { return query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'failed'"); };
  ASSERT_TRUE(wait_until([&] { return done() >= 2; }, 60s)) << b.logs();
  const int64_t filled = fill(tmp.path() / "outfs" / "filler");
  ASSERT_TRUE(wait_until([&] { return failed_attempts() >= 1; }, 30s))
      << "no write failed while the disk was full\n" << b.logs();
  std::this_thread::sleep_for(2s);
  fs::remove(tmp.path() / "outfs" / "filler");
  ASSERT_TRUE(wait_until([&] { return done() == kJobs; }, 120s)) << done() << " done\n" << b.logs();
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results"), kJobs);
  EXPECT_EQ(query_int(db, "SELECT COUNT(DISTINCT job_id) FROM results"), kJobs);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'failed'"), 0);
  const int64_t failures = failed_attempts();
  EXPECT_GE(query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'failed' AND error LIKE '%No space left%'"), 1)
      << "the failed writes should name the cause";
  const std::vector<std::string> bad = unfinished_files(b.out);
  EXPECT_TRUE(bad.empty()) << bad.size() << " unfinished file(s), first: " << (bad.empty() ? "" : bad[0]);
  std::cout << "[ figures  ] output disk full (" << filled / 1024 << " KiB filler): jobs " << kJobs
            << ", failed writes " << failures << ", lost 0, doubled 0, unfinished files " << bad.size() << "\n";
}

// The output disk turns read-only mid-batch (remounted): a configuration
// error, so the batch stops with the reason and the path instead of burning
// attempts job by job; the jobs done before keep their results and files, and
// nothing half-written is left.
TEST(CoordinatorFaultTest, OutputDiskTurningReadOnlyStopsTheBatchWithThePathAndKeepsWhatWasDone) {
  TempDir tmp;
  constexpr int kJobs = 40;
  OutputDiskBatch b(tmp.path(), "16m", "outro", kJobs, 3);
  if (!b.mount.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  ASSERT_TRUE(b.submitted);
  const fs::path& db = b.db;
  const fs::path& out = b.out;
  auto done = [&] { return b.done(); };
  ASSERT_TRUE(wait_until([&] { return done() >= 3; }, 60s)) << b.logs();
  const fs::path mnt = tmp.path() / "outfs";
  ASSERT_EQ(::mount(nullptr, mnt.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  auto settled = [&] { return query_int(db, "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'leased')") == 0; };
  ASSERT_TRUE(wait_until(settled, 60s)) << b.logs();
  const int64_t done_jobs = done();
  const int64_t failed = query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'failed'");
  EXPECT_EQ(done_jobs + failed, kJobs);
  EXPECT_GT(failed, 0);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results"), done_jobs);
  EXPECT_GE(query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'failed' AND error LIKE '%" + out.string() +
                              "%' AND error LIKE '%Read-only file system%'"),
            1);
  // Attempts were not burned one by one: the batch stopped at the first
  // refusal (a write already under way may fail once before it); the jobs
  // left were failed by the coordinator without running, saying why.
  EXPECT_LE(query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'failed' AND worker_id <> 'coordinator'"), 2);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM attempts WHERE worker_id = 'coordinator' AND error LIKE "
                          "'not run:%configuration error%Read-only file system%'"),
            failed - query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'failed' AND worker_id <> 'coordinator' "
                                   "AND attempt = (SELECT attempts FROM jobs WHERE jobs.id = attempts.job_id)"));
  ASSERT_EQ(::mount(nullptr, mnt.c_str(), nullptr, MS_REMOUNT, nullptr), 0) << std::strerror(errno);
  const std::vector<std::string> bad = unfinished_files(out);
  EXPECT_TRUE(bad.empty()) << bad.size() << " unfinished file(s), first: " << (bad.empty() ? "" : bad[0]);
  std::cout << "[ figures  ] output disk read-only: jobs " << kJobs << ", done before " << done_jobs
            << ", failed with the reason " << failed << ", unfinished files " << bad.size() << "\n";
}

// The user deletes the whole output tree (rm -rf) while a real worker runs a
// batch: five bursts, each deleting it over and over for 500 ms, so writes
// under way are hit at every stage (directories being made, the write check,
// temporaries, renames, files just written). Outputs are written atomically
// with their parents created, so jobs after a deletion finish with their
// files; a write a deletion hits is redone, or its attempt fails as an I/O
// error and is retried, never as a configuration error or bad input. Every
// job ends done exactly once, the worker keeps running, no temporary or
// partial file is left, and every job recorded after the last deletion has
// its files as hashed. Files of jobs that had finished before a deletion are
// gone; their records stay (nothing checks the files again later).
TEST(CoordinatorFaultTest, OutputDirectoryDeletedMidBatchFinishesEveryJobWithItsFilesAndKeepsTheWorker) {
  TempDir tmp;
  constexpr int kJobs = 16;
  constexpr int kBursts = 5;
  OutputDiskBatch b(tmp.path(), nullptr, "outgone", kJobs, 20);
  ASSERT_TRUE(b.submitted) << b.logs();
  const fs::path& db = b.db;
  auto done = [&] { return b.done(); };
  int64_t deletions = 0;  // rm -rf calls that removed something
  double last_deletion = 0;
  for (int burst = 0; burst < kBursts; ++burst) {
    ASSERT_TRUE(wait_until([&] { return done() >= 2 + 2 * burst; }, 60s)) << done() << " done\n" << b.logs();
    const auto end = Clock::now() + 500ms;
    while (Clock::now() < end) {
      std::error_code ec;
      if (fs::remove_all(b.out, ec) > 0) ++deletions;
    }
    last_deletion = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  }
  auto settled = [&] { return query_int(db, "SELECT COUNT(*) FROM jobs WHERE state IN ('queued', 'leased')") == 0; };
  ASSERT_TRUE(wait_until(settled, 120s)) << done() << " done\n" << b.logs();
  EXPECT_EQ(done(), kJobs) << b.logs();
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM jobs WHERE state <> 'done'"), 0)
      << "a deleted directory failed jobs: "
      << [&] {
           auto d = db::Database::open(db);
           db::Statement st = (*d)->prepare("SELECT error FROM attempts WHERE state = 'failed' ORDER BY id LIMIT 3");
           std::string errors;
           while (*st.step()) errors += st.column_text(0) + "\n";
           return errors;
         }();
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results"), kJobs);
  EXPECT_EQ(query_int(db, "SELECT COUNT(DISTINCT job_id) FROM results"), kJobs);
  EXPECT_TRUE(b.worker->running()) << b.logs();
  EXPECT_TRUE(b.coord->running()) << b.logs();
  EXPECT_GT(deletions, 0);
  const std::vector<std::string> bad = unfinished_files(b.out);
  EXPECT_TRUE(bad.empty()) << bad.size() << " unfinished file(s), first: " << (bad.empty() ? "" : bad[0]);

  // Each result's files, as the record names them: present with the recorded
  // hash for every job recorded after the last deletion.
  int64_t after = 0, removed_later = 0;
  {
    auto d = db::Database::open(db);
    ASSERT_TRUE(d.ok());
    db::Statement st = (*d)->prepare(
        "SELECT r.job_id, r.recorded_at, r.outputs, b.output_root FROM results r JOIN jobs j ON j.id = r.job_id "
        "JOIN batches b ON b.id = j.batch_id ORDER BY r.job_id");
    while (*st.step()) {
      const bool recorded_after = st.column_double(1) > last_deletion;
      const nlohmann::json outputs = nlohmann::json::parse(st.column_text(2));
      const fs::path root = st.column_text(3);
      EXPECT_EQ(outputs.size(), 3u) << "job " << st.column_int64(0) << ": " << outputs.dump();
      bool all_there = true;
      for (const auto& o : outputs) {
        const fs::path file = root / o["path"].get<std::string>();
        auto sha = sha256_file(file);
        if (!sha.ok()) {
          all_there = false;
          EXPECT_FALSE(recorded_after) << "job " << st.column_int64(0) << " recorded after the last deletion has no "
                                       << file;
          continue;
        }
        EXPECT_EQ(*sha, o["sha256"].get<std::string>()) << file;
      }
      after += recorded_after;
      removed_later += !all_there;
    }
  }
  EXPECT_GT(after, 0) << "no job ran after the last deletion; the test proves less than it says";
  const int64_t failed_attempts = query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'failed'");
  const int64_t lost = kJobs - query_int(db, "SELECT COUNT(DISTINCT job_id) FROM results");
  const int64_t doubled = query_int(db, "SELECT COUNT(*) - COUNT(DISTINCT job_id) FROM results");
  std::cout << "[ figures  ] output directory deleted: jobs " << kJobs << ", " << kBursts << " bursts, " << deletions
            << " rm -rf that removed something, failed attempts " << failed_attempts << " (retried), lost " << lost
            << ", doubled " << doubled << ", "
            << "jobs whose files a later deletion removed " << removed_later << ", recorded after the last deletion "
            << after << " (files all present), unfinished files " << bad.size() << "\n";
}

TEST(CoordinatorFaultTest, ALongQueryDoesNotDelayHeartbeats) {
  TempDir tmp;
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:1ms"));
  fs::path manifest = write_sleep_manifest(tmp.path(), "many", 20, 20);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep, "--wait"}), 0);
  workers.clear();
  RawPeer probe(ep);
  proto::Envelope hello;
  hello.mutable_hello()->set_worker_id("probe");
  hello.mutable_hello()->set_backend("sleep");
  probe.send(hello);
  ASSERT_TRUE(probe.recv(3s, proto::Envelope::kWelcome).has_value());
  // The query must outlast two heartbeat periods to tell anything; machines
  // differ, so the bootstrap grows until it does (the service allows 10^6).
  double query_s = 0, max_gap = 0;
  for (int resamples = 100000; resamples <= 1000000 && query_s <= 2.0; resamples = std::min(resamples * 3, 1000000)) {
    std::atomic<bool> query_done{false};
    bool query_ok = false;
    std::thread client([&] {
      RawPeer c(ep);
      proto::Envelope q;
      q.mutable_query()->set_kind("stats");
      q.mutable_query()->set_args_json(R"({"resamples": )" + std::to_string(resamples) +
                                       R"(, "group_by": ["model", "steps", "host", "gpu"]})");
      auto t0 = Clock::now();
      auto r = c.call(q, 300s);
      query_s = seconds_since(t0);
      query_ok = r && r->has_query_reply() && r->query_reply().ok();
      query_done = true;
    });
    max_gap = 0;
    auto last = Clock::now();
    while (!query_done.load()) {
      if (probe.recv(100ms, proto::Envelope::kHeartbeat)) {
        max_gap = std::max(max_gap, seconds_since(last));
        last = Clock::now();
        proto::Envelope hb;
        hb.mutable_heartbeat();
        probe.send(hb);
      }
    }
    client.join();
    max_gap = std::max(max_gap, seconds_since(last));
    EXPECT_TRUE(query_ok) << resamples << " resamples";
    std::cout << "[ figures  ] stats query with " << resamples << " resamples: " << query_s
              << " s, longest heartbeat gap " << max_gap << " s\n";
    EXPECT_LT(max_gap, 1.6) << "heartbeats (every 1 s) waited for the query";
    if (resamples == 1000000) break;
  }
  ASSERT_GT(query_s, 2.0) << "the query is too quick to tell";
}

}  // namespace
}  // namespace hipq::testing
