// Status: the outcome of an operation that can fail, leveldb style.
//
// An OK Status holds no allocation; an error holds a code and a message that
// says what was wrong, where (file, line, field, path) and, where possible,
// what to do. Every module boundary in hipq returns Status or Result<T>.
// Thread safety: a Status is a value; distinct objects may be used from
// distinct threads freely.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace hipq {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // the caller's input is wrong (manifest, flag, shape)
  kNotFound = 2,          // a file, key, job or tensor does not exist
  kAlreadyExists = 3,
  kIOError = 4,           // the OS refused a read/write/open
  kCorruption = 5,        // data on disk or wire is malformed
  kFailedPrecondition = 6,// the system is not in a state for this call
  kUnavailable = 7,       // a peer or device is not reachable right now
  kResourceExhausted = 8, // out of memory, queue full
  kDeadlineExceeded = 9,
  kCancelled = 10,
  kPermissionDenied = 11,
  kUnimplemented = 12,    // a combination the code does not support
  kInternal = 13,         // a bug: an invariant did not hold
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(StatusCode code, std::string message);

  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status IOError(std::string m) { return {StatusCode::kIOError, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status FailedPrecondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const noexcept { return rep_ == nullptr; }
  StatusCode code() const noexcept { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message alone; empty for OK.
  const std::string& message() const noexcept;
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // Returns a copy with `context` prepended to the message ("context: message").
  Status WithContext(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
  };
  std::unique_ptr<Rep> rep_;
};

inline bool operator==(const Status& a, const Status& b) {
  return a.code() == b.code() && a.message() == b.message();
}

}  // namespace hipq

// Propagates a non-OK Status from an expression to the caller.
#define HIPQ_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::hipq::Status hipq_status_ = (expr);          \
    if (!hipq_status_.ok()) return hipq_status_;   \
  } while (0)
