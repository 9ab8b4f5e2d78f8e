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
// begin_immediate/begin_deferred refuse to nest (FailedPrecondition when the
// connection is already in a transaction). begin_write() nests: it is BEGIN
// IMMEDIATE on its own, and a SAVEPOINT inside a caller's open transaction, so
// an operation stays atomic (its rollback undoes only its own writes) while
// the caller groups many operations under one durable COMMIT (group commit).
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
  // BEGIN IMMEDIATE, or a SAVEPOINT when a transaction is already open.
  static Result<Transaction> begin_write(Database& db);

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
  // True when this is a savepoint inside an outer transaction: commit()
  // releases it, and the outer COMMIT makes it durable.
  bool is_savepoint() const { return savepoint_; }

 private:
  Transaction(Database* db, bool savepoint) : db_(db), savepoint_(savepoint) {}
  static Result<Transaction> begin(Database& db, const char* sql);

  Database* db_ = nullptr;  // null once committed or rolled back
  bool savepoint_ = false;
};

}  // namespace hipq::db
