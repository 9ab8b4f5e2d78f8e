// A real Prometheus server (Debian's `prometheus`) scrapes a coordinator
// running a batch of SleepEngine jobs (the test double); its HTTP API
// (/api/v1/query) then answers the job counts of the database and a step
// count equal to the steps recorded. Label slow; skips when `prometheus` is
// not installed (scripts/setup --prometheus).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tests/base/test_strings.h"
#include "tests/coordinator/monitor/monitor_process_common.h"

namespace hipq::testing {
namespace {

std::string find_prometheus() {
  if (const char* env = std::getenv("HIPQ_PROMETHEUS")) return env;
  for (const char* p : {"/usr/bin/prometheus", "/usr/local/bin/prometheus", "/bin/prometheus"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// A port free a moment ago (Prometheus takes its listen address as a flag).
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

// Any program as a child process, output to files; SIGKILLed when destroyed.
class Child {
 public:
  Child(std::vector<std::string> argv, const fs::path& log) {
    pid_ = fork();
    if (pid_ == 0) {
      int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(out, 2);
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
  }
  ~Child() {
    kill(pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
  }

 private:
  pid_t pid_ = -1;
};

std::string url_encode(const std::string& s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// The single value of an instant query, or NaN when it has none.
double query(const HttpAddr& prom, const std::string& promql) {
  HttpReply r = http_get(prom, "/api/v1/query?query=" + url_encode(promql));
  if (r.status != 200) return std::nan("");
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || j["status"] != "success" || j["data"]["result"].empty()) return std::nan("");
  return std::stod(j["data"]["result"][0]["value"][1].get<std::string>());
}

TEST(MonitorPrometheusTest, PrometheusScrapesTheCoordinatorAndItsCountsMatchTheDatabase) {
  const std::string prometheus = find_prometheus();
  if (prometheus.empty()) {
    GTEST_SKIP() << "prometheus is not installed (scripts/setup --prometheus, or apt-get install prometheus); "
                    "the scrape by a real Prometheus server is not tested";
  }
  TempDir tmp;
  const fs::path db = tmp.path() / "hipq.db";
  std::string ep;
  HttpAddr addr;
  auto coord = start_monitored_coordinator(tmp.path(), &ep, &addr);
  const int prom_port = free_port();
  std::ofstream(tmp.path() / "prometheus.yml")
      << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
      << "scrape_configs:\n  - job_name: hipq\n    scrape_interval: 1s\n    scrape_timeout: 1s\n"
      << "    static_configs:\n      - targets: ['127.0.0.1:" << addr.port << "']\n";
  Child prom({prometheus, "--config.file=" + (tmp.path() / "prometheus.yml").string(),
              "--storage.tsdb.path=" + (tmp.path() / "tsdb").string(),
              "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)},
             tmp.path() / "prometheus.log");
  const HttpAddr prom_addr{"127.0.0.1", prom_port};
  ASSERT_TRUE(wait_until([&] { return query(prom_addr, "up{job=\"hipq\"}") == 1; }, std::chrono::seconds(60)))
      << slurp(tmp.path() / "prometheus.log");

  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:80ms"));
  // 6 × 3 jobs, and one prompt whose 3 jobs fail for good.
  fs::path manifest = write_sleep_manifest(tmp.path(), "prom", 6, 3, 0, "bad one [fail]");
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  // While the batch runs Prometheus sees work in flight.
  EXPECT_TRUE(wait_until([&] { return query(prom_addr, "sum(hipq_jobs{state=~\"leased|done\"})") > 0; },
                         std::chrono::seconds(30)));
  ASSERT_TRUE(wait_until([&] { return db_int(db, "SELECT COUNT(*) FROM jobs WHERE state IN ('done', 'failed')") == 21; },
                         std::chrono::seconds(60)))
      << coord->err();
  const int64_t steps = db_int(db, "SELECT COUNT(*) FROM step_timings");
  ASSERT_EQ(steps, 18 * 4);
  // Prometheus' latest samples catch up with the finished batch.
  EXPECT_TRUE(wait_until(
      [&] {
        return query(prom_addr, "hipq_jobs{state=\"done\"}") == 18 &&
               query(prom_addr, "sum(hipq_step_duration_seconds_count)") == static_cast<double>(steps);
      },
      std::chrono::seconds(30)))
      << "done " << query(prom_addr, "hipq_jobs{state=\"done\"}") << ", steps "
      << query(prom_addr, "sum(hipq_step_duration_seconds_count)");
  for (const char* state : {"queued", "leased", "done", "failed", "dead", "cancelled"}) {
    EXPECT_EQ(query(prom_addr, std::string("hipq_jobs{state=\"") + state + "\"}"),
              db_int(db, std::string("SELECT COUNT(*) FROM jobs WHERE state = '") + state + "'"))
        << state;
    EXPECT_EQ(query(prom_addr, std::string("sum(hipq_batch_jobs{state=\"") + state + "\"})"),
              db_int(db, std::string("SELECT COUNT(*) FROM jobs WHERE state = '") + state + "'"))
        << state;
  }
  EXPECT_EQ(query(prom_addr, "sum(hipq_results_total)"), db_int(db, "SELECT COUNT(*) FROM results"));
  EXPECT_EQ(query(prom_addr, "sum(hipq_worker_images_total)"), 18);
  EXPECT_EQ(query(prom_addr, "sum(hipq_jobs_ended_unsuccessfully{reason=\"InvalidArgument\"})"), 3);
  EXPECT_EQ(query(prom_addr, "count(hipq_worker_info)"), 2);
  // Every step is in a bucket, and the histogram's sum is the steps' time the database holds.
  EXPECT_EQ(query(prom_addr, "sum(hipq_step_duration_seconds_bucket{le=\"+Inf\"})"), static_cast<double>(steps));
  const double db_step_s = static_cast<double>(db_int(db, "SELECT CAST(ROUND(SUM(host_ms) * 1000) AS INTEGER) "
                                                          "FROM step_timings")) / 1e6;
  EXPECT_NEAR(query(prom_addr, "sum(hipq_step_duration_seconds_sum)"), db_step_s, 1e-5);
  // 80 ms in 4 steps: the median step lies in one of the 5 ms buckets between 10 and 60 ms.
  const double median = query(prom_addr, "histogram_quantile(0.5, sum by (le) (hipq_step_duration_seconds_bucket))");
  EXPECT_GT(median, 0.01);
  EXPECT_LT(median, 0.06);
}

}  // namespace
}  // namespace hipq::testing
