// Statement: one prepared SQL statement with 0-based binds and columns.
//
// Modelled on Chromium's sql::Statement. Use:
//   static constexpr char kSelectJob[] = "SELECT id, state FROM jobs WHERE id = ?";
//   Statement s = db.prepare(kSelectJob);
//   s.bind_int64(0, job_id);
//   HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
//   if (row) state = s.column_text(1);
//
// Binds and columns are 0-based (SQLite's are 1-based for binds). After the
// first error (prepare, bind or step) the statement is inert: further binds do
// nothing, step()/run() return that first error, columns read as null/0.
// Every error message names the SQL text and the database.
//
// Error mapping: SQLITE_BUSY/LOCKED → Unavailable (another connection holds
// the write lock past busy_timeout); SQLITE_CONSTRAINT → AlreadyExists for
// UNIQUE/PRIMARY KEY, FailedPrecondition for others (NOT NULL, CHECK,
// FOREIGN KEY); SQLITE_CORRUPT/NOTADB → Corruption; SQLITE_IOERR/FULL/CANTOPEN
// → IOError; SQLITE_READONLY → PermissionDenied; anything else → Internal.
//
// Ownership: borrows the Database, which must outlive it. Move-only.
// Thread safety: as the Database it came from (one thread at a time).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hipq::db {

class Database;

class Statement {
 public:
  Statement(Database& db, std::string_view sql);
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // OK until the first error; then that error (the statement is inert).
  const Status& status() const { return status_; }
  bool is_valid() const { return status_.ok(); }

  void bind_null(int index);
  void bind_int64(int index, int64_t value);
  void bind_int(int index, int value) { bind_int64(index, value); }
  void bind_bool(int index, bool value) { bind_int64(index, value ? 1 : 0); }
  void bind_double(int index, double value);
  void bind_text(int index, std::string_view value);
  void bind_blob(int index, const void* data, size_t size);
  // Null when empty.
  void bind_optional_text(int index, const std::optional<std::string>& value);
  void bind_optional_double(int index, const std::optional<double>& value);
  void bind_optional_int64(int index, const std::optional<int64_t>& value);

  // Advances to the next row: true when a row is available, false when done.
  Result<bool> step();
  // Steps to completion; FailedPrecondition if the statement returns a row
  // (use step() for queries).
  Status run();
  // Ready to step again with the same SQL: keeps binds unless clear_bindings.
  void reset(bool clear_bindings = true);

  int column_count() const;
  bool column_is_null(int index) const;
  int64_t column_int64(int index) const;
  int column_int(int index) const { return static_cast<int>(column_int64(index)); }
  bool column_bool(int index) const { return column_int64(index) != 0; }
  double column_double(int index) const;
  std::string column_text(int index) const;
  std::vector<uint8_t> column_blob(int index) const;
  std::optional<std::string> column_optional_text(int index) const;
  std::optional<double> column_optional_double(int index) const;
  std::optional<int64_t> column_optional_int64(int index) const;

  const std::string& sql() const { return sql_; }

 private:
  friend class Database;
  // A statement borrowed from Database's cache: reset, not finalized, at the
  // end, and *in_use cleared.
  Statement(Database& db, sqlite3_stmt* cached, std::string sql, bool* in_use);
  void release();

  Status error_from_sqlite(int rc, std::string_view what) const;
  void set_error(Status status);
  bool bind_ok(int index, int rc);

  sqlite3* db_ = nullptr;        // borrowed
  sqlite3_stmt* stmt_ = nullptr; // owned; finalized in the destructor
  std::string sql_;
  std::string db_describe_;
  Status status_;
  bool has_row_ = false;
  bool* cached_in_use_ = nullptr;  // non-null: stmt_ belongs to the Database's cache
};

}  // namespace hipq::db
