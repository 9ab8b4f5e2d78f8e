// Monitor: the coordinator's read-only HTTP address — Prometheus metrics at
// /metrics, the live status page at / (and /status), its JSON at
// /api/status — on a thread of its own (http_server.h).
//
// It reads only what the coordinator's loop publishes (Metrics: event
// counters, histograms and the loop's snapshot) and the database through a
// read-only connection of its own (db_figures.h); it never calls into the
// loop, so a slow or hostile client cannot delay a heartbeat or a lease.
//
// Exposure: the address is loopback unless `allow_public` (the
// --metrics-public flag) — prompts and worker names are on the page; then
// any peer may connect, otherwise a non-loopback peer gets 403. With a
// token, every request must carry `Authorization: Bearer <token>`
// (compared in constant time) or gets 401. Paths: /metrics, /, /status,
// /api/status, /healthz; anything else 404. docs/metrics.md.
//
// Ownership: owns the HTTP server and the database reader; borrows
// `metrics`, which must outlive it. Thread safety: create and destroy on one
// thread; the handler runs on the HTTP thread.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "base/result.h"
#include "base/status.h"
#include "coordinator/monitor/http_server.h"
#include "coordinator/monitor/metrics.h"

namespace hipq::coordinator::monitor {

class DbReader;

inline constexpr char kDefaultMetricsBind[] = "127.0.0.1:9464";

struct MonitorOptions {
  std::string bind = kDefaultMetricsBind;   // HOST:PORT, [V6]:PORT; port 0 = any free one
  bool allow_public = false;                // a non-loopback bind is refused without it
  std::string token;                        // "" = no token needed
  std::filesystem::path db_path;            // the coordinator's database
  std::chrono::milliseconds db_min_interval{1000};  // database reads at most this often
  int refresh_seconds = 2;                  // the status page's reload interval
  std::chrono::milliseconds request_timeout{5000};
  int max_connections = 64;
};

struct HostPort {
  std::string host;
  int port = 0;
};

// "127.0.0.1:9464", "[::1]:9464", "localhost:0" → host and port.
// InvalidArgument naming what is wrong otherwise.
Result<HostPort> parse_host_port(const std::string& bind);

// The token of a --metrics-token-file: its content without surrounding
// whitespace. Refused when missing, empty, shorter than 16 characters,
// holding whitespace inside, or readable by group or others (chmod 600).
Result<std::string> read_token_file(const std::filesystem::path& path);

// Constant-time comparison (the time depends on the lengths only).
bool equal_constant_time(const std::string& a, const std::string& b);

class Monitor {
 public:
  // FailedPrecondition for a non-loopback bind without allow_public;
  // InvalidArgument for a bind that does not parse; Unavailable when the
  // address cannot be bound; the database's error when it cannot be opened.
  static Result<std::unique_ptr<Monitor>> start(MonitorOptions options, Metrics& metrics);
  ~Monitor();

  // "127.0.0.1:9464": the address actually bound; "http://" + it + "/".
  const std::string& address() const { return server_->address(); }
  std::string url() const { return "http://" + server_->address() + "/"; }
  const HttpServerCounters& counters() const { return server_->counters(); }

  // The response to `request` (the HTTP thread's handler; public for tests).
  HttpResponse handle(const HttpRequest& request);

 private:
  Monitor(MonitorOptions options, Metrics& metrics, std::unique_ptr<DbReader> reader);

  MonitorOptions options_;
  Metrics& metrics_;
  std::unique_ptr<DbReader> reader_;
  int64_t db_read_errors_ = 0;
  std::string last_db_error_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace hipq::coordinator::monitor
