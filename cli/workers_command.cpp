// hipq workers: the workers connected to a coordinator, table or JSON.
// hipq workers forget ID: unbind a worker id from its CURVE key, in the
// coordinator's database (docs/operations.md, "Re-keying a worker").
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/byte_size.h"
#include "cli/commands.h"
#include "cli/queue_options.h"
#include "coordinator/client.h"
#include "db/database.h"
#include "db/job_store.h"

namespace hipq::cli {
namespace {

// "70.1/139.8 GiB" (free as the worker saw it at its hello / total), "cap 8 GiB"
// appended when it runs under --device-memory-limit; "-" when unknown.
// Every job the worker runs (a batch runs several; protocol 7).
std::vector<int64_t> running_ids(const proto::WorkerStatus& w) {
  std::vector<int64_t> ids;
  for (const auto& r : w.running()) ids.push_back(r.job_id());
  return ids;
}

std::string worker_memory(const proto::WorkerHello& h) {
  if (h.memory_bytes() <= 0 && h.memory_limit_bytes() <= 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f/%.1f GiB", static_cast<double>(h.memory_free_bytes()) / (1 << 30),
                static_cast<double>(h.memory_bytes()) / (1 << 30));
  std::string out = buf;
  if (h.memory_limit_bytes() > 0) out += " cap " + format_byte_size(h.memory_limit_bytes());
  return out;
}

}  // namespace

void add_workers_command(CLI::App& app, int& exit_code) {
  struct Flags {
    ConnectOptions conn;
    std::string format = "table";
    std::string forget_id;
    std::string forget_db;  // $HIPQ_DB when set, else hipq.db
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("workers", "Workers connected to the coordinator");
  add_connect_options(cmd, flags->conn);
  cmd->add_option("--format", flags->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  // forget: an operator re-keying a worker (docs/operations.md, "Re-keying
  // a worker"). It writes the coordinator's database, not the wire: who may
  // give a worker id to another key is whoever may write that file.
  if (const char* env = std::getenv("HIPQ_DB"); env != nullptr && *env) flags->forget_db = env;
  if (flags->forget_db.empty()) flags->forget_db = "hipq.db";
  auto* forget = cmd->add_subcommand(
      "forget",
      "Unbind a worker id from the CURVE key that registered it; the next worker key to say hello "
      "under the id owns it");
  forget->add_option("worker", flags->forget_id, "worker id")->required();
  forget->add_option("--db", flags->forget_db, "the coordinator's database file (env HIPQ_DB)")
      ->capture_default_str();
  forget->callback([flags, &exit_code] {
    const std::string& db_path = flags->forget_db;
    if (!std::filesystem::exists(db_path)) {
      return void(exit_code = client_failure(
                      Status::NotFound("no database " + db_path + "; give the coordinator's --db")));
    }
    auto d = db::Database::open_and_migrate(db_path);
    if (!d.ok()) return void(exit_code = client_failure(d.status().WithContext("--db " + db_path)));
    db::JobStore store(**d);
    if (Status s = store.forget_worker_key(flags->forget_id); !s.ok())
      return void(exit_code = client_failure(s));
    std::cout << "worker " << flags->forget_id
              << ": bound to no key now; the next worker key to say hello as " << flags->forget_id
              << " owns it\n";
  });
  cmd->callback([flags, &exit_code, forget] {
    if (forget->parsed()) return;
    zmq::context_t ctx;
    auto client = connect_client(ctx, flags->conn);
    if (!client.ok()) return void(exit_code = client_failure(client.status()));
    auto reply = (*client)->workers();
    if (!reply.ok()) return void(exit_code = client_failure(reply.status()));
    if (flags->format == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& w : reply->workers()) {
        j.push_back({{"worker_id", w.info().worker_id()},
                     {"host", w.info().host()},
                     {"backend", w.info().backend()},
                     {"device_index", w.info().device_index()},
                     {"device_name", w.info().device_name()},
                     {"memory_bytes", w.info().memory_bytes()},
                     {"memory_free_bytes", w.info().memory_free_bytes()},
                     {"memory_limit_bytes", w.info().memory_limit_bytes()},
                     {"placement", w.info().placement()},
                     {"state", w.state()},
                     {"running_job_id", w.running_job_id()},
                     {"running_job_ids", running_ids(w)},
                     {"max_batch", w.max_batch()},
                     {"progress_step", w.progress_step()},
                     {"progress_steps", w.progress_steps()},
                     {"jobs_done", w.jobs_done()},
                     {"jobs_failed", w.jobs_failed()},
                     {"last_seen_age_s", w.last_seen_age_s()},
                     {"user_id", w.user_id()}});
      }
      std::cout << nlohmann::json{{"workers", j}}.dump(2) << "\n";
      return;
    }
    char buf[512];
    snprintf(buf, sizeof buf, "%-40s %-8s %-24s %-28s %-9s %-9s %8s %8s %6s %6s\n", "worker", "backend", "device",
             "memory free/all", "placement", "state", "job", "step", "done", "failed");
    std::cout << buf;
    for (const auto& w : reply->workers()) {
      std::string step = w.running_job_id()
                             ? std::to_string(w.progress_step()) + "/" + std::to_string(w.progress_steps())
                             : "-";
      // A batch runs several jobs: the first, and how many more.
      std::string job = std::to_string(w.running_job_id());
      if (w.running_size() > 1) job += "+" + std::to_string(w.running_size() - 1);
      snprintf(buf, sizeof buf, "%-40.40s %-8s %-24.24s %-28.28s %-9.9s %-9s %8s %8s %6lld %6lld\n",
               w.info().worker_id().c_str(), w.info().backend().c_str(), w.info().device_name().c_str(),
               worker_memory(w.info()).c_str(), w.info().placement().empty() ? "-" : w.info().placement().c_str(),
               w.state().c_str(), job.c_str(), step.c_str(),
               static_cast<long long>(w.jobs_done()), static_cast<long long>(w.jobs_failed()));
      std::cout << buf;
    }
  });
}

}  // namespace hipq::cli
