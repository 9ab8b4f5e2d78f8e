#include "db/statement.h"

#include <sqlite3.h>

#include <utility>

#include "db/database.h"

namespace hipq::db {

Statement::Statement(Database& db, std::string_view sql)
    : db_(db.handle()), sql_(sql), db_describe_(db.describe()) {
  int rc = sqlite3_prepare_v3(db_, sql_.data(), static_cast<int>(sql_.size()), SQLITE_PREPARE_PERSISTENT,
                              &stmt_, nullptr);
  if (rc != SQLITE_OK) {
    set_error(error_from_sqlite(rc, "prepare"));
  } else if (stmt_ == nullptr) {
    set_error(Status::InvalidArgument("database " + db_describe_ + ": empty SQL statement"));
  }
}

Statement::Statement(Database& db, sqlite3_stmt* cached, std::string sql, bool* in_use)
    : db_(db.handle()), stmt_(cached), sql_(std::move(sql)), db_describe_(db.describe()), cached_in_use_(in_use) {}

void Statement::release() {
  if (stmt_ == nullptr) return;
  if (cached_in_use_ != nullptr) {
    // Back to the cache clean: no open read (which would pin a WAL snapshot)
    // and no binds left for the next user.
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    *cached_in_use_ = false;
  } else {
    sqlite3_finalize(stmt_);
  }
  stmt_ = nullptr;
  cached_in_use_ = nullptr;
}

Statement::~Statement() { release(); }

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_),
      stmt_(std::exchange(other.stmt_, nullptr)),
      sql_(std::move(other.sql_)),
      db_describe_(std::move(other.db_describe_)),
      status_(std::move(other.status_)),
      has_row_(std::exchange(other.has_row_, false)),
      cached_in_use_(std::exchange(other.cached_in_use_, nullptr)) {}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    release();
    db_ = other.db_;
    stmt_ = std::exchange(other.stmt_, nullptr);
    sql_ = std::move(other.sql_);
    db_describe_ = std::move(other.db_describe_);
    status_ = std::move(other.status_);
    has_row_ = std::exchange(other.has_row_, false);
    cached_in_use_ = std::exchange(other.cached_in_use_, nullptr);
  }
  return *this;
}

Status Statement::error_from_sqlite(int rc, std::string_view what) const {
  std::string reason = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string msg =
      "database " + db_describe_ + ": " + std::string(what) + " failed: " + reason + " (SQL: " + sql_ + ")";
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(msg + "; another connection held the lock past the busy timeout");
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) return Status::AlreadyExists(msg);
      return Status::FailedPrecondition(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::Corruption(msg);
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN: return Status::IOError(msg);
    case SQLITE_READONLY: return Status::PermissionDenied(msg);
    case SQLITE_RANGE:
    case SQLITE_MISMATCH:
    case SQLITE_TOOBIG: return Status::InvalidArgument(msg);
    default: return Status::Internal(msg);
  }
}

void Statement::set_error(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

bool Statement::bind_ok(int index, int rc) {
  if (rc == SQLITE_OK) return true;
  set_error(error_from_sqlite(rc, "bind of parameter " + std::to_string(index)));
  return false;
}

void Statement::bind_null(int index) {
  if (!is_valid()) return;
  bind_ok(index, sqlite3_bind_null(stmt_, index + 1));
}

void Statement::bind_int64(int index, int64_t value) {
  if (!is_valid()) return;
  bind_ok(index, sqlite3_bind_int64(stmt_, index + 1, value));
}

void Statement::bind_double(int index, double value) {
  if (!is_valid()) return;
  bind_ok(index, sqlite3_bind_double(stmt_, index + 1, value));
}

void Statement::bind_text(int index, std::string_view value) {
  if (!is_valid()) return;
  bind_ok(index, sqlite3_bind_text64(stmt_, index + 1, value.data(), value.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
}

void Statement::bind_blob(int index, const void* data, size_t size) {
  if (!is_valid()) return;
  bind_ok(index, sqlite3_bind_blob64(stmt_, index + 1, data, size, SQLITE_TRANSIENT));
}

void Statement::bind_optional_text(int index, const std::optional<std::string>& value) {
  if (value) bind_text(index, *value); else bind_null(index);
}
void Statement::bind_optional_double(int index, const std::optional<double>& value) {
  if (value) bind_double(index, *value); else bind_null(index);
}
void Statement::bind_optional_int64(int index, const std::optional<int64_t>& value) {
  if (value) bind_int64(index, *value); else bind_null(index);
}

Result<bool> Statement::step() {
  if (!is_valid()) return status_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    has_row_ = true;
    return true;
  }
  has_row_ = false;
  if (rc == SQLITE_DONE) return false;
  set_error(error_from_sqlite(rc, "step"));
  return status_;
}

Status Statement::run() {
  HIPQ_ASSIGN_OR_RETURN(bool row, step());
  if (row) {
    set_error(Status::FailedPrecondition("database " + db_describe_ +
                                         ": run() of a statement that returns rows; use step() (SQL: " + sql_ + ")"));
    return status_;
  }
  return Status::Ok();
}

void Statement::reset(bool clear_bindings) {
  if (stmt_ == nullptr) return;
  sqlite3_reset(stmt_);
  if (clear_bindings) sqlite3_clear_bindings(stmt_);
  has_row_ = false;
}

int Statement::column_count() const { return stmt_ != nullptr ? sqlite3_column_count(stmt_) : 0; }

bool Statement::column_is_null(int index) const {
  if (!has_row_) return true;
  return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
}

int64_t Statement::column_int64(int index) const {
  return has_row_ ? sqlite3_column_int64(stmt_, index) : 0;
}

double Statement::column_double(int index) const {
  return has_row_ ? sqlite3_column_double(stmt_, index) : 0.0;
}

std::string Statement::column_text(int index) const {
  if (!has_row_) return {};
  const unsigned char* p = sqlite3_column_text(stmt_, index);
  if (p == nullptr) return {};
  int n = sqlite3_column_bytes(stmt_, index);
  return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
}

std::vector<uint8_t> Statement::column_blob(int index) const {
  if (!has_row_) return {};
  const void* p = sqlite3_column_blob(stmt_, index);
  int n = sqlite3_column_bytes(stmt_, index);
  if (p == nullptr || n <= 0) return {};
  const auto* b = static_cast<const uint8_t*>(p);
  return std::vector<uint8_t>(b, b + n);
}

std::optional<std::string> Statement::column_optional_text(int index) const {
  if (column_is_null(index)) return std::nullopt;
  return column_text(index);
}
std::optional<double> Statement::column_optional_double(int index) const {
  if (column_is_null(index)) return std::nullopt;
  return column_double(index);
}
std::optional<int64_t> Statement::column_optional_int64(int index) const {
  if (column_is_null(index)) return std::nullopt;
  return column_int64(index);
}

}  // namespace hipq::db
