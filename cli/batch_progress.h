// Helpers shared by `hipq submit --wait` and `hipq run` (cli/client_commands.cpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <vector>

#include "base/result.h"
#include "coordinator/client.h"
#include "proto/hipq.pb.h"

namespace hipq::cli {

// Follows a batch until none of its jobs is queued or leased: a live progress
// bar (done / failed / running per worker, ETA) when `tty`, else one plain
// line per change. Returns the batch's final counts.
Result<proto::BatchStatus> wait_for_batch(coordinator::Client& client, int64_t batch_id, bool tty, std::ostream& out);
void print_batch_table(const std::vector<proto::BatchStatus>& batches, std::ostream& out);

}  // namespace hipq::cli
