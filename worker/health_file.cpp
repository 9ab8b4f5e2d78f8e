#include "worker/health_file.h"

#include <cstdio>
#include <system_error>

#include "base/fs.h"

namespace hipq::worker {

std::string format_health(const HealthSnapshot& s) {
  char updated[64];
  std::snprintf(updated, sizeof updated, "%.3f", s.updated_unix);
  std::string out;
  out += "worker=" + s.worker_id + "\n";
  out += "state=" + s.state + "\n";
  out += "job=" + std::to_string(s.job_id) + "\n";
  out += "attempt=" + std::to_string(s.attempt) + "\n";
  out += "coordinator_silent_ms=" + std::to_string(s.coordinator_silent_ms) + "\n";
  out += std::string("updated_unix=") + updated + "\n";
  return out;
}

Status HealthFile::write(const HealthSnapshot& s) {
  if (!enabled()) return Status::Ok();
  return write_file_atomic(path_, format_health(s)).WithContext("health file");
}

void HealthFile::remove() {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);
}

}  // namespace hipq::worker
