// Database: one SQLite connection, opened with hipq's pragmas.
//
// Modelled on Chromium's sql::Database. A Database owns one sqlite3
// connection; Statement (db/statement.h) and Transaction (db/transaction.h)
// borrow it and must not outlive it. All connection settings live in
// apply_pragmas() in database.cpp, nowhere else:
//   journal_mode=WAL (files only), synchronous=FULL, foreign_keys=ON,
//   busy_timeout (Options::busy_timeout).
// open() does NOT migrate the schema; call db::migrate() (db/schema.h) once
// after opening (open_and_migrate() does both).
//
// Thread safety: a Database and its statements belong to one thread at a
// time (SQLite is built serialized, but a Transaction spans several calls, so
// sharing a connection across threads without an outer lock is a bug). Use
// one Database per thread or process; they coordinate through the file's
// locks (writes take BEGIN IMMEDIATE and wait up to busy_timeout).
//
// Errors: open → IOError naming the path and SQLite's reason; execute →
// the Statement error mapping (see db/statement.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/result.h"
#include "base/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace hipq::db {

class Statement;

class Database {
 public:
  struct Options {
    // How long a connection waits for another's write lock before
    // SQLITE_BUSY (reported as Unavailable).
    std::chrono::milliseconds busy_timeout{10000};
    // Open an existing file only (NotFound when it does not exist).
    bool must_exist = false;
    bool read_only = false;
    // PRAGMA temp_store=MEMORY: for the coordinator's connection, whose
    // writes are savepoints inside a group commit (db/transaction.h). Their
    // statement journals then stay in memory instead of a temporary file
    // written on every change; they only serve a rollback inside the open
    // transaction, so durability is unchanged. Off for everything else: it
    // would also keep the spill files of large sorts in memory.
    bool memory_temp_store = false;
    // The connection is opened without SQLite's per-connection mutex
    // (SQLITE_OPEN_NOMUTEX): every call then skips a lock and an unlock.
    // Only for a connection one thread owns for its whole life (the
    // coordinator's poll loop); the default keeps the mutex.
    bool single_thread = false;
  };

  // Opens (creating unless must_exist) the database file at `path`.
  static Result<std::unique_ptr<Database>> open(const std::filesystem::path& path, Options options);
  static Result<std::unique_ptr<Database>> open(const std::filesystem::path& path);
  // A private in-memory database (tests, dry runs). No WAL.
  static Result<std::unique_ptr<Database>> open_in_memory();
  // open() + migrate() to the latest schema (db/schema.h).
  static Result<std::unique_ptr<Database>> open_and_migrate(const std::filesystem::path& path);
  static Result<std::unique_ptr<Database>> open_and_migrate(const std::filesystem::path& path, Options options);

  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs SQL text with no parameters and no result rows (may hold several
  // statements separated by ';'). For schema changes and pragmas.
  Status execute(std::string_view sql);

  // Prepares one statement. Same as Statement(*this, sql); errors surface
  // from the Statement's first use (see Statement::status()).
  Statement prepare(std::string_view sql);
  // Like prepare(), but the compiled statement is kept (keyed by its SQL
  // text) and reused by the next prepare_cached() of the same text once this
  // Statement is gone: for SQL run over and over (Chromium's cached
  // statements). While one is in use, the same text gets a fresh statement.
  Statement prepare_cached(std::string_view sql);

  // The rowid of the last successful INSERT on this connection.
  int64_t last_insert_rowid() const;
  // Rows changed by the last INSERT/UPDATE/DELETE on this connection.
  int64_t changes() const;
  // True between BEGIN and COMMIT/ROLLBACK on this connection.
  bool in_transaction() const;

  // "<path>" or ":memory:"; used in error messages.
  const std::string& describe() const { return describe_; }
  sqlite3* handle() const { return db_; }

 private:
  Database(sqlite3* db, std::string describe);
  Status apply_pragmas(const Options& options, bool in_memory);

  struct CachedStatement {
    sqlite3_stmt* stmt = nullptr;  // owned; finalized in ~Database
    bool in_use = false;
  };

  sqlite3* db_ = nullptr;  // owned; closed in the destructor
  std::string describe_;
  std::unordered_map<std::string, std::unique_ptr<CachedStatement>> cache_;
};

// Wall-clock time as stored in the database: seconds since the Unix epoch.
// Only callers read the clock; db/ functions take `now` as a parameter.
double wall_clock_seconds();

}  // namespace hipq::db
