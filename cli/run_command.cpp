// hipq run MANIFEST: the embedded default — coordinator and workers (one per
// local GPU, or one CPU worker) in this process, a SQLite file in the working
// directory, results and a short statistics table at the end.
// Resumable (docs/operations.md, "hipq run"): the same manifest on the same
// database continues its batch; SIGINT/SIGTERM let running jobs finish (a
// second one stops them), leave the rest queued and print how to resume.
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/batch_cap_option.h"
#include "cli/batch_progress.h"
#include "cli/commands.h"
#include "cli/memory_options.h"
#include "cli/monitor_options.h"
#include "coordinator/monitor/metrics.h"
#include "coordinator/client.h"
#include "coordinator/manifest.h"
#include "coordinator/preflight.h"
#include "coordinator/query_service.h"
#include "coordinator/server.h"
#include "db/database.h"
#include "db/job_store.h"
#include "kernels/backend.h"
#include "spec/phases.h"
#include "proto/protocol.h"
#include "worker/job_runner.h"
#include "worker/job_runner_factory.h"
#include "worker/worker.h"

namespace hipq::cli {

std::string default_backend();

namespace {

struct RunArgs {
  std::string manifest;
  std::string db = "hipq.db";  // $HIPQ_DB when set
  bool new_batch = false;
  std::string backend;
  std::string engine = "engine";
  int cpu_workers = 1;
  int batch = 1;  // jobs each worker runs at once as one batch (WorkerOptions::batch)
  int64_t max_batch_jobs = coordinator::kMaxManifestJobs;
  MemoryOptions memory;
  MonitorFlags monitor;
};

// The summary of the batch, through the query layer as `hipq runs --batch N`
// and `hipq stats --batch N` (one query each for the whole batch): a line per
// job, then the host-clock timings of each job phase per warmth group.
Status print_results(const std::string& db_path, int64_t batch_id, std::ostream& out) {
  coordinator::QueryTarget target;
  target.db_path = db_path;
  const nlohmann::json args{{"batch", batch_id}};
  HIPQ_ASSIGN_OR_RETURN(nlohmann::json runs, coordinator::run_query_at(target, "runs", args));
  HIPQ_ASSIGN_OR_RETURN(nlohmann::json stats, coordinator::run_query_at(target, "stats", args));
  const nlohmann::json& jobs = runs["runs"];
  const nlohmann::json first = jobs.empty() ? nlohmann::json::object() : jobs.front();
  char buf[512];
  out << "\nresults of batch " << batch_id << " \"" << first.value("batch_name", "") << "\" (outputs under "
      << first.value("output_root", "") << ")\n";
  snprintf(buf, sizeof buf, "%-6s %-32s %10s %-9s %-40s %-10s %8s %10s  %s\n", "job", "prompt", "seed",
           "state", "reason", "verdict", "cosine", "total ms", "output");
  out << buf;
  for (const auto& j : jobs) {
    const std::string state = j["state"].get<std::string>();
    std::string cosine = "-";
    if (j["cosine"].is_number()) {
      snprintf(buf, sizeof buf, "%.6f", j["cosine"].get<double>());
      cosine = buf;
    }
    const nlohmann::json& outputs = j["outputs"];
    std::string output = outputs.is_array() && !outputs.empty() ? outputs.front().value("path", "-") : "-";
    // A job that did not finish well says why: the error of its latest attempt.
    std::string reason = "-";
    if ((state == "failed" || state == "dead" || state == "cancelled" || state == "queued") &&
        j["error"].is_string()) {
      reason = shorten(j["error"].get<std::string>(), 40);
    }
    std::string prompt = shorten(j["prompt"].get<std::string>(), 32);
    snprintf(buf, sizeof buf, "%-6lld %-32s %10llu %-9s %-40s %-10s %8s %10.1f  %s\n",
             static_cast<long long>(j["job"].get<int64_t>()), prompt.c_str(),
             static_cast<unsigned long long>(j["seed"].get<uint64_t>()), state.c_str(), reason.c_str(),
             j["verdict"].is_string() ? j["verdict"].get<std::string>().c_str() : "-", cosine.c_str(),
             j["total_ms"].is_number() ? j["total_ms"].get<double>() : 0.0, output.c_str());
    out << buf;
  }
  const std::vector<std::string>& job_phases = spec::job_phases();
  bool header = false;
  for (const auto& group : stats["groups"]) {
    for (const auto& p : group["phases"]) {
      const std::string phase = p["phase"].get<std::string>();
      if (std::find(job_phases.begin(), job_phases.end(), phase) == job_phases.end()) continue;
      if (!header) {
        out << "\nphase timings (host ms)\n";
        snprintf(buf, sizeof buf, "%-12s %-6s %5s %10s %10s %10s %10s\n", "phase", "warmth", "n", "mean",
                 "p50", "p90", "max");
        out << buf;
        header = true;
      }
      snprintf(buf, sizeof buf, "%-12s %-6s %5lld %10.1f %10.1f %10.1f %10.1f\n", phase.c_str(),
               group["warmth"].get<std::string>().c_str(), static_cast<long long>(p["n"].get<int64_t>()),
               p["mean"].get<double>(), p["p50"].get<double>(), p["p90"].get<double>(),
               p["max"].get<double>());
      out << buf;
    }
  }
  out << "\nrecorded in " << db_path << " (query it with `hipq runs` / `hipq stats`; whole failure reasons: "
      << "`hipq runs --batch " << batch_id << " --format json`)\n";
  return Status::Ok();
}

// SIGINT/SIGTERM are blocked in every thread and taken by one watcher
// thread (sigtimedwait), so no ZeroMQ call ever sees EINTR; the main thread
// reads the count between status polls.
class SignalWatch {
 public:
  SignalWatch() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, &old_);
    thread_ = std::thread([this] {
      timespec tick{0, 100'000'000};
      while (!done_.load()) {
        int sig = sigtimedwait(&set_, nullptr, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
          last_ = sig;
          ++count_;
        }
      }
    });
  }
  ~SignalWatch() {
    done_.store(true);
    thread_.join();
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  int count() const { return count_.load(); }
  int last() const { return last_.load(); }

 private:
  sigset_t set_{};
  sigset_t old_{};
  std::atomic<bool> done_{false};
  std::atomic<int> count_{0};
  std::atomic<int> last_{0};
  std::thread thread_;
};

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@+,") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The batch this run works on: the newest batch of the same manifest text
// (sha256) in the database, reopened, unless --new-batch or there is none
// (or it was cancelled): then 0, and the manifest is queued as a new batch.
Result<int64_t> find_batch_to_resume(const RunArgs& a, const coordinator::Manifest& manifest, std::ostream& out) {
  if (a.new_batch) return int64_t{0};
  HIPQ_ASSIGN_OR_RETURN(auto db, db::Database::open_and_migrate(a.db));
  db::JobStore store(*db);
  HIPQ_ASSIGN_OR_RETURN(auto latest, store.latest_batch_of_manifest(manifest.sha256));
  if (!latest || latest->state == db::BatchState::kCancelled) return int64_t{0};
  double now = db::wall_clock_seconds();
  // A previous run killed outright (no chance to release) leaves leases behind:
  // this run owns the database file, so they go back to the queue.
  HIPQ_ASSIGN_OR_RETURN(int64_t released,
                        store.release_batch_leases(latest->id, "released: hipq run resumed the batch", now));
  HIPQ_ASSIGN_OR_RETURN(int64_t requeued, store.reopen_batch(latest->id, now));
  HIPQ_ASSIGN_OR_RETURN(auto counts, store.batch_counts(latest->id));
  int64_t to_run = counts.by_state["queued"] + counts.by_state["leased"];
  if (to_run == 0) {
    out << "hipq run: batch " << latest->id << " \"" << latest->name << "\" of this manifest (sha256 "
        << manifest.sha256.substr(0, 12) << ") already finished in " << a.db
        << "; nothing to run (--new-batch runs it again as a new batch)\n";
    return latest->id;
  }
  out << "hipq run: resuming batch " << latest->id << " \"" << latest->name << "\" (same manifest, sha256 "
      << manifest.sha256.substr(0, 12) << "): " << counts.by_state["done"] << " done, " << to_run << " to run";
  if (requeued + released > 0) out << " (" << requeued + released << " failed or interrupted job(s) queued again)";
  out << "; --new-batch queues a new batch instead\n";
  return latest->id;
}

int64_t done_count(const std::string& db_path, int64_t batch_id) {
  auto db = db::Database::open_and_migrate(db_path);
  if (!db.ok()) return 0;
  db::JobStore store(**db);
  auto c = store.batch_counts(batch_id);
  return c.ok() ? c->by_state["done"] : 0;
}

int run_embedded(const RunArgs& a) {
  auto wall_start = std::chrono::steady_clock::now();
  auto manifest = coordinator::parse_manifest(a.manifest, a.max_batch_jobs);
  if (!manifest.ok()) {
    std::cerr << manifest.status().message() << "\nhipq: " << a.manifest << " is not valid; nothing was run\n";
    return kExitUsage;
  }
  if (Status pre = coordinator::preflight(*manifest); !pre.ok()) {
    std::cerr << a.manifest << ": " << pre.message() << "\nhipq: nothing was run\n";
    return kExitUsage;
  }
  auto resume = find_batch_to_resume(a, *manifest, std::cout);
  if (!resume.ok()) {
    std::cerr << "hipq run: " << a.db << ": " << resume.status().ToString() << "\n";
    return kExitFailure;
  }
  int64_t batch_id = *resume;
  const int64_t done_before = batch_id > 0 ? done_count(a.db, batch_id) : 0;

  std::string backend = a.backend.empty() ? default_backend() : a.backend;
  auto placement = apply_memory_options(a.memory);
  if (!placement.ok()) {
    std::cerr << "hipq run: " << placement.status().message() << "\n";
    return kExitUsage;
  }
  std::vector<int> devices;
  if (backend == "hip") {
    for (int d = 0; d < kernels::gpu_device_count(); ++d) devices.push_back(d);
    if (devices.empty()) {
      spdlog::error("--backend hip: no GPU visible");
      return kExitFailure;
    }
  } else {
    for (int i = 0; i < std::max(1, a.cpu_workers); ++i) devices.push_back(i);
  }
  std::vector<std::unique_ptr<worker::JobRunner>> runners;
  for (int d : devices) {
    auto r = worker::make_job_runner(a.engine, backend, backend == "hip" ? d : 0, *placement);
    if (!r.ok()) {
      spdlog::error("worker for {} device {}: {}", backend, d, r.status().ToString());
      return kExitFailure;
    }
    runners.push_back(std::move(*r));
  }

  SignalWatch signals;  // before any thread starts, so they inherit the mask
  // Declared before the server and the monitor: both borrow it.
  coordinator::monitor::Metrics metrics;
  zmq::context_t ctx;
  coordinator::ServerOptions so;
  so.db_path = a.db;
  so.bind = "inproc://hipq-run-" + std::to_string(getpid());
  so.max_batch_jobs = a.max_batch_jobs;
  if (monitor_wanted(a.monitor)) so.metrics = &metrics;
  auto server = coordinator::Server::create(ctx, so);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return kExitFailure;
  }
  std::unique_ptr<coordinator::monitor::Monitor> monitor;
  if (monitor_wanted(a.monitor)) {
    auto m = start_monitor(a.monitor, a.db, metrics);
    if (!m.ok()) {
      std::cerr << "hipq run: " << m.status().message() << "\nhipq: nothing was run\n";
      const StatusCode c = m.status().code();
      return c == StatusCode::kFailedPrecondition || c == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    monitor = std::move(*m);
  }
  Status server_status;
  std::thread server_thread([&] { server_status = (*server)->run(); });
  std::vector<std::unique_ptr<worker::Worker>> workers;
  std::vector<std::thread> worker_threads;
  for (size_t i = 0; i < runners.size(); ++i) {
    worker::WorkerOptions wo;
    wo.endpoint = so.bind;
    wo.worker_id = worker::host_name() + "/" + backend + std::to_string(devices[i]) + "/run" + std::to_string(getpid());
    wo.batch = a.batch;
    workers.push_back(std::make_unique<worker::Worker>(ctx, wo, *runners[i]));
  }
  for (auto& w : workers) worker_threads.emplace_back([&w] { (void)w->run(); });
  std::cout << "hipq run: " << manifest->job_count() << " job(s) of " << a.manifest << " on " << workers.size()
            << " " << backend << " worker(s); database " << a.db << "\n";
  if (monitor) std::cout << "hipq run: metrics and status page on " << monitor->url() << "\n";

  int code = kExitOk;
  bool interrupted = false;
  proto::BatchStatus last;
  {
    coordinator::ClientOptions co;
    co.endpoint = so.bind;
    auto client = coordinator::Client::connect(ctx, co);
    if (client.ok() && batch_id == 0) {
      auto submitted = (*client)->submit(a.manifest);
      if (submitted.ok()) batch_id = submitted->batch_id();
      else client = Result<std::unique_ptr<coordinator::Client>>(submitted.status());
    }
    if (!client.ok()) {
      std::cerr << "hipq run: " << client.status().ToString() << "\n";
      code = kExitFailure;
    } else {
      bool tty = isatty(STDOUT_FILENO);
      auto status = wait_for_batch(**client, batch_id, tty, std::cout, [&] { return signals.count() > 0; });
      if (status.ok() && signals.count() > 0) {
        interrupted = true;
        std::cerr << "\nhipq run: interrupted: running jobs finish, queued jobs stay queued; "
                     "interrupt again to stop the running jobs now\n";
        for (auto& w : workers) w->request_drain();
        for (;;) {
          auto now = (*client)->status(batch_id);
          if (!now.ok() || now->batches_size() != 1) break;
          status = now->batches(0);
          if (count_of(status->by_state(), "leased") == 0) break;
          if (signals.count() > 1) {
            std::cerr << "hipq run: stopping the running jobs; they go back to the queue\n";
            for (auto& w : workers) w->request_stop();
            break;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
      if (!status.ok()) {
        std::cerr << "hipq run: " << status.status().ToString() << "\n";
        code = kExitFailure;
      } else {
        last = *status;
      }
    }
  }
  for (auto& w : workers) w->request_drain();
  for (auto& t : worker_threads) t.join();
  (*server)->request_stop();
  server_thread.join();
  monitor.reset();
  workers.clear();
  server->reset();
  if (batch_id <= 0) return code;

  auto db = db::Database::open_and_migrate(a.db);
  if (db.ok()) {
    db::JobStore store(**db);
    if (interrupted) {
      auto released = store.release_batch_leases(batch_id, "interrupted: hipq run was stopped", db::wall_clock_seconds());
      if (!released.ok()) std::cerr << "hipq run: cannot release the running jobs: " << released.status().ToString() << "\n";
    }
    auto counts = store.batch_counts(batch_id);
    if (counts.ok()) {
      proto::BatchStatus b;
      b.set_batch_id(batch_id);
      b.set_state(std::string(db::batch_state_name(counts->state)));
      b.set_total(counts->total);
      b.set_reason(counts->reason);
      b.set_name(last.name());
      for (const auto& [k, v] : counts->by_state) {
        auto* e = b.add_by_state();
        e->set_key(k);
        e->set_count(v);
      }
      for (const auto& [k, v] : counts->by_verdict) {
        auto* e = b.add_by_verdict();
        e->set_key(k);
        e->set_count(v);
      }
      last = b;
    }
  }
  if (last.batch_id() > 0) {
    std::cout << "\n";
    print_batch_table({last}, std::cout);
  }
  Status s = print_results(a.db, batch_id, std::cout);
  if (!s.ok()) std::cerr << "hipq run: cannot print results: " << s.ToString() << "\n";

  int64_t failed = count_of(last.by_state(), "failed") + count_of(last.by_state(), "dead");
  int64_t left = count_of(last.by_state(), "queued") + count_of(last.by_state(), "leased");
  if (failed > 0) code = kExitFailure;
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  int64_t images = count_of(last.by_state(), "done") - done_before;
  char buf[160];
  snprintf(buf, sizeof buf, "wall time %.1f s; %lld image(s) this run, %.1f images/hour\n", wall_s,
           static_cast<long long>(images), wall_s > 0 ? static_cast<double>(images) * 3600.0 / wall_s : 0.0);
  std::cout << buf;
  if (interrupted || left > 0) {
    std::cout << "stopped: " << count_of(last.by_state(), "done") << " done, " << failed << " failed, " << left
              << " left of " << last.total() << "\n"
              << "resume with: hipq run " << shell_quote(a.manifest) << " --db " << shell_quote(a.db) << "\n";
    if (interrupted) code = 128 + (signals.last() ? signals.last() : SIGINT);
  }
  return code;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run a manifest here: coordinator + one worker per GPU (or the CPU), "
                                        "results and statistics at the end");
  cmd->add_option("manifest", args->manifest, "manifest YAML")->required();
  if (const char* env = std::getenv("HIPQ_DB")) args->db = env;
  cmd->add_option("--db", args->db, "SQLite database file (env HIPQ_DB)")->capture_default_str();
  cmd->add_flag("--new-batch", args->new_batch,
                "queue the manifest as a new batch even when the database holds one of the same manifest");
  cmd->add_option("--backend", args->backend, "hip | cpu (default: hip when a GPU is visible)");
  cmd->add_option("--engine", args->engine, "engine, or sleep:DURATION (a TEST DOUBLE that only waits)")
      ->capture_default_str();
  cmd->add_option("--cpu-workers", args->cpu_workers, "workers when running on the CPU")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch,
                  "jobs each worker runs at once as one UNet batch when they share model and settings (prompts "
                  "and seeds free; each image byte-identical to the job run alone; at most what the memory plan "
                  "allows): 1.." + std::to_string(proto::kMaxBatch))
      ->check(CLI::Range(1, proto::kMaxBatch))
      ->capture_default_str();
  add_max_batch_jobs_option(cmd, args->max_batch_jobs);
  add_memory_options(cmd, args->memory);
  add_monitor_options(cmd, args->monitor);
  cmd->callback([args, &exit_code] { exit_code = run_embedded(*args); });
}

}  // namespace hipq::cli
