// Options of the commands that run jobs on a device (generate, worker, run):
// how much device memory they may use and where the models live.
//   --placement auto|standard|low   engine/memory_plan.h (default auto)
//   --device-memory-limit SIZE      caps the device memory hipq holds, as if
//                                   the card had only SIZE ("8GiB"); also
//                                   env HIPQ_DEVICE_MEMORY_LIMIT
// Thread safety: CLI parsing only.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "base/result.h"
#include "engine/memory_plan.h"

namespace hipq::cli {

struct MemoryOptions {
  std::string placement = "auto";
  std::string device_memory_limit;
};

void add_memory_options(CLI::App* cmd, MemoryOptions& o);

// The placement; the limit, checked, is set as HIPQ_DEVICE_MEMORY_LIMIT for
// this process and the worker processes it starts (kernels::make_backend
// reads it). InvalidArgument naming the flag.
Result<engine::Placement> apply_memory_options(const MemoryOptions& o);

}  // namespace hipq::cli
