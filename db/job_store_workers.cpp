// JobStore workers (db/job_store.h, "workers"): the workers table.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "db/database.h"
#include "db/job_rows.h"
#include "db/job_store.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {

// ---- workers -------------------------------------------------------------------------

Status JobStore::upsert_worker(const WorkerRecord& w, double now) {
  if (w.id.empty()) return Status::InvalidArgument("upsert_worker: empty worker id");
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  static constexpr char kUpsertWorker[] =
      "INSERT INTO workers (id, host, device_index, device_name, arch, memory_bytes, runtime_version, "
      "driver_version, build_sha, backend, first_seen, last_seen, state, curve_key) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET host = excluded.host, "
      "device_index = excluded.device_index, device_name = excluded.device_name, arch = excluded.arch, "
      "memory_bytes = excluded.memory_bytes, runtime_version = excluded.runtime_version, "
      "driver_version = excluded.driver_version, build_sha = excluded.build_sha, backend = excluded.backend, "
      "last_seen = excluded.last_seen, state = excluded.state, "
      "curve_key = COALESCE(workers.curve_key, excluded.curve_key) "
      "WHERE workers.curve_key IS NULL OR excluded.curve_key IS NULL OR workers.curve_key = excluded.curve_key";
  Statement s = db_.prepare_cached(kUpsertWorker);
  s.bind_text(0, w.id);
  s.bind_text(1, w.host);
  s.bind_int(2, w.device_index);
  s.bind_text(3, w.device_name);
  s.bind_text(4, w.arch);
  s.bind_int64(5, w.memory_bytes);
  s.bind_text(6, w.runtime_version);
  s.bind_text(7, w.driver_version);
  s.bind_text(8, w.build_sha);
  s.bind_text(9, w.backend);
  s.bind_double(10, now);
  s.bind_double(11, now);
  s.bind_text(12, w.state);
  if (w.curve_key) {
    s.bind_text(13, *w.curve_key);
  } else {
    s.bind_null(13);
  }
  HIPQ_RETURN_IF_ERROR(s.run());
  if (db_.changes() == 0) {
    return Status::PermissionDenied("worker id \"" + w.id + "\" is bound to another CURVE key than " +
                                    w.curve_key.value_or("") + "; nothing recorded");
  }
  return txn.commit();
}

Result<std::optional<std::string>> JobStore::worker_curve_key(std::string_view worker_id) {
  static constexpr char kSelectWorkerKey[] = "SELECT curve_key FROM workers WHERE id = ?";
  Statement s = db_.prepare_cached(kSelectWorkerKey);
  s.bind_text(0, worker_id);
  HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
  if (!row || s.column_is_null(0)) return std::optional<std::string>();
  return std::optional<std::string>(s.column_text(0));
}

Status JobStore::forget_worker_key(std::string_view worker_id) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  static constexpr char kForgetWorkerKey[] = "UPDATE workers SET curve_key = NULL WHERE id = ?";
  Statement s = db_.prepare_cached(kForgetWorkerKey);
  s.bind_text(0, worker_id);
  HIPQ_RETURN_IF_ERROR(s.run());
  if (db_.changes() == 0) {
    return Status::NotFound("worker " + std::string(worker_id) + " is not in database " + db_.describe());
  }
  return txn.commit();
}

Status JobStore::set_worker_state(std::string_view worker_id, std::string_view state, double now) {
  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  static constexpr char kSetWorkerState[] = "UPDATE workers SET state = ?, last_seen = ? WHERE id = ?";
  Statement s = db_.prepare_cached(kSetWorkerState);
  s.bind_text(0, state);
  s.bind_double(1, now);
  s.bind_text(2, worker_id);
  HIPQ_RETURN_IF_ERROR(s.run());
  if (db_.changes() == 0) return Status::NotFound("worker " + std::string(worker_id) + " is not known");
  return txn.commit();
}

Result<std::vector<WorkerRecord>> JobStore::list_workers() {
  static constexpr char kSelectWorkers[] =
      "SELECT id, host, device_index, device_name, arch, memory_bytes, runtime_version, driver_version, build_sha, "
      "backend, first_seen, last_seen, state, curve_key FROM workers ORDER BY id";
  Statement s = db_.prepare_cached(kSelectWorkers);
  std::vector<WorkerRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    WorkerRecord w;
    w.id = s.column_text(0);
    w.host = s.column_text(1);
    w.device_index = s.column_int(2);
    w.device_name = s.column_text(3);
    w.arch = s.column_text(4);
    w.memory_bytes = s.column_int64(5);
    w.runtime_version = s.column_text(6);
    w.driver_version = s.column_text(7);
    w.build_sha = s.column_text(8);
    w.backend = s.column_text(9);
    w.first_seen = s.column_double(10);
    w.last_seen = s.column_double(11);
    w.state = s.column_text(12);
    if (!s.column_is_null(13)) w.curve_key = s.column_text(13);
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace hipq::db
