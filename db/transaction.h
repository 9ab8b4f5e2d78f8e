// Transaction: BEGIN … COMMIT on one connection, rolled back unless committed.
//
//   HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_immediate(db));
//   ... statements; return on any error (the destructor rolls back) ...
//   HIPQ_RETURN_IF_ERROR(txn.commit());
//
// Every write in hipq starts with begin_immediate(): it takes the database's
// write lock up front (waiting up to the busy timeout), so two writers never
// deadlock upgrading read locks. begin_deferred() is for multi-statement
// reads that need one consistent snapshot.
// Nested transactions are not supported: beginning one while the connection
// is already in a transaction returns FailedPrecondition.
//
// Ownership: borrows the Database, which must outlive it. Move-only.
// Thread safety: as the Database.
#pragma once

#include "base/result.h"
#include "base/status.h"

namespace hipq::db {

class Database;

class Transaction {
 public:
  static Result<Transaction> begin_immediate(Database& db);
  static Result<Transaction> begin_deferred(Database& db);

  ~Transaction();  // rolls back when still open
  Transaction(Transaction&& other) noexcept;
  Transaction& operator=(Transaction&& other) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // Commits; on failure the transaction is rolled back and the error returned
  // (Unavailable when another connection holds a lock past the timeout).
  Status commit();
  Status rollback();
  bool is_open() const { return db_ != nullptr; }

 private:
  explicit Transaction(Database* db) : db_(db) {}
  static Result<Transaction> begin(Database& db, const char* sql);

  Database* db_ = nullptr;  // null once committed or rolled back
};

}  // namespace hipq::db
