// Fault-injection suite (label slow): real coordinator and worker processes
// on loopback, killed at random points, while a batch runs. Each test prints
// one "[ figures  ]" line: jobs, faults injected, lost, doubled, and the
// longest time the queue stood still after a fault. docs/reliability.md
// records the figures of the last run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "db/database.h"
#include "db/statement.h"
#include "tests/base/test_strings.h"
#include "tests/coordinator/process_harness.h"

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

fs::path storm_manifest(const fs::path& dir, int prompts, int seeds) {
  std::ostringstream m;
  m << "batch: storm\nmax_attempts: 100\nmodel: synthetic:tiny-sdxl\n"
    << "defaults: {width: 64, height: 64, steps: 4, seeds: {from: 0, count: " << seeds << "}}\n"
    << "parity: {golden: none}\noutputs: {directory: out, save: [latent]}\nprompts:\n";
  for (int i = 0; i < prompts; ++i) m << "  - storm prompt " << i << "\n";
  fs::path p = dir / "storm.yaml";
  std::ofstream(p) << m.str();
  return p;
}

struct Tally {
  int64_t done, results, distinct, done_attempts;
};
Tally tally(const fs::path& db) {
  return {query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'done'"),
          query_int(db, "SELECT COUNT(*) FROM results"), query_int(db, "SELECT COUNT(DISTINCT job_id) FROM results"),
          query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'done'")};
}

// Longest stretch without a new done job, sampled while `running`.
class StallMeter {
 public:
  explicit StallMeter(fs::path db) : db_(std::move(db)) {}
  void sample() {
    int64_t d = query_int(db_, "SELECT COUNT(*) FROM jobs WHERE state = 'done'");
    auto now = Clock::now();
    if (d != last_done_) {
      last_done_ = d;
      last_change_ = now;
    }
    worst_ = std::max(worst_, std::chrono::duration<double>(now - last_change_).count());
  }
  double worst() const { return worst_; }

 private:
  fs::path db_;
  int64_t last_done_ = -1;
  Clock::time_point last_change_ = Clock::now();
  double worst_ = 0;
};

TEST(FaultInjectionTest, WorkerSigkillStorm) {
  TempDir tmp;
  const fs::path db = tmp.path() / "hipq.db";
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  constexpr int kWorkers = 4, kJobs = 400, kKills = 50;
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < kWorkers; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:60ms"));
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", storm_manifest(tmp.path(), 40, 10).string(), "--connect", ep}), 0);
  std::mt19937 rng(15);
  StallMeter stall(db);
  int kills = 0;
  auto start = Clock::now();
  while (kills < kKills && Clock::now() - start < 240s) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 400)(rng)));
    stall.sample();
    if (tally(db).done >= kJobs - 20) break;  // leave work to finish
    int i = std::uniform_int_distribution<int>(0, kWorkers - 1)(rng);
    workers[i]->signal(SIGKILL);
    workers[i]->wait();
    ++kills;
    // A supervisor restarts it under the same id (its log starts afresh).
    workers[i] = start_worker(tmp.path(), numbered("w", i), ep, "sleep:60ms");
  }
  ASSERT_TRUE(wait_until([&] { stall.sample(); return tally(db).done == kJobs; }, 120s))
      << tally(db).done << " done\n" << coord->err().substr(0, 10000);
  Tally t = tally(db);
  EXPECT_EQ(t.results, kJobs);
  EXPECT_EQ(t.distinct, kJobs);
  EXPECT_EQ(t.done_attempts, kJobs);
  EXPECT_EQ(kills, kKills);
  std::cout << "[ figures  ] worker SIGKILL storm: jobs " << kJobs << ", kills " << kills << ", lost "
            << kJobs - t.distinct << ", doubled " << t.results - t.distinct << ", longest stall " << stall.worst()
            << " s\n";
}

TEST(FaultInjectionTest, CoordinatorSigkillStorm) {
  TempDir tmp;
  const fs::path db = tmp.path() / "hipq.db";
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord0", &ep);
  constexpr int kWorkers = 3, kJobs = 600, kKills = 15;
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < kWorkers; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:60ms"));
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", storm_manifest(tmp.path(), 60, 10).string(), "--connect", ep}), 0);
  std::mt19937 rng(16);
  StallMeter stall(db);
  int kills = 0;
  double worst_resume = 0;
  while (kills < kKills) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1200)(rng)));
    if (tally(db).done >= kJobs - 10) break;
    coord->signal(SIGKILL);
    coord->wait();
    ++kills;
    int64_t before = tally(db).done;
    std::string ep2;
    coord = start_coordinator(tmp.path(), numbered("coord", kills), &ep2, ep);
    ASSERT_EQ(ep2, ep);
    auto back = Clock::now();
    ASSERT_TRUE(wait_until([&] { return tally(db).done > before; }, 30s)) << coord->err();
    worst_resume = std::max(worst_resume, std::chrono::duration<double>(Clock::now() - back).count());
  }
  ASSERT_TRUE(wait_until([&] { stall.sample(); return tally(db).done == kJobs; }, 120s)) << coord->err();
  Tally t = tally(db);
  EXPECT_EQ(t.results, kJobs);
  EXPECT_EQ(t.distinct, kJobs);
  EXPECT_EQ(t.done_attempts, kJobs);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM attempts WHERE error LIKE '%busy%'"), 0);
  EXPECT_EQ(kills, kKills);
  std::cout << "[ figures  ] coordinator SIGKILL storm: jobs " << kJobs << ", kills " << kills << ", lost "
            << kJobs - t.distinct << ", doubled " << t.results - t.distinct << ", busy refusals counted 0"
            << ", longest resume " << worst_resume << " s\n";
}

}  // namespace
}  // namespace hipq::testing
