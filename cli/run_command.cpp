// hipq run MANIFEST: the embedded default — coordinator and workers (one per
// local GPU, or one CPU worker) in this process, a SQLite file in the working
// directory, results and a short statistics table at the end.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <thread>

#include "cli/batch_progress.h"
#include "cli/commands.h"
#include "coordinator/client.h"
#include "coordinator/manifest.h"
#include "coordinator/server.h"
#include "db/database.h"
#include "db/job_store.h"
#include "kernels/backend.h"
#include "worker/job_runner.h"
#include "worker/worker.h"

namespace hipq::cli {

Result<std::unique_ptr<worker::JobRunner>> make_job_runner(const std::string& engine, const std::string& backend,
                                                           int device);
std::string default_backend();

namespace {

struct RunArgs {
  std::string manifest;
  std::string db = "hipq.db";
  std::string backend;
  std::string engine = "engine";
  int cpu_workers = 1;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = p * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

Status print_results(const std::string& db_path, int64_t batch_id, std::ostream& out) {
  HIPQ_ASSIGN_OR_RETURN(auto db, db::Database::open_and_migrate(db_path));
  db::JobStore store(*db);
  HIPQ_ASSIGN_OR_RETURN(auto batch, store.get_batch(batch_id));
  HIPQ_ASSIGN_OR_RETURN(auto jobs, store.list_jobs(batch_id));
  std::map<std::string, std::vector<double>> phase_ms;
  char buf[512];
  out << "\nresults of batch " << batch_id << " \"" << batch.name << "\" (outputs under " << batch.output_root
      << ")\n";
  snprintf(buf, sizeof buf, "%-6s %-32s %10s %-9s %-10s %8s %10s  %s\n", "job", "prompt", "seed", "state", "verdict",
           "cosine", "total ms", "output");
  out << buf;
  for (const auto& j : jobs) {
    std::string verdict = j.verdict.value_or("-");
    std::string cosine = "-";
    std::string output = "-";
    double total = 0;
    auto r = store.get_result(j.id);
    if (r.ok()) {
      if (r->cosine) {
        snprintf(buf, sizeof buf, "%.6f", *r->cosine);
        cosine = buf;
      }
      if (!r->outputs.empty()) output = r->outputs.front().path;
      auto phases = store.list_phase_timings(r->attempt_id);
      if (phases.ok()) {
        for (const auto& p : *phases) {
          phase_ms[p.phase].push_back(p.host_ms);
          total += p.host_ms;
        }
      }
    }
    std::string prompt = j.prompt.size() > 32 ? j.prompt.substr(0, 29) + "..." : j.prompt;
    snprintf(buf, sizeof buf, "%-6lld %-32s %10llu %-9s %-10s %8s %10.1f  %s\n", static_cast<long long>(j.id),
             prompt.c_str(), static_cast<unsigned long long>(j.seed), std::string(db::job_state_name(j.state)).c_str(),
             verdict.c_str(), cosine.c_str(), total, output.c_str());
    out << buf;
  }
  if (!phase_ms.empty()) {
    out << "\nphase timings (host ms)\n";
    snprintf(buf, sizeof buf, "%-12s %5s %10s %10s %10s %10s\n", "phase", "n", "mean", "p50", "p90", "max");
    out << buf;
    for (const char* phase : {"load", "text_encode", "denoise", "decode", "write", "parity"}) {
      auto it = phase_ms.find(phase);
      if (it == phase_ms.end()) continue;
      const auto& v = it->second;
      double mean = 0;
      for (double x : v) mean += x;
      mean /= static_cast<double>(v.size());
      snprintf(buf, sizeof buf, "%-12s %5zu %10.1f %10.1f %10.1f %10.1f\n", phase, v.size(), mean,
               percentile(v, 0.5), percentile(v, 0.9), *std::max_element(v.begin(), v.end()));
      out << buf;
    }
  }
  out << "\nrecorded in " << db_path << " (query it with `hipq runs` / `hipq stats`)\n";
  return Status::Ok();
}

int run_embedded(const RunArgs& a) {
  auto manifest = coordinator::parse_manifest(a.manifest);
  if (!manifest.ok()) {
    std::cerr << manifest.status().message() << "\nhipq: " << a.manifest << " is not valid; nothing was run\n";
    return kExitUsage;
  }
  std::string backend = a.backend.empty() ? default_backend() : a.backend;
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
    auto r = make_job_runner(a.engine, backend, backend == "hip" ? d : 0);
    if (!r.ok()) {
      spdlog::error("worker for {} device {}: {}", backend, d, r.status().ToString());
      return kExitFailure;
    }
    runners.push_back(std::move(*r));
  }

