// hipq worker: one worker process per GPU (worker/worker.h), or a supervisor
// of one per visible GPU with --all-devices (worker/supervisor.h).
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <climits>

#include "cli/commands.h"
#include "cli/memory_options.h"
#include "cli/queue_options.h"
#include "kernels/backend.h"
#include "worker/job_runner_factory.h"
#include "worker/supervisor.h"
#include "worker/worker.h"

namespace hipq::cli {
namespace {

std::atomic<worker::Worker*> g_worker{nullptr};
void on_signal(int sig) {
  if (auto* w = g_worker.load()) {
    // First signal drains (finish the job); a second one leaves at once.
    static std::atomic<int> count{0};
    if (count.fetch_add(1) == 0) w->request_drain();
    else w->request_stop();
  }
}

struct WorkerArgs {
  ConnectOptions connect;
  int device = 0;
  std::string backend;
  std::string engine = "engine";
  std::string id;
  int64_t max_jobs = 0;
  int credit = proto::kDefaultCredit;
  int batch = 1;
  bool all_devices = false;
  std::string health_file;
  MemoryOptions memory;
};

std::string self_exe() {
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "hipq";
}

}  // namespace

std::string default_backend() { return kernels::gpu_device_count() > 0 ? "hip" : "cpu"; }

namespace {

int run_worker(const WorkerArgs& a, const std::vector<std::string>& raw_args) {
  std::string backend = a.backend.empty() ? default_backend() : a.backend;
  auto placement = apply_memory_options(a.memory);
  if (!placement.ok()) {
    spdlog::error("{}", placement.status().ToString());
    return kExitUsage;
  }
  if (a.all_devices) {
    worker::SupervisorOptions so;
    so.executable = self_exe();
    so.backend = backend;
    int n = backend == "hip" ? kernels::gpu_device_count() : 0;
    if (n == 0) {
      so.backend = "cpu";
      so.devices = {0};
      spdlog::info("no GPU visible: one CPU worker");
    } else {
      for (int d = 0; d < n; ++d) so.devices.push_back(d);
    }
    // Re-run ourselves with the same flags, minus the ones the supervisor sets.
    for (size_t i = 0; i < raw_args.size(); ++i) {
      const std::string& s = raw_args[i];
      if (s == "--all-devices") continue;
      if (s == "--device" || s == "--backend" || s == "--id" || s == "--health-file") {
        ++i;
        continue;
      }
      if (s.rfind("--device=", 0) == 0 || s.rfind("--backend=", 0) == 0 || s.rfind("--id=", 0) == 0 ||
          s.rfind("--health-file=", 0) == 0) {
        continue;
      }
      so.common_args.push_back(s);
    }
    // One health file per child: FILE.<device>.
    so.health_file = a.health_file;
    Status s = worker::run_supervisor(so);
    if (!s.ok()) {
      spdlog::error("{}", s.ToString());
      return kExitFailure;
    }
    return kExitOk;
  }
  auto keys = curve_client_keys(a.connect);
  if (!keys.ok()) {
    spdlog::error("{}", keys.status().ToString());
    return kExitUsage;
  }
  auto runner = worker::make_job_runner(a.engine, backend, a.device, *placement);
  if (!runner.ok()) {
    spdlog::error("worker for {} device {}: {}", backend, a.device, runner.status().ToString());
    return runner.status().code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
  }
  worker::WorkerOptions o;
  o.endpoint = a.connect.endpoint;
  o.curve = *keys;
  o.worker_id = a.id;
  o.max_jobs = a.max_jobs;
  o.credit = a.credit;
  o.batch = a.batch;
  o.health_file = a.health_file;
  zmq::context_t context;
  worker::Worker w(context, o, **runner);
  g_worker.store(&w);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  spdlog::info("worker {} connecting to {}", w.worker_id(), o.endpoint);
  Status s = w.run();
  g_worker.store(nullptr);
  if (!s.ok()) {
    spdlog::error("{}", s.ToString());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_worker_command(CLI::App& app, int& exit_code) {
  static WorkerArgs args;
  auto* cmd = app.add_subcommand("worker", "Run jobs from a coordinator on one GPU (or all of them)");
  add_connect_options(cmd, args.connect);
  cmd->add_option("--device", args.device, "GPU index")->capture_default_str();
  cmd->add_option("--backend", args.backend, "hip | cpu (default: hip when a GPU is visible)");
  cmd->add_option("--engine", args.engine,
                  "engine (the real pipeline), or sleep:DURATION — a TEST DOUBLE that only waits (queue tests, "
                  "benchmarks)")
      ->capture_default_str();
  cmd->add_option("--id", args.id, "worker id (default <host>/<backend><device>/<pid>)");
  add_memory_options(cmd, args.memory);
  cmd->add_option("--max-jobs", args.max_jobs, "leave after this many jobs (0 = never)");
  cmd->add_option("--credit", args.credit,
                  "jobs held at once: 1 = ask for the next job after reporting the last; 2 = also hold the next "
                  "one while running one, so the hand-off hides behind work (docs/protocol.md)")
      ->check(CLI::Range(1, proto::kMaxCredit))
      ->capture_default_str();
  cmd->add_option("--batch", args.batch,
                  "jobs run at once as one batch when they share model and settings (at most what the engine "
                  "can batch); above 1 the worker asks for that many jobs when idle instead of --credit "
                  "(docs/protocol.md, \"Batching\")")
      ->check(CLI::Range(1, proto::kMaxBatch))
      ->capture_default_str();
  cmd->add_option("--health-file", args.health_file,
                  "rewrite FILE on every heartbeat and remove it on exit, for liveness probes (with --all-devices: "
                  "FILE.<device> per worker)");
  cmd->add_flag("--all-devices", args.all_devices, "start and supervise one worker process per visible GPU");
  cmd->callback([&exit_code, cmd] {
    std::vector<std::string> raw;
    // Everything after `worker`, as given: the supervisor passes it on.
    for (const auto& opt : cmd->get_options()) {
      if (opt->count() == 0 || opt->get_name() == "--help") continue;
      std::string name = opt->get_name();
      if (name.rfind("--", 0) != 0) continue;
      if (opt->get_expected_min() == 0) {
        raw.push_back(name);
      } else {
        for (const auto& r : opt->results()) {
          raw.push_back(name);
          raw.push_back(r);
        }
      }
    }
    raw.insert(raw.begin(), "worker");
    exit_code = run_worker(args, raw);
  });
}

}  // namespace hipq::cli
