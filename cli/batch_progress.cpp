// Batch progress and batch tables for `hipq submit --wait`, `hipq status` and
// `hipq run` (cli/batch_progress.h).
#include "cli/batch_progress.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <thread>

namespace hipq::cli {

int64_t count_of(const google::protobuf::RepeatedPtrField<proto::CountEntry>& entries,
                 const std::string& key) {
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

std::string format_duration(double s) {
  if (s < 0 || s > 1e7) return "?";
  char buf[32];
  int si = static_cast<int>(s);
  if (si >= 3600)
    snprintf(buf, sizeof buf, "%dh%02dm", si / 3600, si / 60 % 60);
  else if (si >= 60)
    snprintf(buf, sizeof buf, "%dm%02ds", si / 60, si % 60);
  else
    snprintf(buf, sizeof buf, "%ds", si);
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
    if (reply.batches_size() != 1)
      return Status::NotFound("batch " + std::to_string(batch_id) + " not found");
    const proto::BatchStatus& b = reply.batches(0);
    int64_t done = count_of(b.by_state(), "done");
    int64_t failed = count_of(b.by_state(), "failed") + count_of(b.by_state(), "dead");
    int64_t cancelled = count_of(b.by_state(), "cancelled");
    int64_t running = count_of(b.by_state(), "leased");
    int64_t queued = count_of(b.by_state(), "queued");
    int64_t finished = done + failed + cancelled;
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta =
        finished > 0 ? elapsed / static_cast<double>(finished) * static_cast<double>(queued + running) : -1;
    std::ostringstream line;
    if (tty) {
      const int width = 30;
      int filled = b.total() > 0 ? static_cast<int>(width * finished / b.total()) : width;
      line << "\r[" << std::string(static_cast<size_t>(filled), '#')
           << std::string(static_cast<size_t>(width - filled), '.') << "] " << finished << "/" << b.total()
           << " done " << done << " failed " << failed << " running " << running;
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
  snprintf(buf, sizeof buf, "%-6s %-24s %-9s %4s %6s %6s %6s %6s %6s %6s %6s  %-20s %s\n", "batch", "name",
           "state", "prio", "total", "queued", "run", "done", "failed", "dead", "cancel", "verdicts",
           "reason");
  out << buf;
  for (const auto& b : batches) {
    std::string verdicts;
    for (const auto& v : b.by_verdict()) verdicts += v.key() + "=" + std::to_string(v.count()) + " ";
    std::string reason = b.reason().empty() ? "-" : shorten(b.reason(), 60);
    snprintf(buf, sizeof buf,
             "%-6lld %-24.24s %-9s %4d %6lld %6lld %6lld %6lld %6lld %6lld %6lld  %-20s %s\n",
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

}  // namespace hipq::cli
