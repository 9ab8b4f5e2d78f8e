// Wire records: the translation between db records and wire messages, both
// ways — a leased job becomes a proto::JobAssignment, a worker's
// proto::JobResult a db::NewResult, a WorkerHello a db::WorkerRecord.
//
// Golden lookup: a batch's golden_source is "" (no parity: NO_GOLDEN), an
// absolute directory, or "store" (the coordinator's golden directory, given
// in DispatchSettings). Workers find the golden for a job in that directory by
// key (engine/golden.h find_golden_file); they never open the database.
// Thread safety: pure functions over values.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "db/records.h"
#include "proto/hipq.pb.h"

namespace hipq::coordinator {

struct DispatchSettings {
  std::filesystem::path store_golden_dir;  // where "store" goldens live
  double lease_seconds = 3.0;
};

proto::JobAssignment make_assignment(const db::LeasedJob& leased, const DispatchSettings& settings);
db::NewResult to_db_result(const proto::JobResult& result, const std::string& worker_id);
// Every output a result names must lie inside the job's output directory:
// a relative path below `output_dir` (itself relative to the batch's output
// root) with no "." or ".." component. InvalidArgument naming the first
// that does not.
Status check_result_outputs(const proto::JobResult& result, std::string_view output_dir);
db::WorkerRecord to_worker_record(const proto::WorkerHello& hello, const std::string& state);
// The models a worker holds with their LoRA sets (WorkerHello / Ready), for
// dispatch affinity.
std::vector<db::ModelHolding> to_held_models(const google::protobuf::RepeatedPtrField<proto::HeldModel>& held);

}  // namespace hipq::coordinator
