// Fault-injection suite (label slow): real coordinator and worker processes
// on loopback, killed at random points, flooded with forged frames or talking
// through a lossy link, while a batch runs. Each test prints
// one "[ figures  ]" line: jobs, faults injected, lost, doubled, and the
// longest time the queue stood still after a fault. docs/reliability.md
// records the figures of the last run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

#include "db/database.h"
#include "db/statement.h"
#include "tests/base/test_strings.h"
#include "proto/protocol.h"
#include "tests/coordinator/lossy_link.h"
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

// A raw peer floods the coordinator while real workers run a batch: random
// bytes, truncated and wrong-version envelopes, hellos in the real workers'
// names followed by PASS results and non-retryable errors for any job,
// absurd credit, and frames over the wire limit (ZeroMQ drops that
// connection; the peer reconnects). Nothing of it may count, nothing may be
// lost or doubled, and the queue must keep moving.
TEST(FaultInjectionTest, GarbageOversizeAndForgedFramesWhileWorkersRun) {
  TempDir tmp;
  const fs::path db = tmp.path() / "hipq.db";
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  constexpr int kWorkers = 3, kJobs = 200;
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < kWorkers; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:40ms"));
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", storm_manifest(tmp.path(), 20, 10).string(), "--connect", ep}), 0);
  std::mt19937 rng(17);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  StallMeter stall(db);
  int64_t garbage = 0, forged = 0, oversize = 0;
  auto peer = std::make_unique<RawPeer>(ep);
  const std::string too_big(static_cast<size_t>(proto::kMaxMessageBytes) + 1, 'x');
  auto start = Clock::now();
  for (int round = 0; tally(db).done < kJobs && Clock::now() - start < 180s; ++round) {
    for (int i = 0; i < 40; ++i) {
      const std::string victim = numbered("w", pick(0, kWorkers - 1));
      const int64_t job = pick(1, kJobs);
      switch (pick(0, 4)) {
        case 0: {
          std::string bytes(static_cast<size_t>(pick(0, 600)), '\0');
          for (char& c : bytes) c = static_cast<char>(pick(0, 255));
          peer->send_bytes(bytes);
          ++garbage;
          break;
        }
        case 1: {
          const std::string full = hello(victim).SerializeAsString();
          peer->send_bytes(full.substr(0, static_cast<size_t>(pick(0, static_cast<int>(full.size()) - 1))));
          peer->send(hello(victim), proto::kProtocolVersion + 7);
          garbage += 2;
          break;
        }
        case 2:
          peer->send(hello(victim, job, 1));
          peer->send(pass_result(job, 1, "forged.safetensors"));
          peer->send(fatal_error(job, 1));
          forged += 3;
          break;
        case 3:
          peer->send(ready(1 << 30));
          peer->send(heartbeat(job, 1));
          forged += 2;
          break;
        default:
          peer->send(pass_result(job, pick(1, 3), "forged.safetensors"));
          ++forged;
          break;
      }
    }
    if (round % 25 == 24) {
      peer->send_bytes(too_big);
      ++oversize;
      peer = std::make_unique<RawPeer>(ep);
    }
    std::this_thread::sleep_for(20ms);
    stall.sample();
    ASSERT_TRUE(coord->running()) << coord->err().substr(0, 10000);
  }
  ASSERT_TRUE(wait_until([&] { stall.sample(); return tally(db).done == kJobs; }, 60s))
      << tally(db).done << " done\n" << coord->err().substr(0, 10000);
  Tally t = tally(db);
  EXPECT_EQ(t.results, kJobs);
  EXPECT_EQ(t.distinct, kJobs);
  EXPECT_EQ(t.done_attempts, kJobs);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'failed'"), 0);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results WHERE outputs LIKE '%forged%'"), 0);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM attempts WHERE error LIKE '%forged%'"), 0);
  EXPECT_TRUE(coord->running());
  EXPECT_GT(oversize, 0);
  std::cout << "[ figures  ] garbage, oversize and forged frames: jobs " << kJobs << ", garbage frames " << garbage
            << ", forged envelopes " << forged << ", oversize frames " << oversize << ", lost " << kJobs - t.distinct
            << ", doubled " << t.results - t.distinct << ", longest stall " << stall.worst() << " s\n";
}

