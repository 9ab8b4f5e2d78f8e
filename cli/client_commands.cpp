// hipq submit / status / cancel / workers / drain: calls to a coordinator
// (coordinator/client.h).
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/batch_progress.h"
#include "cli/commands.h"
#include "cli/queue_options.h"
#include "coordinator/client.h"
#include "coordinator/manifest.h"
#include "db/database.h"
#include "db/job_store.h"

namespace hipq::cli {

int64_t count_of(const google::protobuf::RepeatedPtrField<proto::CountEntry>& entries, const std::string& key) {
  for (const auto& e : entries) {
    if (e.key() == key) return e.count();
  }
  return 0;
}

std::string shorten(const std::string& text, size_t width) {
  std::string s = text;
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  if (s.size() <= width) return s;
  size_t cut = width > 3 ? width - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "...";
}

namespace {

nlohmann::json batch_json(const proto::BatchStatus& b) {
  nlohmann::json j = {{"batch_id", b.batch_id()}, {"name", b.name()},        {"state", b.state()},
                      {"priority", b.priority()}, {"total", b.total()},      {"created_at", b.created_at()},
                      {"by_state", nlohmann::json::object()}, {"by_verdict", nlohmann::json::object()}};
  if (b.finished_at() > 0) j["finished_at"] = b.finished_at();
  j["reason"] = b.reason();
  for (const auto& e : b.by_state()) j["by_state"][e.key()] = e.count();
  for (const auto& e : b.by_verdict()) j["by_verdict"][e.key()] = e.count();
  return j;
}

int fail(const Status& s) {
  std::cerr << "hipq: " << s.ToString() << "\n";
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? kExitUsage : kExitFailure;
}

Result<std::unique_ptr<coordinator::Client>> connect(zmq::context_t& ctx, const ConnectOptions& o) {
  HIPQ_ASSIGN_OR_RETURN(auto keys, curve_client_keys(o));
  coordinator::ClientOptions co;
  co.endpoint = o.endpoint;
  co.curve = keys;
  co.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  return coordinator::Client::connect(ctx, co);
}

// A positive decimal id, or nullopt.
std::optional<int64_t> parse_id(const std::string& digits) {
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  int64_t id = std::stoll(digits);
  return id > 0 ? std::optional<int64_t>(id) : std::nullopt;
}

std::string format_duration(double s) {
  if (s < 0 || s > 1e7) return "?";
  char buf[32];
  int si = static_cast<int>(s);
  if (si >= 3600) snprintf(buf, sizeof buf, "%dh%02dm", si / 3600, si / 60 % 60);
  else if (si >= 60) snprintf(buf, sizeof buf, "%dm%02ds", si / 60, si % 60);
  else snprintf(buf, sizeof buf, "%ds", si);
  return buf;
}

}  // namespace

// Follows a batch until it has no queued or leased job: a live bar on a
// terminal, a plain line per change otherwise. Returns the final status.
Result<proto::BatchStatus> wait_for_batch(coordinator::Client& client, int64_t batch_id, bool tty,
                                          std::ostream& out, const std::function<bool()>& stop) {
  auto start = std::chrono::steady_clock::now();
  std::string last_line;
  for (;;) {
    HIPQ_ASSIGN_OR_RETURN(proto::StatusReply reply, client.status(batch_id));
    if (reply.batches_size() != 1) return Status::NotFound("batch " + std::to_string(batch_id) + " not found");
    const proto::BatchStatus& b = reply.batches(0);
    int64_t done = count_of(b.by_state(), "done");
    int64_t failed = count_of(b.by_state(), "failed") + count_of(b.by_state(), "dead");
    int64_t cancelled = count_of(b.by_state(), "cancelled");
    int64_t running = count_of(b.by_state(), "leased");
    int64_t queued = count_of(b.by_state(), "queued");
    int64_t finished = done + failed + cancelled;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta = finished > 0 ? elapsed / static_cast<double>(finished) * static_cast<double>(queued + running) : -1;
    std::ostringstream line;
    if (tty) {
      const int width = 30;
      int filled = b.total() > 0 ? static_cast<int>(width * finished / b.total()) : width;
      line << "\r[" << std::string(static_cast<size_t>(filled), '#') << std::string(static_cast<size_t>(width - filled), '.')
           << "] " << finished << "/" << b.total() << " done " << done << " failed " << failed << " running "
           << running;
      auto workers = client.workers();
      if (workers.ok()) {
        std::map<std::string, int> busy;
        for (const auto& w : workers->workers()) {
          if (w.running_job_id() > 0) {
            line << " | " << w.info().worker_id() << " " << w.progress_step() << "/" << w.progress_steps();
          }
        }
      }
      line << " ETA " << (queued + running == 0 ? "0s" : format_duration(eta)) << "\033[K";
      out << line.str() << std::flush;
    } else {
      line << "batch " << batch_id << ": " << finished << "/" << b.total() << " finished, done " << done
           << ", failed " << failed << ", cancelled " << cancelled << ", running " << running << ", queued "
           << queued;
      if (line.str() != last_line) {
        out << line.str() << " (ETA " << (queued + running == 0 ? "0s" : format_duration(eta)) << ")\n"
            << std::flush;
        last_line = line.str();
      }
    }
    if (queued + running == 0 || (stop && stop())) {
      if (tty) out << "\n";
      return b;
    }
    for (int i = 0; i < (tty ? 5 : 20) && !(stop && stop()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void print_batch_table(const std::vector<proto::BatchStatus>& batches, std::ostream& out) {
  char buf[512];
  snprintf(buf, sizeof buf, "%-6s %-24s %-9s %4s %6s %6s %6s %6s %6s %6s %6s  %-20s %s\n", "batch", "name", "state",
           "prio", "total", "queued", "run", "done", "failed", "dead", "cancel", "verdicts", "reason");
  out << buf;
  for (const auto& b : batches) {
    std::string verdicts;
    for (const auto& v : b.by_verdict()) verdicts += v.key() + "=" + std::to_string(v.count()) + " ";
    std::string reason = b.reason().empty() ? "-" : shorten(b.reason(), 60);
    snprintf(buf, sizeof buf, "%-6lld %-24.24s %-9s %4d %6lld %6lld %6lld %6lld %6lld %6lld %6lld  %-20s %s\n",
             static_cast<long long>(b.batch_id()), b.name().c_str(), b.state().c_str(), b.priority(),
             static_cast<long long>(b.total()), static_cast<long long>(count_of(b.by_state(), "queued")),
             static_cast<long long>(count_of(b.by_state(), "leased")),
             static_cast<long long>(count_of(b.by_state(), "done")),
             static_cast<long long>(count_of(b.by_state(), "failed")),
             static_cast<long long>(count_of(b.by_state(), "dead")),
             static_cast<long long>(count_of(b.by_state(), "cancelled")), verdicts.c_str(), reason.c_str());
    out << buf;
  }
}

void add_client_commands(CLI::App& app, int& exit_code) {
  // ---- submit
  {
    static ConnectOptions conn;
    static std::string manifest;
    static bool wait = false;
    static std::optional<int> priority;
    auto* cmd = app.add_subcommand("submit", "Validate a manifest and queue it on a coordinator");
    add_connect_options(cmd, conn);
    cmd->add_option("manifest", manifest, "manifest YAML")->required();
    cmd->add_flag("--wait", wait, "follow the batch until it finishes");
    cmd->add_option("--priority", priority, "override the manifest's priority");
    cmd->callback([&exit_code] {
      // Validate here first: every problem with file:line:column, nothing sent.
      auto parsed = coordinator::parse_manifest(manifest);
      if (!parsed.ok()) {
        std::cerr << parsed.status().message() << "\n"
                  << "hipq: " << manifest << " is not valid; nothing was queued\n";
        exit_code = kExitUsage;
        return;
      }
      zmq::context_t ctx;
      auto client = connect(ctx, conn);
      if (!client.ok()) return void(exit_code = fail(client.status()));
      auto reply = (*client)->submit(manifest, priority);
      if (!reply.ok()) return void(exit_code = fail(reply.status()));
      std::cout << "batch " << reply->batch_id() << " \"" << reply->name() << "\": " << reply->jobs()
                << " jobs queued\n";
      if (!wait) return;
      auto final_status = wait_for_batch(**client, reply->batch_id(), isatty(STDOUT_FILENO), std::cout);
      if (!final_status.ok()) return void(exit_code = fail(final_status.status()));
      print_batch_table({*final_status}, std::cout);
      int64_t bad = count_of(final_status->by_state(), "failed") + count_of(final_status->by_state(), "dead");
      exit_code = bad > 0 ? kExitFailure : kExitOk;
    });
  }
  // ---- status
  {
    static ConnectOptions conn;
    static std::string batch;
    static std::string format = "table";
    static bool active = false;
    auto* cmd = app.add_subcommand("status", "Jobs per batch by state and verdict, with the first failure's reason");
    add_connect_options(cmd, conn);
    cmd->add_option("batch", batch, "batch id, batch:ID or batch name (default: every batch)");
    cmd->add_option("--format", format, "table | json")->check(CLI::IsMember({"table", "json"}));
    cmd->add_flag("--active", active, "only batches still running");
    cmd->callback([&exit_code] {
      zmq::context_t ctx;
      auto client = connect(ctx, conn);
      if (!client.ok()) return void(exit_code = fail(client.status()));
      std::optional<int64_t> id;
      if (!batch.empty()) id = parse_id(batch.rfind("batch:", 0) == 0 ? batch.substr(6) : batch);
      auto reply = (*client)->status(id.value_or(0), active);
      if (!reply.ok()) return void(exit_code = fail(reply.status()));
      if (!batch.empty() && !id) {
        // A name: every batch of that name, oldest first.
        proto::StatusReply named;
        for (const auto& b : reply->batches()) {
          if (b.name() == batch) *named.add_batches() = b;
        }
        if (named.batches_size() == 0) {
          std::cerr << "hipq status: no batch named \"" << batch << "\" (a batch id, batch:ID or a batch name)\n";
          return void(exit_code = kExitUsage);
        }
        *reply = named;
      }
      if (format == "json") {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& b : reply->batches()) j.push_back(batch_json(b));
        std::cout << nlohmann::json{{"batches", j}}.dump(2) << "\n";
      } else {
        print_batch_table({reply->batches().begin(), reply->batches().end()}, std::cout);
      }
    });
  }
  // ---- cancel
  {
    static ConnectOptions conn;
    static std::string target;
    auto* cmd = app.add_subcommand("cancel", "Cancel a batch (ID, batch:ID or its name) or one job (job:ID)");
    add_connect_options(cmd, conn);
    cmd->add_option("target", target, "batch id, batch:ID, batch name or job:ID")->required();
    cmd->callback([&exit_code] {
      bool is_job = target.rfind("job:", 0) == 0;
      bool is_batch = target.rfind("batch:", 0) == 0;
      std::optional<int64_t> id = parse_id(is_job ? target.substr(4) : (is_batch ? target.substr(6) : target));
      if (!id && (is_job || is_batch || target.empty())) {
        std::cerr << "hipq cancel: \"" << target << "\" is not ID, batch:ID, a batch name or job:ID\n";
        exit_code = kExitUsage;
        return;
      }
      zmq::context_t ctx;
      auto client = connect(ctx, conn);
      if (!client.ok()) return void(exit_code = fail(client.status()));
      std::vector<int64_t> batches;
      if (id && !is_job) batches.push_back(*id);
      if (!id) {
        // A batch name: its active batches.
        auto all = (*client)->status(0, true);
        if (!all.ok()) return void(exit_code = fail(all.status()));
        for (const auto& b : all->batches()) {
          if (b.name() == target) batches.push_back(b.batch_id());
        }
        if (batches.empty()) {
          std::cerr << "hipq cancel: no active batch named \"" << target << "\"\n";
          return void(exit_code = kExitUsage);
        }
      }
      int64_t cancelled = 0, notified = 0;
      if (is_job) {
        auto reply = (*client)->cancel_job(*id);
        if (!reply.ok()) return void(exit_code = fail(reply.status()));
        cancelled = reply->cancelled();
        notified = reply->running_notified();
      }
      for (int64_t b : batches) {
        auto reply = (*client)->cancel_batch(b);
        if (!reply.ok()) return void(exit_code = fail(reply.status()));
        cancelled += reply->cancelled();
        notified += reply->running_notified();
      }
      std::cout << "cancelled " << cancelled << " job(s); " << notified << " running job(s) told to stop\n";
    });
  }
  // ---- workers
  {
    static ConnectOptions conn;
    static std::string format = "table";
    auto* cmd = app.add_subcommand("workers", "Workers connected to the coordinator");
    add_connect_options(cmd, conn);
    cmd->add_option("--format", format, "table | json")->check(CLI::IsMember({"table", "json"}));
    // forget: an operator re-keying a worker (docs/operations.md, "Re-keying
    // a worker"). It writes the coordinator's database, not the wire: who may
    // give a worker id to another key is whoever may write that file.
    static std::string forget_id;
    static std::string forget_db;
    if (const char* env = std::getenv("HIPQ_DB"); env != nullptr && *env) forget_db = env;
    if (forget_db.empty()) forget_db = "hipq.db";
    auto* forget = cmd->add_subcommand(
        "forget", "Unbind a worker id from the CURVE key that registered it; the next worker key to say hello "
                  "under the id owns it");
    forget->add_option("worker", forget_id, "worker id")->required();
    forget->add_option("--db", forget_db, "the coordinator's database file (env HIPQ_DB)")->capture_default_str();
    forget->callback([&exit_code] {
      if (!std::filesystem::exists(forget_db)) {
        return void(exit_code = fail(Status::NotFound("no database " + forget_db + "; give the coordinator's --db")));
      }
      auto d = db::Database::open_and_migrate(forget_db);
      if (!d.ok()) return void(exit_code = fail(d.status().WithContext("--db " + forget_db)));
      db::JobStore store(**d);
      if (Status s = store.forget_worker_key(forget_id); !s.ok()) return void(exit_code = fail(s));
      std::cout << "worker " << forget_id << ": bound to no key now; the next worker key to say hello as "
                << forget_id << " owns it\n";
    });
    cmd->callback([&exit_code, forget] {
      if (forget->parsed()) return;
      zmq::context_t ctx;
      auto client = connect(ctx, conn);
      if (!client.ok()) return void(exit_code = fail(client.status()));
      auto reply = (*client)->workers();
      if (!reply.ok()) return void(exit_code = fail(reply.status()));
      if (format == "json") {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& w : reply->workers()) {
          j.push_back({{"worker_id", w.info().worker_id()}, {"host", w.info().host()},
                       {"backend", w.info().backend()}, {"device_index", w.info().device_index()},
                       {"device_name", w.info().device_name()}, {"state", w.state()},
                       {"running_job_id", w.running_job_id()}, {"progress_step", w.progress_step()},
                       {"progress_steps", w.progress_steps()}, {"jobs_done", w.jobs_done()},
                       {"jobs_failed", w.jobs_failed()}, {"last_seen_age_s", w.last_seen_age_s()},
                       {"user_id", w.user_id()}});
        }
        std::cout << nlohmann::json{{"workers", j}}.dump(2) << "\n";
        return;
      }
      char buf[512];
      snprintf(buf, sizeof buf, "%-40s %-8s %-24s %-9s %8s %8s %6s %6s\n", "worker", "backend", "device", "state",
               "job", "step", "done", "failed");
      std::cout << buf;
      for (const auto& w : reply->workers()) {
        std::string step = w.running_job_id() ? std::to_string(w.progress_step()) + "/" +
                                                    std::to_string(w.progress_steps())
                                              : "-";
        snprintf(buf, sizeof buf, "%-40.40s %-8s %-24.24s %-9s %8lld %8s %6lld %6lld\n",
                 w.info().worker_id().c_str(), w.info().backend().c_str(), w.info().device_name().c_str(),
                 w.state().c_str(), static_cast<long long>(w.running_job_id()), step.c_str(),
                 static_cast<long long>(w.jobs_done()), static_cast<long long>(w.jobs_failed()));
        std::cout << buf;
      }
    });
  }
  // ---- drain
  {
    static ConnectOptions conn;
    static std::string worker_id;
    static bool all = false;
    auto* cmd = app.add_subcommand("drain", "Let a worker finish its job and leave (--all: every worker)");
    add_connect_options(cmd, conn);
    cmd->add_option("worker", worker_id, "worker id (see `hipq workers`)");
    cmd->add_flag("--all", all, "drain every connected worker");
    cmd->callback([&exit_code] {
      if (worker_id.empty() != all) {
        std::cerr << "hipq drain: give a worker id or --all\n";
        exit_code = kExitUsage;
        return;
      }
      zmq::context_t ctx;
      auto client = connect(ctx, conn);
      if (!client.ok()) return void(exit_code = fail(client.status()));
      auto reply = (*client)->drain(worker_id);
      if (!reply.ok()) return void(exit_code = fail(reply.status()));
      std::cout << reply->draining() << " worker(s) draining\n";
    });
  }
}

}  // namespace hipq::cli
