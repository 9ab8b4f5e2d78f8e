// HealthFile: a small file a worker rewrites on every heartbeat tick, for
// liveness probes (Kubernetes exec probes, systemd watchdogs, cron checks)
// that cannot speak the protocol. A probe checks its age:
//
//   test -n "$(find /tmp/hipq-health -mmin -1)"
//
// The file is rewritten atomically (temporary + rename), so a probe never
// reads half of it, and removed when the worker leaves cleanly, so a stale
// file never claims health. Content, one `key=value` per line (the format is
// in docs/operations.md, "Health file"):
//
//   worker=box1/hip0/4242
//   state=connected            (connected | backing-off | reconnecting | draining)
//   job=17                     (0 when idle)
//   attempt=1
//   coordinator_silent_ms=312  (time since the coordinator was last heard)
//   updated_unix=1796000000.125
//
// The worker's connection thread writes it; it stays fresh while a job runs
// (the GPU work is on another thread), and stops being rewritten only when the
// connection loop itself is stuck, which is what a liveness probe should catch.
//
// Thread safety: one writer (the connection thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "base/status.h"

namespace hipq::worker {

struct HealthSnapshot {
  std::string worker_id;
  std::string state;  // connected | backing-off | reconnecting | draining
  int64_t job_id = 0;
  int attempt = 0;
  int64_t coordinator_silent_ms = 0;
  double updated_unix = 0;
};

// The file's text for one snapshot.
std::string format_health(const HealthSnapshot& s);

class HealthFile {
 public:
  // An empty path disables it (every call is a no-op).
  explicit HealthFile(std::filesystem::path path) : path_(std::move(path)) {}
  HealthFile(const HealthFile&) = delete;
  HealthFile& operator=(const HealthFile&) = delete;

  bool enabled() const { return !path_.empty(); }
  const std::filesystem::path& path() const { return path_; }

  // Rewrites the file. Errors are returned, and the first one of a run of
  // failures is also logged by the caller's choice; the worker goes on (a
  // probe will then restart it, which is the point).
  Status write(const HealthSnapshot& s);
  // Removes the file (clean exit).
  void remove();

 private:
  std::filesystem::path path_;
};

}  // namespace hipq::worker
