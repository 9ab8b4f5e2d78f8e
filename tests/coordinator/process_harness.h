// Test harness: real `hipq` processes on loopback, a temporary directory per
// test, and helpers to read the database those processes write.
// Never a fixed port: the coordinator binds tcp://127.0.0.1:* and writes the
// endpoint it got to a file, which the harness reads back.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace hipq::testing {

namespace fs = std::filesystem;

#ifdef HIPQ_EXE
inline std::string hipq_exe() { return HIPQ_EXE; }
#else
// Tests that only use the helpers (no processes) need no binary.
inline std::string hipq_exe() { return "hipq"; }
#endif

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process with stdout/stderr in files; killed (SIGKILL) when destroyed.
class Process {
 public:
  Process(const std::vector<std::string>& args, const fs::path& log_prefix) : log_prefix_(log_prefix) {
    pid_ = fork();
    if (pid_ == 0) {
      int out = ::open((log_prefix.string() + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open((log_prefix.string() + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(out, 1);
      dup2(err, 2);
      std::vector<std::string> full = {hipq_exe()};
      full.insert(full.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : full) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(hipq_exe().c_str(), argv.data());
      _exit(127);
    }
  }
  ~Process() {
    if (running()) {
      kill(pid_, SIGKILL);
      wait();
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  bool running() {
    if (exited_) return false;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      status_ = status;
      return false;
    }
    return true;
  }
  void signal(int sig) { kill(pid_, sig); }
  // Waits for exit; returns the exit code (128+signal when killed), -1 on timeout.
  int wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (running()) {
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
    return -2;
  }
  std::string out() const { return slurp(log_prefix_.string() + ".out"); }
  std::string err() const { return slurp(log_prefix_.string() + ".err"); }
  pid_t pid() const { return pid_; }

 private:
  fs::path log_prefix_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

inline bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("hipq-test-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    if (!::testing::Test::HasFailure()) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// A manifest for the SleepEngine: `prompts` prompts x `seeds` seeds.
inline fs::path write_sleep_manifest(const fs::path& dir, const std::string& name, int prompts, int seeds,
                                     int priority = 0, const std::string& extra_prompt = "") {
  std::ostringstream m;
  m << "batch: " << name << "\n"
    << "priority: " << priority << "\n"
    << "model: synthetic:tiny-sdxl\n"
    << "defaults:\n  width: 64\n  height: 64\n  steps: 4\n  seeds: {from: 0, count: " << seeds << "}\n"
    << "parity:\n  golden: none\n"
    << "outputs:\n  directory: out\n  save: [latent]\n"
    << "prompts:\n";
  for (int i = 0; i < prompts; ++i) m << "  - prompt number " << i << "\n";
  if (!extra_prompt.empty()) m << "  - \"" << extra_prompt << "\"\n";
  fs::path p = dir / (name + ".yaml");
  std::ofstream(p) << m.str();
  return p;
}

// Starts a coordinator on 127.0.0.1:<any> (or `bind`) and waits for its endpoint.
inline std::unique_ptr<Process> start_coordinator(const fs::path& dir, const std::string& tag, std::string* endpoint,
                                                  const std::string& bind = "tcp://127.0.0.1:*",
                                                  std::vector<std::string> extra = {}) {
  fs::path ep_file = dir / (tag + ".endpoint");
  fs::remove(ep_file);
  std::vector<std::string> args = {"coordinator", "--bind", bind, "--endpoint-file", ep_file.string()};
  // `extra` may name another database (--db); the default is dir/hipq.db.
  if (std::find(extra.begin(), extra.end(), "--db") == extra.end()) {
    args.insert(args.end(), {"--db", (dir / "hipq.db").string()});
  }
  args.insert(args.end(), extra.begin(), extra.end());
  auto p = std::make_unique<Process>(args, dir / tag);
  bool ok = wait_until([&] { return fs::exists(ep_file) || !p->running(); }, std::chrono::seconds(10));
  EXPECT_TRUE(ok && fs::exists(ep_file)) << "coordinator did not start: " << p->err();
  std::string ep = slurp(ep_file);
  while (!ep.empty() && (ep.back() == '\n' || ep.back() == '\r')) ep.pop_back();
  *endpoint = ep;
  return p;
}

inline std::unique_ptr<Process> start_worker(const fs::path& dir, const std::string& tag, const std::string& endpoint,
                                             const std::string& engine, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"worker", "--connect", endpoint, "--engine", engine, "--backend", "cpu",
                                   "--id", tag};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<Process>(args, dir / tag);
}

// Runs `hipq ARGS...` to completion; returns the exit code, fills out/err.
inline int run_hipq(const fs::path& dir, const std::string& tag, const std::vector<std::string>& args,
                    std::string* out = nullptr, std::string* err = nullptr,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  Process p(args, dir / tag);
  int code = p.wait(timeout);
  if (out) *out = p.out();
  if (err) *err = p.err();
  return code;
}

}  // namespace hipq::testing
