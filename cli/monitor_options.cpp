#include "cli/monitor_options.h"

#include "base/fs.h"

namespace hipq::cli {

void add_monitor_options(CLI::App* cmd, MonitorFlags& f) {
  cmd->add_option("--metrics-bind", f.bind,
                  "serve Prometheus metrics (/metrics) and a live status page (/) at HOST:PORT, e.g. " +
                      std::string(coordinator::monitor::kDefaultMetricsBind) +
                      " (port 0 = any free port); loopback only unless --metrics-public");
  cmd->add_flag("--metrics-public", f.allow_public,
                "allow a non-loopback --metrics-bind: anyone who can reach it reads prompts and worker names "
                "(use --metrics-token-file)");
  cmd->add_option("--metrics-token-file", f.token_file,
                  "require 'Authorization: Bearer <token>' on every request; the file holds the token (mode 600)");
  cmd->add_option("--metrics-address-file", f.address_file,
                  "write the metrics address actually bound (HOST:PORT) to this file once listening");
}

Result<std::unique_ptr<coordinator::monitor::Monitor>> start_monitor(const MonitorFlags& f,
                                                                     const std::filesystem::path& db_path,
                                                                     coordinator::monitor::Metrics& metrics) {
  coordinator::monitor::MonitorOptions o;
  o.bind = f.bind;
  o.allow_public = f.allow_public;
  o.db_path = db_path;
  if (!f.token_file.empty()) {
    auto token = coordinator::monitor::read_token_file(f.token_file);
    if (!token.ok()) {
      return Status(token.status().code() == StatusCode::kIOError ? StatusCode::kIOError : StatusCode::kInvalidArgument,
                    "--metrics-token-file: " + token.status().message());
    }
    o.token = *token;
  }
  auto monitor = coordinator::monitor::Monitor::start(o, metrics);
  if (!monitor.ok()) {
    const StatusCode c = monitor.status().code();
    return Status(c, (c == StatusCode::kFailedPrecondition || c == StatusCode::kInvalidArgument ? "--metrics-bind: "
                                                                                                 : std::string()) +
                         monitor.status().message());
  }
  if (!f.address_file.empty()) {
    HIPQ_RETURN_IF_ERROR(write_file_atomic(f.address_file, (*monitor)->address() + "\n"));
  }
  return monitor;
}

}  // namespace hipq::cli
