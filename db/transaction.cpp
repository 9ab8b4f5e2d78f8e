#include "db/transaction.h"

#include <utility>

#include "db/database.h"
#include "db/statement.h"

namespace hipq::db {

Result<Transaction> Transaction::begin(Database& db, const char* sql) {
  if (db.in_transaction()) {
    return Status::FailedPrecondition("database " + db.describe() +
                                      ": a transaction is already open on this connection (no nesting)");
  }
  // Prepared once per connection: a coordinator begins and commits one
  // transaction per loop turn.
  HIPQ_RETURN_IF_ERROR(db.prepare_cached(sql).run());
  return Transaction(&db, false);
}

namespace {

// Savepoints are taken and released for every JobStore call inside a group
// commit (thousands a second): prepared once per connection, not parsed again.
constexpr char kSavepoint[] = "SAVEPOINT hipq_write";
constexpr char kReleaseSavepoint[] = "RELEASE SAVEPOINT hipq_write";
constexpr char kRollbackToSavepoint[] = "ROLLBACK TO SAVEPOINT hipq_write";

Status run_cached(Database& db, const char* sql) { return db.prepare_cached(sql).run(); }

}  // namespace

Result<Transaction> Transaction::begin_write(Database& db) {
  if (!db.in_transaction()) return begin_immediate(db);
  HIPQ_RETURN_IF_ERROR(run_cached(db, kSavepoint));
  return Transaction(&db, true);
}

Result<Transaction> Transaction::begin_immediate(Database& db) { return begin(db, "BEGIN IMMEDIATE"); }
Result<Transaction> Transaction::begin_deferred(Database& db) { return begin(db, "BEGIN DEFERRED"); }

Transaction::Transaction(Transaction&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), savepoint_(other.savepoint_) {}

Transaction::~Transaction() {
  if (db_ != nullptr) (void)rollback();
}

Status Transaction::commit() {
  if (db_ == nullptr) return Status::FailedPrecondition("commit of a transaction that is not open");
  Database* db = db_;
  if (savepoint_) {
    db_ = nullptr;
    // Savepoint names resolve to the innermost one of that name, so nested
    // hipq_write savepoints release in the right order.
    return run_cached(*db, kReleaseSavepoint);
  }
  Status s = db->prepare_cached("COMMIT").run();
  if (!s.ok()) {
    // A failed COMMIT (e.g. SQLITE_BUSY) leaves the transaction open; end it
    // so the connection is usable and the caller's view is "nothing written".
    if (db->in_transaction()) (void)db->execute("ROLLBACK");
    db_ = nullptr;
    return s;
  }
  db_ = nullptr;
  return Status::Ok();
}

Status Transaction::rollback() {
  if (db_ == nullptr) return Status::FailedPrecondition("rollback of a transaction that is not open");
  Database* db = std::exchange(db_, nullptr);
  // SQLite may already have rolled back on its own (e.g. after SQLITE_FULL).
  if (!db->in_transaction()) return Status::Ok();
  if (savepoint_) {
    HIPQ_RETURN_IF_ERROR(run_cached(*db, kRollbackToSavepoint));
    return run_cached(*db, kReleaseSavepoint);
  }
  return db->execute("ROLLBACK");
}

}  // namespace hipq::db
