// Supervisor: `hipq worker --all-devices` — one worker process per visible
// GPU (the cpu backend when there is none), restarted when one dies.
//
// Each child is this same binary run as `hipq worker --device K ...` (the
// arguments given, device flags replaced). A child that exits non-zero or by
// a signal is restarted after a backoff (1 s doubling to 32 s, reset after a
// minute of running); one that exits 0 (drained) is not. SIGTERM/SIGINT to
// the supervisor are forwarded to the children (they drain) and it returns
// once all have exited.
// Thread safety: run() on the main thread; uses signals, one per process.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace hipq::worker {

struct SupervisorOptions {
  std::string executable;                 // path of the hipq binary (/proc/self/exe)
  std::vector<std::string> common_args;   // everything after `hipq`, device flags removed
  std::vector<int> devices;               // one child per entry
  std::string backend;                    // "hip" | "cpu"
  std::string health_file;                // non-empty: child N gets --health-file <this>.N
};

// Returns when every child has exited for good (drained or after a signal).
Status run_supervisor(const SupervisorOptions& options);

}  // namespace hipq::worker
