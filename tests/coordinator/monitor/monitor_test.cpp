// The monitor's parts without a coordinator: the strict HTTP parser, the
// server's bounds over real sockets (oversized, malformed, slow and too many
// clients, non-loopback peers), the bearer token, the exposition and the
// status page (escaping of hostile prompts), and the database figures of a
// real run history matching the database.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "coordinator/monitor/db_figures.h"
#include "coordinator/monitor/exposition.h"
#include "coordinator/monitor/http_server.h"
#include "coordinator/monitor/metrics.h"
#include "coordinator/monitor/monitor.h"
#include "coordinator/monitor/status_page.h"
#include "db/statement.h"
#include "tests/coordinator/monitor/http_client.h"
#include "tests/db/run_history_fixture.h"

namespace hipq::coordinator::monitor {
namespace {

using hipq::testing::HttpAddr;
using hipq::testing::HttpReply;

HeadParse parse(const std::string& s, HttpRequest* r = nullptr) {
  HttpRequest ignored;
  return parse_request_head(s, 8192, r ? r : &ignored);
}

TEST(HttpParse, AGetWithHeadersParses) {
  HttpRequest r;
  HeadParse p = parse("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization:  Bearer t \r\n\r\n", &r);
  ASSERT_EQ(p.state, HeadParse::State::kComplete) << p.error;
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.path, "/metrics");
  EXPECT_EQ(r.query, "x=1");
  EXPECT_EQ(r.headers.at("host"), "a");
  EXPECT_EQ(r.headers.at("authorization"), "Bearer t");
}

TEST(HttpParse, IncompleteUntilTheBlankLine) {
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\n").state, HeadParse::State::kIncomplete);
  EXPECT_EQ(parse("GET / HTTP/1.0\n\n").state, HeadParse::State::kComplete);
}

TEST(HttpParse, BadRequestsAreRefusedWithTheRightStatus) {
  struct Case {
    std::string raw;
    int status;
  };
  const std::vector<Case> cases = {
      {"GET /\r\n\r\n", 400},                                         // no version
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},                    // double space
      {"get / HTTP/1.1\r\nHost: a\r\n\r\n", 400},                     // lower-case method
      {"GET metrics HTTP/1.1\r\nHost: a\r\n\r\n", 400},               // not origin-form
      {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
      {"GET / FTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n\r\n", 400},                                // 1.1 without Host
      {"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost a\r\n\r\n", 400},                      // no colon
      {"GET / HTTP/1.1\r\nHo st: a\r\n\r\n", 400},                    // bad name
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nAuthorization: x\r\nAuthorization: y\r\n\r\n", 400},
      {"POST / HTTP/1.1\r\nHost: a\r\n\r\n", 405},
      {"DELETE /metrics HTTP/1.1\r\nHost: a\r\n\r\n", 405},
      {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", 413},
      {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", 413},
      {std::string("GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n"), 400},
      {std::string("GET / HTTP/1.1\r\nHost: a\x7f\r\n\r\n"), 400},
      {"GET /" + std::string(3000, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
  };
  for (const auto& c : cases) {
    HeadParse p = parse(c.raw);
    EXPECT_EQ(p.state, HeadParse::State::kError) << c.raw;
    EXPECT_EQ(p.status, c.status) << c.raw << " → " << p.error;
    EXPECT_FALSE(p.error.empty());
  }
  // A control byte in the request line is refused before the head ends.
  EXPECT_EQ(parse(std::string("GET /\x02")).state, HeadParse::State::kError);
}

TEST(HttpParse, HeadsOverTheLimitGet431EvenUnfinished) {
  std::string big = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: " + std::string(9000, 'x');
  HeadParse p = parse(big);
  EXPECT_EQ(p.state, HeadParse::State::kError);
  EXPECT_EQ(p.status, 431);
  std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 70; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(parse(many + "\r\n").status, 431);
}

TEST(HostPort, ParsesAndRefuses) {
  auto a = parse_host_port("127.0.0.1:9464");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 9464);
  auto b = parse_host_port("[::1]:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  for (const char* bad : {"9464", "127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:99999", "::1:80", "[::1]80", "h:x"}) {
    EXPECT_FALSE(parse_host_port(bad).ok()) << bad;
  }
  EXPECT_TRUE(is_loopback_address("127.0.0.1"));
  EXPECT_TRUE(is_loopback_address("127.8.9.10"));
  EXPECT_TRUE(is_loopback_address("::1"));
  EXPECT_TRUE(is_loopback_address("::ffff:127.0.0.1"));
  EXPECT_FALSE(is_loopback_address("0.0.0.0"));
  EXPECT_FALSE(is_loopback_address("10.0.0.1"));
  EXPECT_FALSE(is_loopback_address("::"));
}

TEST(Token, ConstantTimeCompareAndTokenFileChecks) {
  EXPECT_TRUE(equal_constant_time("Bearer abc", "Bearer abc"));
  EXPECT_FALSE(equal_constant_time("Bearer abc", "Bearer abd"));
  EXPECT_FALSE(equal_constant_time("Bearer abc", "Bearer abcd"));
  EXPECT_FALSE(equal_constant_time("", "x"));
  const auto dir = std::filesystem::temp_directory_path() / ("hipq-token-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto f = dir / "token";
  std::ofstream(f) << "  0123456789abcdef0123  \n";
  ::chmod(f.c_str(), 0644);
  auto open_mode = read_token_file(f);
  ASSERT_FALSE(open_mode.ok());
  EXPECT_NE(open_mode.status().message().find("chmod 600"), std::string::npos);
  ::chmod(f.c_str(), 0600);
  auto t = read_token_file(f);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t, "0123456789abcdef0123");
  std::ofstream(f) << "short\n";
  EXPECT_FALSE(read_token_file(f).ok());
  std::ofstream(f) << "0123456789 abcdef0123\n";
  EXPECT_FALSE(read_token_file(f).ok());
  EXPECT_FALSE(read_token_file(dir / "missing").ok());
  std::filesystem::remove_all(dir);
}

TEST(ReasonClass, CodesExpiriesAndBatchFailures) {
  EXPECT_EQ(reason_class_of_code("ResourceExhausted"), "ResourceExhausted");
  EXPECT_EQ(reason_class_of_code("<script>"), "other");
  EXPECT_EQ(reason_class_of_attempt("failed", "ResourceExhausted: out of memory"), "ResourceExhausted");
  EXPECT_EQ(reason_class_of_attempt("expired", "lease of worker w expired at 1"), "lease_expired");
  EXPECT_EQ(reason_class_of_attempt("failed", "not run: job 3 of this batch hit a configuration error: x"),
            "batch_configuration");
  EXPECT_EQ(reason_class_of_attempt("failed", "something: else"), "other");
}

// An HttpServer answering "hello" on /, for the bounds tests.
std::unique_ptr<HttpServer> hello_server(HttpServerOptions o = {}) {
  auto s = HttpServer::start(o, [](const HttpRequest& r) {
    HttpResponse out;
    if (r.path != "/") {
      out.status = 404;
      out.body = "no";
    } else {
      out.body = "hello";
    }
    return out;
  });
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

HttpAddr addr_of(const HttpServer& s) { return {"127.0.0.1", s.port()}; }

TEST(HttpServerTest, AnswersRefusesAndSurvivesGarbage) {
  auto s = hello_server();
  ASSERT_TRUE(s);
  const HttpAddr a = addr_of(*s);
  HttpReply ok = testing::http_get(a, "/");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "hello");
  EXPECT_NE(ok.head.find("Content-Length: 5"), std::string::npos);
  EXPECT_NE(ok.head.find("Connection: close"), std::string::npos);
  EXPECT_EQ(testing::http_get(a, "/nothing").status, 404);
  HttpReply head = testing::raw_request(a, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(testing::raw_request(a, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").status, 405);
  EXPECT_EQ(testing::raw_request(a, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello\r\n\r\n").status, 400);
  EXPECT_EQ(testing::raw_request(a, "GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(20000, 'y') + "\r\n\r\n").status,
            431);
  // A client that sends its request in pieces is served.
  int fd = testing::connect_to(a);
  ASSERT_GE(fd, 0);
  for (const char* piece : {"GE", "T / HT", "TP/1.1\r\nHo", "st: x\r\n", "\r\n"}) {
    testing::send_all(fd, piece);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(testing::parse_reply(testing::read_all(fd)).status, 200);
  ::close(fd);
  EXPECT_GE(s->counters().bad_requests.load(), 3);
  EXPECT_EQ(testing::http_get(a, "/").status, 200);
}

TEST(HttpServerTest, SlowClientsTimeOutAndExtraConnectionsGet503) {
  HttpServerOptions o;
  o.max_connections = 4;
  o.request_timeout = std::chrono::milliseconds(600);
  auto s = hello_server(o);
  ASSERT_TRUE(s);
  const HttpAddr a = addr_of(*s);
  // Four idle connections take every slot...
  std::vector<int> idle;
  for (int i = 0; i < 4; ++i) {
    idle.push_back(testing::connect_to(a));
    testing::send_all(idle.back(), "GET / HT");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // ...so a fifth is told so at once.
  EXPECT_EQ(testing::http_get(a, "/").status, 503);
  // The idle ones are closed with 408 once their time is up.
  for (int fd : idle) {
    HttpReply r = testing::parse_reply(testing::read_all(fd, std::chrono::seconds(3)));
    EXPECT_EQ(r.status, 408);
    ::close(fd);
  }
  EXPECT_EQ(s->counters().timed_out.load(), 4);
  EXPECT_EQ(testing::http_get(a, "/").status, 200);
}

// A non-loopback address of this machine, or "" when it has none.
std::string non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* i = list; i != nullptr && found.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, host, sizeof host);
    if (!is_loopback_address(host)) found = host;
  }
  ::freeifaddrs(list);
  return found;
}

TEST(HttpServerTest, NonLoopbackPeersAreRefusedUnlessAllowed) {
  const std::string ip = non_loopback_ipv4();
  if (ip.empty()) GTEST_SKIP() << "this machine has no non-loopback IPv4 address to connect from";
  for (bool allow : {false, true}) {
    HttpServerOptions o;
    o.host = "0.0.0.0";
    o.allow_remote_peers = allow;
    auto s = hello_server(o);
    ASSERT_TRUE(s);
    // Connecting to our own non-loopback address makes it the peer address.
    HttpReply r = testing::http_get({ip, s->port()}, "/");
    EXPECT_EQ(r.status, allow ? 200 : 403) << r.body;
    if (!allow) {
      EXPECT_NE(r.body.find("loopback peers only"), std::string::npos) << r.body;
      EXPECT_EQ(testing::http_get({"127.0.0.1", s->port()}, "/").status, 200);
    }
  }
}

TEST(MonitorTest, RefusesAPublicBindWithoutConsent) {
  Metrics metrics;
  MonitorOptions o;
  o.bind = "0.0.0.0:0";
  o.db_path = "/nonexistent/never-opened.db";
  auto m = Monitor::start(o, metrics);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("--metrics-public"), std::string::npos);
}

class MonitorOverHistory : public ::testing::Test {
 protected:
  void SetUp() override { db::testing::fill_run_history(h); }
  int64_t count(const std::string& sql) {
    db::Statement s = h.db->prepare(sql);
    auto row = s.step();
    EXPECT_TRUE(row.ok() && *row) << sql;
    return s.column_int64(0);
  }
  db::testing::RunHistory h;
  Metrics metrics;
};

TEST_F(MonitorOverHistory, FiguresAndMetricsMatchTheDatabase) {
  MonitorOptions o;
  o.bind = "127.0.0.1:0";
  o.db_path = h.db_path;
  auto m = Monitor::start(o, metrics);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const HttpAddr a{"127.0.0.1", testing::parse_addr((*m)->address()).port};
  HttpReply r = testing::http_get(a, "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.head.find("text/plain; version=0.0.4"), std::string::npos);
  auto v = testing::parse_exposition(r.body);
  for (const char* state : {"queued", "leased", "done", "failed", "dead", "cancelled"}) {
    EXPECT_EQ(v.at(std::string("hipq_jobs{state=\"") + state + "\"}"),
              count(std::string("SELECT COUNT(*) FROM jobs WHERE state = '") + state + "'"))
        << state;
    EXPECT_EQ(testing::sum_of(v, "hipq_batch_jobs", std::string("state=\"") + state + "\""),
              count(std::string("SELECT COUNT(*) FROM jobs WHERE state = '") + state + "'"))
        << state;
  }
  EXPECT_EQ(v.at("hipq_queue_depth"), count("SELECT COUNT(*) FROM jobs WHERE state = 'queued'"));
  EXPECT_EQ(testing::sum_of(v, "hipq_attempts"), count("SELECT COUNT(*) FROM attempts"));
  EXPECT_EQ(testing::sum_of(v, "hipq_parity_verdicts"), count("SELECT COUNT(*) FROM results"));
  EXPECT_EQ(testing::sum_of(v, "hipq_jobs_ended_unsuccessfully"),
            count("SELECT COUNT(*) FROM jobs WHERE state IN ('failed', 'dead')"));
  EXPECT_EQ(v.at("hipq_retries"), count("SELECT COUNT(*) FROM attempts WHERE attempt > 1"));
  // Every family has HELP and TYPE lines; names follow the conventions.
  EXPECT_NE(r.body.find("# TYPE hipq_jobs gauge"), std::string::npos);
  EXPECT_NE(r.body.find("# TYPE hipq_messages_total counter"), std::string::npos);
  EXPECT_NE(r.body.find("# TYPE hipq_db_commit_duration_seconds histogram"), std::string::npos);
  // The page and the API answer; unknown paths 404.
  HttpReply api = testing::http_get(a, "/api/status");
  ASSERT_EQ(api.status, 200);
  auto j = nlohmann::json::parse(api.body);
  ASSERT_EQ(j["batches"].size(), 1u);
  EXPECT_EQ(j["batches"][0]["id"], h.batch_id);
  EXPECT_EQ(j["batches"][0]["total"].get<int64_t>(), count("SELECT COUNT(*) FROM jobs"));
  EXPECT_EQ(j["recent_failures"].size(), static_cast<size_t>(count(
                                             "SELECT COUNT(*) FROM attempts WHERE state IN ('failed', 'expired')")));
  HttpReply page = testing::http_get(a, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<h2>Batches</h2>"), std::string::npos);
  EXPECT_EQ(testing::http_get(a, "/status").status, 200);
  EXPECT_EQ(testing::http_get(a, "/metrics/").status, 404);
  EXPECT_EQ(testing::http_get(a, "/../etc/passwd").status, 404);
}

TEST_F(MonitorOverHistory, ATokenIsRequiredWhenSet) {
  MonitorOptions o;
  o.bind = "127.0.0.1:0";
  o.db_path = h.db_path;
  o.token = "0123456789abcdef-token";
  auto m = Monitor::start(o, metrics);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const HttpAddr a{"127.0.0.1", testing::parse_addr((*m)->address()).port};
  for (const std::string path : {"/metrics", "/", "/api/status", "/nothing"}) {
    HttpReply none = testing::http_get(a, path);
    EXPECT_EQ(none.status, 401) << path;
    EXPECT_NE(none.head.find("WWW-Authenticate: Bearer"), std::string::npos);
    EXPECT_EQ(testing::http_get(a, path, "Authorization: Bearer 0123456789abcdef-toke\r\n").status, 401) << path;
    EXPECT_EQ(testing::http_get(a, path, "Authorization: Basic 0123456789abcdef-token\r\n").status, 401) << path;
  }
  EXPECT_EQ(testing::http_get(a, "/metrics", "Authorization: Bearer 0123456789abcdef-token\r\n").status, 200);
  EXPECT_EQ(testing::http_get(a, "/nothing", "Authorization: Bearer 0123456789abcdef-token\r\n").status, 404);
}

std::string read_source(const std::string& rel) {
  std::ifstream in(std::filesystem::path(HIPQ_SOURCE_DIR) / rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::set<std::string> metric_names_in(const std::string& text) {
  std::set<std::string> names;
  const std::regex name(R"(hipq_[a-z0-9_]+)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), name); it != std::sregex_iterator(); ++it) {
    names.insert(it->str());
  }
  return names;
}

TEST_F(MonitorOverHistory, EveryMetricIsDocumentedAndTheDashboardUsesOnlyRealOnes) {
  // Every family: event metrics with a sample, a worker, the database's figures.
  metrics.record_result("w", "d", "PASS", {{"denoise", 10}}, {30});
  metrics.record_failure("Internal");
  metrics.record_commit(0.001);
  LoopSnapshot snap;
  snap.workers.push_back(WorkerView{});
  auto reader = DbReader::open(h.db_path, std::chrono::milliseconds(0));
  ASSERT_TRUE(reader.ok());
  auto figures = (*reader)->read();
  ASSERT_TRUE(figures.ok()) << figures.status().ToString();
  const std::string text = render_metrics_text(metrics, snap, figures->get(), 0);
  std::set<std::string> served;  // family names (no _bucket/_count/_sum)
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) served.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  ASSERT_GT(served.size(), 30u);
  const std::set<std::string> documented = metric_names_in(read_source("docs/metrics.md"));
  for (const auto& f : served) EXPECT_TRUE(documented.count(f)) << f << " is served but not in docs/metrics.md";
  auto is_served = [&](const std::string& n) {
    for (const char* suffix : {"", "_bucket", "_count", "_sum"}) {
      for (const auto& f : served) {
        if (f + suffix == n) return true;
      }
    }
    return false;
  };
  for (const auto& n : documented) EXPECT_TRUE(is_served(n)) << n << " is in docs/metrics.md but not served";
  const std::string dashboard = read_source("deploy/grafana/hipq-dashboard.json");
  ASSERT_TRUE(nlohmann::json::accept(dashboard)) << "the dashboard is not JSON";
  const auto used = metric_names_in(dashboard);
  EXPECT_GT(used.size(), 15u);
  for (const auto& n : used) EXPECT_TRUE(is_served(n)) << n << " is on the dashboard but not served";
}

// The server's loop records and publishes while the HTTP thread serves (run
// under ThreadSanitizer by scripts/ci-sanitizers).
TEST_F(MonitorOverHistory, TheLoopWritesWhileTheHttpThreadReads) {
  MonitorOptions o;
  o.bind = "127.0.0.1:0";
  o.db_path = h.db_path;
  o.db_min_interval = std::chrono::milliseconds(0);
  auto m = Monitor::start(o, metrics);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const HttpAddr a{"127.0.0.1", testing::parse_addr((*m)->address()).port};
  constexpr int kResults = 2000;
  std::thread loop([&] {
    for (int i = 0; i < kResults; ++i) {
      metrics.record_result(std::string("w") + std::to_string(i % 4), "dev", "PASS", {{"denoise", 5}}, {31, 32});
      if (i % 10 == 0) metrics.record_failure("Internal");
      metrics.record_commit(0.0001);
      if (i % 50 == 0) {
        LoopSnapshot s;
        s.published = true;
        s.counters.results_recorded = i;
        WorkerView w;
        w.worker_id = std::string("w") + std::to_string(i % 4);
        w.state = "busy";
        w.running_job_id = i;
        w.job_known = true;
        w.running_prompt = std::string("prompt ") + std::to_string(i);
        s.workers.push_back(w);
        metrics.snapshot().publish(std::move(s));
      }
    }
  });
  int answered = 0;
  for (int i = 0; i < 40; ++i) {
    answered += testing::http_get(a, i % 2 ? "/metrics" : "/api/status").status == 200;
  }
  loop.join();
  EXPECT_EQ(answered, 40);
  auto v = testing::parse_exposition(testing::http_get(a, "/metrics").body);
  EXPECT_EQ(v["hipq_results_total{verdict=\"PASS\"}"], kResults);
  EXPECT_EQ(testing::sum_of(v, "hipq_step_duration_seconds_count"), 2 * kResults);
  EXPECT_EQ(v["hipq_attempt_failures_total{reason=\"Internal\"}"], kResults / 10);
  EXPECT_EQ(v["hipq_worker_running_job{worker=\"w2\"}"], 1950);
}

TEST(Exposition, EventMetricsCountEveryStepInTheirBuckets) {
  Metrics m;
  m.record_result("w1", "NVIDIA H200", "PASS", {{"denoise", 1000}, {"decode", 80}}, {31, 33, 36, 38});
  m.record_result("w2", "NVIDIA H200", "NO_GOLDEN", {}, {42});
  m.record_failure("ResourceExhausted");
  m.record_failure("free text");
  // Words a worker sends become labels only when known.
  m.record_result("w2", "NVIDIA H200", "SO<MEWHAT\"", {{"made-up phase", 5}}, {});
  m.record_commit(0.002);
  LoopSnapshot snap;
  snap.counters.dropped_messages = 7;
  WorkerView w;
  w.worker_id = "w1";
  w.device_name = "NVIDIA H200";
  w.memory_total_bytes = 150'000'000'000;
  w.memory_free_bytes = 140'000'000'000;
  w.placement = "standard";
  w.state = "busy";
  w.running_job_id = 12;
  snap.workers.push_back(w);
  const std::string text = render_metrics_text(m, snap, nullptr, 0);
  auto v = testing::parse_exposition(text);
  // Bucket bounds print as written (no 0.07000000000000001).
  for (size_t p = text.find("le=\""); p != std::string::npos; p = text.find("le=\"", p + 1)) {
    const size_t end = text.find('"', p + 4);
    EXPECT_LE(end - p - 4, 7u) << text.substr(p, end - p + 1);
  }
  EXPECT_EQ(v.at("hipq_step_duration_seconds_count{device=\"NVIDIA H200\"}"), 5);
  // 5 ms buckets around 30-40 ms: 31 and 33 in (0.03, 0.035], 36 and 38 in (0.035, 0.04].
  EXPECT_EQ(v.at("hipq_step_duration_seconds_bucket{device=\"NVIDIA H200\",le=\"0.03\"}"), 0);
  EXPECT_EQ(v.at("hipq_step_duration_seconds_bucket{device=\"NVIDIA H200\",le=\"0.035\"}"), 2);
  EXPECT_EQ(v.at("hipq_step_duration_seconds_bucket{device=\"NVIDIA H200\",le=\"0.04\"}"), 4);
  EXPECT_EQ(v.at("hipq_step_duration_seconds_bucket{device=\"NVIDIA H200\",le=\"0.045\"}"), 5);
  EXPECT_EQ(v.at("hipq_phase_duration_seconds_count{phase=\"denoise\"}"), 1);
  EXPECT_EQ(v.at("hipq_results_total{verdict=\"PASS\"}"), 1);
  EXPECT_EQ(v.at("hipq_worker_images_total{device=\"NVIDIA H200\",worker=\"w2\"}"), 2);
  EXPECT_EQ(v.at("hipq_results_total{verdict=\"other\"}"), 1);
  EXPECT_EQ(v.at("hipq_phase_duration_seconds_count{phase=\"other\"}"), 1);
  EXPECT_EQ(v.at("hipq_attempt_failures_total{reason=\"ResourceExhausted\"}"), 1);
  EXPECT_EQ(v.at("hipq_attempt_failures_total{reason=\"other\"}"), 1);
  EXPECT_EQ(v.at("hipq_db_commit_duration_seconds_count"), 1);
  EXPECT_EQ(v.at("hipq_dropped_messages_total"), 7);
  EXPECT_EQ(v.at("hipq_workers_connected{state=\"busy\"}"), 1);
  EXPECT_EQ(v.at("hipq_worker_memory_free_bytes{worker=\"w1\"}"), 140'000'000'000.0);
  EXPECT_EQ(v.at("hipq_worker_running_job{worker=\"w1\"}"), 12);
  EXPECT_EQ(testing::sum_of(v, "hipq_worker_info", "placement=\"standard\""), 1);
  // Without the database, its families are absent rather than zero.
  EXPECT_EQ(v.count("hipq_jobs{state=\"done\"}"), 0u);
  auto d = m.step_distribution();
  EXPECT_EQ(d.count, 5u);
  EXPECT_EQ(d.cumulative.back(), 5u);
}

TEST(StatusPage, EveryUserStringIsEscaped) {
  const std::string evil = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>&amp;";
  LoopSnapshot snap;
  snap.coordinator_id = "c<1>";
  WorkerView w;
  w.worker_id = evil;
  w.host = evil;
  w.device_name = evil;
  w.placement = evil;
  w.state = "busy";
  w.running_job_id = 5;
  w.progress_step = 3;
  w.progress_steps = 8;
  snap.workers.push_back(w);
  DbFigures f;
  BatchFigures b;
  b.id = 1;
  b.name = evil;
  b.state = "active";
  b.total = 10;
  b.by_state = {{"done", 4}, {"leased", 1}, {"queued", 5}};
  b.finished_per_s = 2;
  b.eta_s = 3;
  f.batches.push_back(b);
  f.leased[5] = RunningJob{5, 1, evil, 42, 8};
  FailureRow fr;
  fr.job_id = 2;
  fr.error = evil;
  fr.prompt = evil;
  fr.worker_id = evil;
  fr.reason_class = "other";
  f.recent_failures.push_back(fr);
  Metrics m;
  m.record_result("w", "d", "PASS", {}, {37});
  nlohmann::json s = status_json(snap, &f, m.step_distribution(), "", 1.8e9);
  EXPECT_EQ(s["workers"][0]["job"]["prompt"], evil);  // the JSON carries it as data
  const std::string html = render_status_page(s, 2);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_EQ(html.find("onerror=alert(2)>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(html.find("data-running-job=\"5\""), std::string::npos);
  EXPECT_NE(html.find("3 / 8"), std::string::npos);
  EXPECT_NE(html.find("40.0%"), std::string::npos);
  EXPECT_NE(html.find("<meta http-equiv=\"refresh\" content=\"2\">"), std::string::npos);
  EXPECT_NE(html.find("35–40 ms"), std::string::npos) << html;
}

}  // namespace
}  // namespace hipq::coordinator::monitor
