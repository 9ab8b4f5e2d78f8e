// hipq coordinator: the queue server (coordinator/server.h).
#include <signal.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <iostream>

#include "cli/batch_cap_option.h"
#include "cli/commands.h"
#include "cli/monitor_options.h"
#include "coordinator/monitor/metrics.h"
#include "coordinator/server.h"
#include "proto/curve_keys.h"

namespace hipq::cli {
namespace {

std::atomic<coordinator::Server*> g_server{nullptr};
void on_signal(int) {
  if (auto* s = g_server.load()) s->request_stop();
}

struct CoordinatorArgs {
  std::string db = "hipq.db";
  std::string bind = proto::kDefaultEndpoint;
  std::string server_key;
  std::string authorized_keys;
  std::string endpoint_file;
  std::string golden_dir;
  bool insecure = false;
  double stall_timeout = 600;
  int64_t max_batch_jobs = coordinator::kMaxManifestJobs;
  MonitorFlags monitor;
};

int run_coordinator(const CoordinatorArgs& a) {
  coordinator::ServerOptions o;
  o.db_path = a.db;
  o.bind = a.bind;
  o.insecure = a.insecure;
  o.endpoint_file = a.endpoint_file;
  o.golden_dir = a.golden_dir;
  o.stall_seconds = a.stall_timeout;
  o.max_batch_jobs = a.max_batch_jobs;
  if (a.server_key.empty() != a.authorized_keys.empty()) {
    spdlog::error("CURVE needs both --server-key (the coordinator's key pair) and --authorized-keys");
    return kExitUsage;
  }
  if (!a.server_key.empty()) {
    auto keys = proto::read_curve_key_file(a.server_key);
    if (!keys.ok() || keys->secret_key.empty()) {
      spdlog::error("--server-key: {}", keys.ok() ? a.server_key + " holds no secret key" : keys.status().ToString());
      return kExitUsage;
    }
    auto allowed = proto::read_authorized_keys(a.authorized_keys);
    if (!allowed.ok()) {
      spdlog::error("--authorized-keys: {}", allowed.status().ToString());
      return kExitUsage;
    }
    o.curve = coordinator::CurveServerConfig{*keys, *allowed};
  }
  // Declared before the server and the monitor: both borrow it.
  coordinator::monitor::Metrics metrics;
  if (monitor_wanted(a.monitor)) o.metrics = &metrics;
  zmq::context_t context;
  auto server = coordinator::Server::create(context, o);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return server.status().code() == StatusCode::kFailedPrecondition ? kExitUsage : kExitFailure;
  }
  std::unique_ptr<coordinator::monitor::Monitor> monitor;
  if (monitor_wanted(a.monitor)) {
    auto m = start_monitor(a.monitor, a.db, metrics);
    if (!m.ok()) {
      spdlog::error("{}", m.status().ToString());
      const StatusCode c = m.status().code();
      return c == StatusCode::kFailedPrecondition || c == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    monitor = std::move(*m);
  }
  std::cout << "hipq coordinator listening on " << (*server)->endpoint() << std::endl;
  if (monitor) std::cout << "metrics and status page on " << monitor->url() << std::endl;
  g_server.store(server->get());
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  Status s = (*server)->run();
  g_server.store(nullptr);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_coordinator_command(CLI::App& app, int& exit_code) {
  static CoordinatorArgs args;
  auto* cmd = app.add_subcommand("coordinator", "Run the queue coordinator: hands jobs to workers, records results");
  cmd->add_option("--db", args.db, "SQLite database file (created when missing)")->capture_default_str();
  cmd->add_option("--bind", args.bind, "endpoint to listen on, tcp://HOST:PORT (PORT * = any free port)")
      ->capture_default_str();
  cmd->add_option("--server-key", args.server_key, "CURVE key pair of the coordinator (hipq keygen)");
  cmd->add_option("--authorized-keys", args.authorized_keys,
                  "allow-list: lines of '<public key> <name> [worker,client]'");
  cmd->add_flag("--insecure", args.insecure, "allow a non-loopback bind without CURVE (trusted networks only)");
  cmd->add_option("--endpoint-file", args.endpoint_file, "write the bound endpoint to this file once listening");
  cmd->add_option("--golden-dir", args.golden_dir, "golden files for manifests with `golden: store` (default: "
                                                   "<db dir>/goldens)");
  cmd->add_option("--stall-timeout", args.stall_timeout,
                  "seconds a leased job may go without any progress report before it is taken back and queued "
                  "again (not counted as an attempt); 0 = never")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_max_batch_jobs_option(cmd, args.max_batch_jobs);
  add_monitor_options(cmd, args.monitor);
  cmd->callback([&exit_code] { exit_code = run_coordinator(args); });
}

}  // namespace hipq::cli
