#include "worker/supervisor.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

namespace hipq::worker {
namespace {

std::atomic<int> g_signal{0};
void on_signal(int sig) { g_signal.store(sig); }

struct Child {
  int device = 0;
  pid_t pid = -1;
  std::chrono::steady_clock::time_point started{};
  std::chrono::milliseconds backoff{1000};
  std::chrono::steady_clock::time_point restart_at{};
  bool done = false;
};

pid_t spawn(const SupervisorOptions& o, int device) {
  std::vector<std::string> args = {o.executable};
  args.insert(args.end(), o.common_args.begin(), o.common_args.end());
  args.push_back("--device");
  args.push_back(std::to_string(device));
  args.push_back("--backend");
  args.push_back(o.backend);
  if (!o.health_file.empty()) {
    args.push_back("--health-file");
    args.push_back(o.health_file + "." + std::to_string(device));
  }
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(o.executable.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

Status run_supervisor(const SupervisorOptions& options) {
  if (options.devices.empty()) return Status::InvalidArgument("no devices to start workers on");
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  std::vector<Child> children;
  for (int d : options.devices) {
    Child c;
    c.device = d;
    children.push_back(c);
  }
  bool stopping = false;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    int sig = g_signal.exchange(0);
    if (sig != 0 && !stopping) {
      stopping = true;
      spdlog::info("supervisor: {} received; draining {} worker(s)", strsignal(sig), children.size());
      for (auto& c : children) {
        if (c.pid > 0) kill(c.pid, SIGTERM);
      }
    }
    bool any_alive = false;
    for (auto& c : children) {
      if (c.done) continue;
      if (c.pid < 0) {
        if (stopping) {
          c.done = true;
          continue;
        }
        if (now < c.restart_at) {
          any_alive = true;
          continue;
        }
        c.pid = spawn(options, c.device);
        if (c.pid < 0) return Status::Internal(std::string("fork: ") + std::strerror(errno));
        c.started = now;
        spdlog::info("supervisor: worker for {} device {} started (pid {})", options.backend, c.device, c.pid);
      }
      int status = 0;
      pid_t r = waitpid(c.pid, &status, WNOHANG);
      if (r == 0) {
        any_alive = true;
        continue;
      }
      c.pid = -1;
      bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (clean || stopping) {
        spdlog::info("supervisor: worker for device {} exited{}", c.device, clean ? "" : " (stopping)");
        c.done = true;
        continue;
      }
      if (now - c.started > std::chrono::minutes(1)) c.backoff = std::chrono::milliseconds(1000);
      spdlog::warn("supervisor: worker for device {} died ({} {}); restarting in {} ms", c.device,
                   WIFSIGNALED(status) ? "signal" : "exit code",
                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), c.backoff.count());
      c.restart_at = now + c.backoff;
      c.backoff = std::min(c.backoff * 2, std::chrono::milliseconds(32000));
      any_alive = true;
    }
    if (!any_alive) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace hipq::worker
