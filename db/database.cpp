#include "db/database.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <utility>

#include "db/schema.h"
#include "db/statement.h"

namespace hipq::db {
namespace {

std::string sqlite_reason(sqlite3* db, int rc) {
  if (db != nullptr) return sqlite3_errmsg(db);
  return sqlite3_errstr(rc);
}

}  // namespace

double wall_clock_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

Database::Database(sqlite3* db, std::string describe) : db_(db), describe_(std::move(describe)) {}

namespace {

// SQLite counts every allocation under a process-wide mutex unless told not
// to (SQLITE_CONFIG_MEMSTATUS); hipq never reads those counts. Settable only
// before SQLite initialises, so once, before the first connection opens; a
// process that initialised SQLite some other way keeps the default.
void disable_sqlite_memory_statistics() {
  static std::once_flag once;
  std::call_once(once, [] { (void)sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); });
}

}  // namespace

Database::~Database() {
  for (auto& [sql, cached] : cache_) sqlite3_finalize(cached->stmt);
  // Statements must be gone already (they borrow the connection); close_v2
  // defers the close rather than failing if one was leaked.
  if (db_ != nullptr) sqlite3_close_v2(db_);
}

Result<std::unique_ptr<Database>> Database::open(const std::filesystem::path& path) {
  return open(path, Options{});
}

Result<std::unique_ptr<Database>> Database::open(const std::filesystem::path& path, Options options) {
  std::error_code ec;
  if (options.must_exist && !std::filesystem::exists(path, ec)) {
    return Status::NotFound("database " + path.string() + " does not exist");
  }
  if (!options.read_only && !options.must_exist) {
    // The job history is private (prompts, paths, worker names): create the
    // file 0600 before SQLite does (its -wal and -shm take the database
    // file's mode), and take group/other bits off one created by an older
    // build. A group may be given read access on purpose (docs/operations.md).
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
      struct stat st {};
      if (::fstat(fd, &st) == 0 && (st.st_mode & (S_IWGRP | S_IRWXO)) != 0) {
        (void)::fchmod(fd, st.st_mode & 0740);
      }
      ::close(fd);
    }
  }
  disable_sqlite_memory_statistics();
  int flags = options.single_thread ? SQLITE_OPEN_NOMUTEX : SQLITE_OPEN_FULLMUTEX;
  flags |= options.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE;
  if (!options.must_exist && !options.read_only) flags |= SQLITE_OPEN_CREATE;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string reason = sqlite_reason(raw, rc);
    sqlite3_close_v2(raw);
    return Status::IOError("cannot open database " + path.string() + ": " + reason);
  }
  sqlite3_extended_result_codes(raw, 1);
  std::unique_ptr<Database> db(new Database(raw, path.string()));
  HIPQ_RETURN_IF_ERROR(db->apply_pragmas(options, /*in_memory=*/false));
  return db;
}

Result<std::unique_ptr<Database>> Database::open_in_memory() {
  disable_sqlite_memory_statistics();
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(":memory:", &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string reason = sqlite_reason(raw, rc);
    sqlite3_close_v2(raw);
    return Status::IOError("cannot open in-memory database: " + reason);
  }
  sqlite3_extended_result_codes(raw, 1);
  std::unique_ptr<Database> db(new Database(raw, ":memory:"));
  HIPQ_RETURN_IF_ERROR(db->apply_pragmas(Options{}, /*in_memory=*/true));
  return db;
}

Result<std::unique_ptr<Database>> Database::open_and_migrate(const std::filesystem::path& path) {
  return open_and_migrate(path, Options{});
}

Result<std::unique_ptr<Database>> Database::open_and_migrate(const std::filesystem::path& path, Options options) {
  HIPQ_ASSIGN_OR_RETURN(auto db, open(path, options));
  HIPQ_RETURN_IF_ERROR(migrate(*db).WithContext("database " + path.string()));
  return db;
}

Status Database::apply_pragmas(const Options& options, bool in_memory) {
  // The busy handler first: switching to WAL itself needs a lock that another
  // connection may be holding.
  sqlite3_busy_timeout(db_, static_cast<int>(options.busy_timeout.count()));
  if (!in_memory && !options.read_only) {
    // Two connections switching a fresh file at once each hold a shared lock
    // and want the exclusive one: SQLite answers one of them SQLITE_BUSY at
    // once, without its busy handler (waiting could deadlock). Its statement
    // has let go of the lock by then, so try again until the busy timeout.
    const auto deadline = std::chrono::steady_clock::now() + options.busy_timeout;
    for (int attempt = 0;; ++attempt) {
      Statement wal(*this, "PRAGMA journal_mode=WAL");
      Result<bool> row = wal.step();
      if (!row.ok()) {
        if (row.status().code() == StatusCode::kUnavailable && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1 + (attempt % 8)));
          continue;
        }
        return row.status();
      }
      if (!*row || wal.column_text(0) != "wal") {
        return Status::IOError("database " + describe_ + ": cannot switch to WAL journal mode (got '" +
                               (*row ? wal.column_text(0) : std::string()) +
                               "'); is it on a filesystem without shared memory support?");
      }
      break;
    }
  }
  // FULL: a committed job state survives power loss, not just a crash.
  if (options.memory_temp_store) HIPQ_RETURN_IF_ERROR(execute("PRAGMA temp_store=MEMORY;"));
  return execute(
      "PRAGMA synchronous=FULL;"
      "PRAGMA foreign_keys=ON;");
}

Status Database::execute(std::string_view sql) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string reason = err != nullptr ? err : sqlite3_errstr(rc);
  sqlite3_free(err);
  // Reuse Statement's mapping so callers see the same codes everywhere.
  std::string head = text.substr(0, 120);
  std::string msg = "database " + describe_ + ": " + reason + " (in: " + head + ")";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Status::Unavailable(msg + "; another process holds the database lock");
    case SQLITE_CONSTRAINT: return Status::FailedPrecondition(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::Corruption(msg);
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN: return Status::IOError(msg);
    case SQLITE_READONLY: return Status::PermissionDenied(msg);
    default: return Status::Internal(msg);
  }
}

Statement Database::prepare(std::string_view sql) { return Statement(*this, sql); }

Statement Database::prepare_cached(std::string_view sql) {
  std::string key(sql);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    Statement fresh(*this, sql);
    if (!fresh.is_valid()) return fresh;  // errors are not cached
    auto cached = std::make_unique<CachedStatement>();
    cached->stmt = std::exchange(fresh.stmt_, nullptr);
    it = cache_.emplace(std::move(key), std::move(cached)).first;
  }
  CachedStatement& c = *it->second;
  if (c.in_use) return Statement(*this, sql);
  c.in_use = true;
  return Statement(*this, c.stmt, std::string(sql), &c.in_use);
}

int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_); }
int64_t Database::changes() const { return sqlite3_changes64(db_); }
bool Database::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

}  // namespace hipq::db
