// Batch progress and batch tables shared by `hipq submit --wait`, `hipq status`
// and `hipq run` (cli/batch_progress.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/result.h"
#include "coordinator/client.h"
#include "proto/hipq.pb.h"

namespace hipq::cli {

// Follows a batch until none of its jobs is queued or leased: a live progress
// bar (done / failed / running per worker, ETA) when `tty`, else one plain
// line per change. Returns the batch's final counts, or its counts at the
// moment `stop` (polled between updates) turned true.
Result<proto::BatchStatus> wait_for_batch(coordinator::Client& client, int64_t batch_id, bool tty, std::ostream& out,
                                          const std::function<bool()>& stop = {});
// One line per batch: counts by state, verdicts, and the first failure's
// reason shortened to fit (BatchStatus.reason).
void print_batch_table(const std::vector<proto::BatchStatus>& batches, std::ostream& out);
// `text` cut to at most `width` bytes (whole UTF-8 characters) with "..."
// when cut; newlines become spaces. For reasons in tables.
std::string shorten(const std::string& text, size_t width);
int64_t count_of(const google::protobuf::RepeatedPtrField<proto::CountEntry>& entries, const std::string& key);

}  // namespace hipq::cli
