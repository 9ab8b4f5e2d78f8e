// The monitor of a real coordinator process (`hipq coordinator
// --metrics-bind`), SleepEngine workers (the test double, `--engine
// sleep:DURATION`) and a batch: /metrics scraped over HTTP matches the
// database the processes wrote and counts every step; a flood of hostile
// HTTP clients leaves heartbeats and leases on time; the flags refuse what
// they must. Also `hipq run --metrics-bind`.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/base/test_strings.h"
#include "tests/coordinator/monitor/monitor_process_common.h"

namespace hipq::testing {
namespace {

// A request with `n` header fields (the limit is 64).
std::string many_headers(int n) {
  std::string h = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < n; ++i) {
    h += std::string("X") + std::to_string(i);
    h += ": y\r\n";
  }
  return h + "\r\n";
}

class MonitorProcessTest : public ::testing::Test {
 protected:
  TempDir tmp;
  fs::path db() const { return tmp.path() / "hipq.db"; }
  int64_t jobs_in(const std::string& state) {
    return db_int(db(), "SELECT COUNT(*) FROM jobs WHERE state = '" + state + "'");
  }
};

TEST_F(MonitorProcessTest, ScrapedJobCountsMatchTheDatabaseAndHistogramsCountEveryStep) {
  std::string ep;
  HttpAddr addr;
  auto coord = start_monitored_coordinator(tmp.path(), &ep, &addr);
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:100ms"));
  // 8 × 3 jobs of 4 steps, and one prompt whose 3 jobs fail for good.
  fs::path manifest = write_sleep_manifest(tmp.path(), "scrape", 8, 3, 0, "this one [fail]s");
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  // While it runs, a worker shows its job.
  bool saw_running = false;
  ASSERT_TRUE(wait_until(
      [&] {
        HttpReply r = http_get(addr, "/api/status");
        if (r.status != 200) return false;
        auto j = nlohmann::json::parse(r.body, nullptr, false);
        for (const auto& w : j["workers"]) {
          if (w["job"].is_object() && w["job"]["prompt"].is_string()) saw_running = true;
        }
        return saw_running;
      },
      std::chrono::seconds(15)));
  ASSERT_TRUE(wait_until([&] { return jobs_in("done") + jobs_in("failed") + jobs_in("dead") == 27; },
                         std::chrono::seconds(60)))
      << coord->err();
  // The database is read at most once a second: wait for a read after the end.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  HttpReply r = http_get(addr, "/metrics");
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse_exposition(r.body);
  for (const char* state : {"queued", "leased", "done", "failed", "dead", "cancelled"}) {
    EXPECT_EQ(v[std::string("hipq_jobs{state=\"") + state + "\"}"], jobs_in(state)) << state;
    EXPECT_EQ(sum_of(v, "hipq_batch_jobs", std::string("state=\"") + state + "\""), jobs_in(state)) << state;
  }
  EXPECT_EQ(v["hipq_jobs{state=\"done\"}"], 24);
  EXPECT_EQ(v["hipq_jobs{state=\"failed\"}"], 3);
  EXPECT_EQ(sum_of(v, "hipq_results_total"), db_int(db(), "SELECT COUNT(*) FROM results"));
  EXPECT_EQ(sum_of(v, "hipq_worker_images_total"), 24);
  EXPECT_EQ(sum_of(v, "hipq_parity_verdicts", "NO_GOLDEN"), 24);
  // Every step the workers timed is in the histogram: 4 per job.
  EXPECT_EQ(sum_of(v, "hipq_step_duration_seconds_count"), db_int(db(), "SELECT COUNT(*) FROM step_timings"));
  EXPECT_EQ(sum_of(v, "hipq_step_duration_seconds_count"), 96);
  EXPECT_EQ(sum_of(v, "hipq_phase_duration_seconds_count", "denoise"),
            db_int(db(), "SELECT COUNT(*) FROM phase_timings WHERE phase = 'denoise'"));
  EXPECT_EQ(sum_of(v, "hipq_attempt_failures_total", "InvalidArgument"), 3);
  EXPECT_EQ(sum_of(v, "hipq_jobs_ended_unsuccessfully", "reason=\"InvalidArgument\""), 3);
  EXPECT_EQ(sum_of(v, "hipq_workers_connected"), 2);
  EXPECT_EQ(sum_of(v, "hipq_worker_info", "backend=\"sleep\""), 2);
  EXPECT_GT(v["hipq_db_commit_duration_seconds_count"], 0);
  EXPECT_EQ(v["hipq_lease_expirations_total"], 0);
  EXPECT_EQ(v["hipq_queue_depth"], 0);
  // The page shows the failure and its reason; the batch is finished.
  HttpReply page = http_get(addr, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("InvalidArgument"), std::string::npos);
  EXPECT_NE(page.body.find("this one [fail]s"), std::string::npos);
  auto j = nlohmann::json::parse(http_get(addr, "/api/status").body);
  EXPECT_EQ(j["batches"][0]["finished"], 27);
  EXPECT_EQ(j["step_time"]["count"], 96);
}

TEST_F(MonitorProcessTest, AFloodOfHostileHttpClientsLeavesHeartbeatsAndLeasesOnTime) {
  std::string ep;
  HttpAddr addr;
  auto coord = start_monitored_coordinator(tmp.path(), &ep, &addr);
  std::vector<std::unique_ptr<Process>> workers;
  std::vector<fs::path> health;
  for (int i = 0; i < 3; ++i) {
    health.push_back(tmp.path() / numbered("health", i));
    workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:200ms", {"--health-file", health.back().string()}));
  }
  fs::path manifest = write_sleep_manifest(tmp.path(), "flood", 15, 6);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> sent{0};
  std::vector<std::thread> attackers;
  const std::vector<std::string> garbage = {
      std::string("GET / HTTP/1.1\r\nHost: x\r\nX-Big: ") + std::string(64 * 1024, 'A') + "\r\n\r\n",
      std::string("\x16\x03\x01\x00\xff\x01\x00\x00\xfb\x03\x03", 11) + std::string(300, '\xee'),
      std::string("POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n") + std::string(5000, 'p'),
      std::string("GET /") + std::string(5000, '%') + " HTTP/1.1\r\nHost: x\r\n\r\n",
      many_headers(200),
      "GET /api/status HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
      std::string(2000, '\0'),
  };
  for (int t = 0; t < 6; ++t) {
    attackers.emplace_back([&, t] {
      size_t i = static_cast<size_t>(t);
      while (!stop.load()) {
        int fd = connect_to(addr);
        if (fd < 0) continue;
        send_all(fd, garbage[i++ % garbage.size()]);
        (void)read_all(fd, std::chrono::milliseconds(500));
        ::close(fd);
        ++sent;
      }
    });
  }
  // Slow clients: hold connections open, dribbling a byte now and then.
  attackers.emplace_back([&] {
    while (!stop.load()) {
      std::vector<int> slow;
      for (int k = 0; k < 80; ++k) {
        int fd = connect_to(addr);
        if (fd >= 0) {
          send_all(fd, "GET / HT");
          slow.push_back(fd);
        }
      }
      for (int k = 0; k < 30 && !stop.load(); ++k) {
        for (int fd : slow) send_all(fd, "T");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      for (int fd : slow) ::close(fd);
    }
  });
  // Heartbeats on time: no worker goes more than 2.5 s (liveness is 3 × 1 s)
  // without hearing from the coordinator while the flood goes on.
  int64_t worst_silence = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (jobs_in("done") < 90 && std::chrono::steady_clock::now() < until) {
    for (const auto& h : health) {
      std::istringstream in(slurp(h));
      for (std::string line; std::getline(in, line);) {
        if (line.rfind("coordinator_silent_ms=", 0) == 0) {
          worst_silence = std::max<int64_t>(worst_silence, std::stoll(line.substr(22)));
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop.store(true);
  for (auto& t : attackers) t.join();
  EXPECT_EQ(jobs_in("done"), 90) << coord->err();
  EXPECT_GT(sent.load(), 100);
  EXPECT_LT(worst_silence, 2500);
  std::cout << "flood: " << sent.load() << " hostile requests, longest coordinator silence a worker saw "
            << worst_silence << " ms\n";
  // No lease expired, no worker was dropped, nothing ran twice.
  EXPECT_EQ(db_int(db(), "SELECT COUNT(*) FROM attempts WHERE state = 'expired'"), 0);
  EXPECT_EQ(db_int(db(), "SELECT COUNT(*) FROM attempts"), 90);
  EXPECT_EQ(coord->err().find("missed"), std::string::npos) << coord->err();
  // The monitor still answers, and the coordinator too.
  HttpReply r = http_get(addr, "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(parse_exposition(r.body)["hipq_lease_expirations_total"], 0);
  EXPECT_TRUE(coord->running());
  std::string out;
  EXPECT_EQ(run_hipq(tmp.path(), "status", {"status", "--connect", ep}, &out), 0);
}

TEST_F(MonitorProcessTest, FlagsRefuseAPublicBindABadTokenFileAndAskForTheToken) {
  std::string out, err;
  // A non-loopback address needs --metrics-public: exit 2, saying so.
  EXPECT_EQ(run_hipq(tmp.path(), "pub", {"coordinator", "--db", db().string(), "--bind", "tcp://127.0.0.1:*",
                                         "--metrics-bind", "0.0.0.0:0"},
                     &out, &err),
            2);
  EXPECT_NE(err.find("--metrics-public"), std::string::npos) << err;
  EXPECT_EQ(run_hipq(tmp.path(), "badaddr", {"coordinator", "--db", db().string(), "--bind", "tcp://127.0.0.1:*",
                                             "--metrics-bind", "localhost"},
                     &out, &err),
            2);
  EXPECT_NE(err.find("HOST:PORT"), std::string::npos) << err;
  // A token file others can read is refused.
  const fs::path token = tmp.path() / "token";
  std::ofstream(token) << "s3cret-token-of-the-monitor\n";
  ::chmod(token.c_str(), 0644);
  EXPECT_EQ(run_hipq(tmp.path(), "tokmode", {"coordinator", "--db", db().string(), "--bind", "tcp://127.0.0.1:*",
                                             "--metrics-bind", "127.0.0.1:0", "--metrics-token-file", token.string()},
                     &out, &err),
            2);
  EXPECT_NE(err.find("chmod 600"), std::string::npos) << err;
  ::chmod(token.c_str(), 0600);
  std::string ep;
  HttpAddr addr;
  auto coord = start_monitored_coordinator(tmp.path(), &ep, &addr, {"--metrics-token-file", token.string()});
  EXPECT_EQ(http_get(addr, "/metrics").status, 401);
  EXPECT_EQ(http_get(addr, "/", "Authorization: Bearer wrong-token-of-the-monitor\r\n").status, 401);
  EXPECT_EQ(http_get(addr, "/metrics", "Authorization: Bearer s3cret-token-of-the-monitor\r\n").status, 200);
  EXPECT_EQ(http_get(addr, "/x", "Authorization: Bearer s3cret-token-of-the-monitor\r\n").status, 404);
}

TEST_F(MonitorProcessTest, HipqRunServesTheMonitorWhileItRuns) {
  const fs::path manifest = write_sleep_manifest(tmp.path(), "run", 4, 2);
  const fs::path addr_file = tmp.path() / "run.addr";
  Process run({"run", manifest.string(), "--db", db().string(), "--engine", "sleep:500ms", "--cpu-workers", "2",
               "--metrics-bind", "127.0.0.1:0", "--metrics-address-file", addr_file.string()},
              tmp.path() / "run");
  ASSERT_TRUE(wait_until([&] { return fs::exists(addr_file); }, std::chrono::seconds(15))) << run.err();
  const HttpAddr addr = parse_addr(slurp(addr_file));
  bool busy = false;
  ASSERT_TRUE(wait_until(
      [&] {
        auto v = parse_exposition(http_get(addr, "/metrics").body);
        busy = v["hipq_workers_connected{state=\"busy\"}"] >= 1;
        return busy;
      },
      std::chrono::seconds(15)));
  EXPECT_EQ(run.wait(std::chrono::seconds(60)), 0) << run.out() << run.err();
  EXPECT_NE(run.out().find("metrics and status page on http://127.0.0.1:"), std::string::npos) << run.out();
  EXPECT_EQ(jobs_in("done"), 8);
}

}  // namespace
}  // namespace hipq::testing
