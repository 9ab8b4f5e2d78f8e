#include "cli/memory_options.h"

#include <cstdlib>

#include "base/byte_size.h"
#include "kernels/backend.h"
#include "spec/generation_settings.h"

namespace hipq::cli {

void add_memory_options(CLI::App* cmd, MemoryOptions& o) {
  cmd->add_option("--placement", o.placement,
                  "Where models live: " + spec::join_names(engine::known_placements(), " | ") +
                      " (auto: standard when the job's memory plan fits the device, else low; docs/memory.md)")
      ->capture_default_str();
  cmd->add_option("--device-memory-limit", o.device_memory_limit,
                  "Cap the device memory hipq holds, e.g. 8GiB: allocations past it fail as on a card that size "
                  "(env " + std::string(kernels::kDeviceMemoryLimitEnv) + ")");
}

Result<engine::Placement> apply_memory_options(const MemoryOptions& o) {
  auto placement = engine::parse_placement(o.placement);
  if (!placement.ok()) return placement.status().WithContext("--placement");
  if (!o.device_memory_limit.empty()) {
    auto limit = parse_byte_size(o.device_memory_limit);
    if (!limit.ok()) return limit.status().WithContext("--device-memory-limit");
    if (::setenv(kernels::kDeviceMemoryLimitEnv, std::to_string(*limit).c_str(), 1) != 0)
      return Status::Internal("--device-memory-limit: cannot set " + std::string(kernels::kDeviceMemoryLimitEnv));
  }
  return *placement;
}

}  // namespace hipq::cli
