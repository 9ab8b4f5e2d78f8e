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
  return Transaction(&db);
}

Result<Transaction> Transaction::begin_immediate(Database& db) { return begin(db, "BEGIN IMMEDIATE"); }
Result<Transaction> Transaction::begin_deferred(Database& db) { return begin(db, "BEGIN DEFERRED"); }

Transaction::Transaction(Transaction&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}

Transaction::~Transaction() {
  if (db_ != nullptr) (void)rollback();
}

Status Transaction::commit() {
  if (db_ == nullptr) return Status::FailedPrecondition("commit of a transaction that is not open");
  Database* db = db_;
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
  return db->execute("ROLLBACK");
}

}  // namespace hipq::db