// Workers reach the coordinator only through a lossy link (lossy_link.h):
// every chunk delayed 0-80 ms, now and then a direction stalled 0.3-2.5 s as
// a lost segment stalls a TCP stream, some stalls past the 3 s liveness
// window (the coordinator expires the worker and its lease; its late result
// must be refused), and connections reset inside a frame. Every job must
// still be done exactly once, none failed, and the coordinator stay up.
// HIPQ_LOSSY_LINK_SEED picks another seed for the link.
TEST(FaultInjectionTest, WorkersBehindALossyDelayingLinkFinishEveryJobOnce) {
  TempDir tmp;
  const fs::path db = tmp.path() / "hipq.db";
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  LossyLink::Options link_options;
  link_options.seed = 18;
  if (const char* s = std::getenv("HIPQ_LOSSY_LINK_SEED")) {
    link_options.seed = static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  }
  std::cout << "[ seed     ] lossy link seed " << link_options.seed << "\n";
  LossyLink link(ep, link_options);
  ASSERT_FALSE(link.endpoint().empty());
  constexpr int kWorkers = 3, kJobs = 300;
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(start_worker(tmp.path(), numbered("w", i), link.endpoint(), "sleep:30ms"));
  }
  // The client talks to the coordinator directly: the link is the workers'.
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", storm_manifest(tmp.path(), 30, 10).string(), "--connect", ep}), 0);
  StallMeter stall(db);
  auto start = Clock::now();
  const bool finished = wait_until(
      [&] {
        stall.sample();
        return tally(db).done == kJobs || !coord->running();
      },
      150s);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  const LossyLink::Figures f = link.figures();
  ASSERT_TRUE(finished && tally(db).done == kJobs)
      << tally(db).done << " done after " << took << " s (seed " << link_options.seed << ")\n"
      << coord->err().substr(0, 10000);
  Tally t = tally(db);
  EXPECT_EQ(t.results, kJobs);
  EXPECT_EQ(t.distinct, kJobs);
  EXPECT_EQ(t.done_attempts, kJobs);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM jobs WHERE state IN ('failed', 'dead')"), 0);
  EXPECT_TRUE(coord->running());
  // The link did what it is for: stalls past the liveness window and resets
  // happened, and leases were expired because of them.
  EXPECT_GT(f.stalls_over_liveness, 0);
  EXPECT_GT(f.resets, 0);
  const int64_t expired = query_int(db, "SELECT COUNT(*) FROM attempts WHERE state = 'expired'");
  EXPECT_GT(expired, 0);
  // The coordinator logs every result it drops: a late one (its lease ended)
  // or a repeat (already recorded). A report is sent again once per welcome;
  // a burst of them for one report means the worker said hello once per
  // message the coordinator answered with Reconnect after a stall.
  const std::string log = coord->err();
  int64_t late_refused = 0, repeats_dropped = 0;
  std::map<std::pair<int64_t, int64_t>, int> drops;
  for (size_t at = log.find("dropped result of job "); at != std::string::npos;
       at = log.find("dropped result of job ", at + 1)) {
    long long job = 0, attempt = 0;
    if (std::sscanf(log.c_str() + at, "dropped result of job %lld attempt %lld", &job, &attempt) != 2) continue;
    ++drops[{job, attempt}];
    const std::string line = log.substr(at, log.find('\n', at) - at);
    if (line.find("already recorded") != std::string::npos) {
      ++repeats_dropped;
    } else {
      ++late_refused;
    }
  }
  int most_drops = 0;
  for (const auto& [report, n] : drops) most_drops = std::max(most_drops, n);
  EXPECT_LE(most_drops, 3) << "one report dropped " << most_drops << " times: a resend storm";
  std::cout << "[ figures  ] lossy link (seed " << link_options.seed << "): jobs " << kJobs << ", connections "
            << f.connections << ", chunks delayed " << f.chunks_delayed << " of " << f.chunks << ", stalls " << f.stalls
            << ", stalls over the 3 s liveness window " << f.stalls_over_liveness << " (longest " << f.longest_stall_s
            << " s), resets " << f.resets << ", leases expired " << expired << ", late results refused "
            << late_refused << ", repeats dropped " << repeats_dropped << " (at most " << most_drops
            << " for one report), lost " << kJobs - t.distinct << ", doubled " << t.results - t.distinct
            << ", longest stall of the queue " << stall.worst() << " s (" << took << " s in all)\n";
}

}  // namespace
}  // namespace hipq::testing
