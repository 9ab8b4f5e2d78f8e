#include "db/transaction.h"

#include <utility>

#include "db/database.h"

namespace hipq::db {

Result<Transaction> Transaction::begin(Database& db, const char* sql) {
  if (db.in_transaction()) {
    return Status::FailedPrecondition("database " + db.describe() +
                                      ": a transaction is already open on this connection (no nesting)");
  }
  HIPQ_RETURN_IF_ERROR(db.execute(sql));
  return Transaction(&db, false);
}

Result<Transaction> Transaction::begin_write(Database& db) {
  if (!db.in_transaction()) return begin_immediate(db);
  HIPQ_RETURN_IF_ERROR(db.execute("SAVEPOINT hipq_write"));
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
    return db->execute("RELEASE SAVEPOINT hipq_write");
  }
  Status s = db->execute("COMMIT");
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
  if (savepoint_) return db->execute("ROLLBACK TO SAVEPOINT hipq_write; RELEASE SAVEPOINT hipq_write");
  return db->execute("ROLLBACK");
}

}  // namespace hipq::db
