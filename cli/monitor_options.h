// Options of the commands that run a coordinator (coordinator, run): its
// read-only HTTP address for Prometheus metrics and the live status page
// (coordinator/monitor/monitor.h, docs/metrics.md).
//   --metrics-bind HOST:PORT     serve /metrics, / and /api/status there (off when
//                                not given; port 0 = any free port)
//   --metrics-public             allow a non-loopback --metrics-bind
//   --metrics-token-file FILE    require `Authorization: Bearer <token>`
//   --metrics-address-file FILE  write the bound HOST:PORT there once listening
// Thread safety: CLI parsing, then the command's thread.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/result.h"
#include "coordinator/monitor/metrics.h"
#include "coordinator/monitor/monitor.h"

namespace hipq::cli {

struct MonitorFlags {
  std::string bind;          // "" = no monitor
  bool allow_public = false;
  std::string token_file;
  std::string address_file;
};

void add_monitor_options(CLI::App* cmd, MonitorFlags& f);

// Whether the flags ask for a monitor at all.
inline bool monitor_wanted(const MonitorFlags& f) { return !f.bind.empty(); }

// Starts the monitor of the flags over `db_path` and `metrics` (the server's;
// both must outlive it), writes --metrics-address-file. FailedPrecondition or
// InvalidArgument for a usage error (exit 2), naming the flag.
Result<std::unique_ptr<coordinator::monitor::Monitor>> start_monitor(const MonitorFlags& f,
                                                                     const std::filesystem::path& db_path,
                                                                     coordinator::monitor::Metrics& metrics);

}  // namespace hipq::cli