  zmq::context_t ctx;
  coordinator::ServerOptions so;
  so.db_path = a.db;
  so.bind = "inproc://hipq-run-" + std::to_string(getpid());
  auto server = coordinator::Server::create(ctx, so);
  if (!server.ok()) {
    spdlog::error("{}", server.status().ToString());
    return kExitFailure;
  }
  Status server_status;
  std::thread server_thread([&] { server_status = (*server)->run(); });
  std::vector<std::unique_ptr<worker::Worker>> workers;
  std::vector<std::thread> worker_threads;
  for (size_t i = 0; i < runners.size(); ++i) {
    worker::WorkerOptions wo;
    wo.endpoint = so.bind;
    wo.worker_id = worker::host_name() + "/" + backend + std::to_string(devices[i]) + "/run" + std::to_string(getpid());
    workers.push_back(std::make_unique<worker::Worker>(ctx, wo, *runners[i]));
  }
  for (auto& w : workers) worker_threads.emplace_back([&w] { (void)w->run(); });
  std::cout << "hipq run: " << manifest->job_count() << " job(s) of " << a.manifest << " on " << workers.size()
            << " " << backend << " worker(s); database " << a.db << "\n";

  int code = kExitOk;
  int64_t batch_id = 0;
  {
    coordinator::ClientOptions co;
    co.endpoint = so.bind;
    auto client = coordinator::Client::connect(ctx, co);
    auto submitted = client.ok() ? (*client)->submit(a.manifest) : Result<proto::SubmitReply>(client.status());
    if (!submitted.ok()) {
      spdlog::error("{}", submitted.status().ToString());
      code = kExitFailure;
    } else {
      batch_id = submitted->batch_id();
      auto final_status = wait_for_batch(**client, batch_id, isatty(STDOUT_FILENO), std::cout);
      if (!final_status.ok()) {
        spdlog::error("{}", final_status.status().ToString());
        code = kExitFailure;
      } else {
        print_batch_table({*final_status}, std::cout);
        for (const auto& e : final_status->by_state()) {
          if ((e.key() == "failed" || e.key() == "dead") && e.count() > 0) code = kExitFailure;
        }
      }
    }
  }
  for (auto& w : workers) w->request_drain();
  for (auto& t : worker_threads) t.join();
  (*server)->request_stop();
  server_thread.join();
  workers.clear();
  server->reset();
  if (batch_id > 0) {
    Status s = print_results(a.db, batch_id, std::cout);
    if (!s.ok()) spdlog::error("cannot print results: {}", s.ToString());
  }
  return code;
}

}  // namespace

void add_run_command(CLI::App& app, int& exit_code) {
  static RunArgs args;
  auto* cmd = app.add_subcommand("run", "Run a manifest here: coordinator + one worker per GPU (or the CPU), "
                                        "results and statistics at the end");
  cmd->add_option("manifest", args.manifest, "manifest YAML")->required();
  cmd->add_option("--db", args.db, "SQLite database file")->capture_default_str();
  cmd->add_option("--backend", args.backend, "hip | cpu (default: hip when a GPU is visible)");
  cmd->add_option("--engine", args.engine, "engine, or sleep:DURATION (a TEST DOUBLE that only waits)")
      ->capture_default_str();
  cmd->add_option("--cpu-workers", args.cpu_workers, "workers when running on the CPU")->capture_default_str();
  cmd->callback([&exit_code] { exit_code = run_embedded(args); });
}

}  // namespace hipq::cli
