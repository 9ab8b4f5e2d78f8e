// Result<T>: a value or the Status that explains why there is none.
//
// Like absl::StatusOr. Accessing the value of an error Result is a bug and
// aborts through HIPQ_CHECK (which stays on in release builds).
#pragma once

#include <optional>
#include <utility>

#include "base/check.h"
#include "base/status.h"

namespace hipq {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    HIPQ_CHECK(!status_.ok() && "Result constructed from an OK Status without a value");
  }

  bool ok() const noexcept { return value_.has_value(); }
  const Status& status() const noexcept { return status_; }

  T& value() & { HIPQ_CHECK(ok() && "value() of an error Result"); return *value_; }
  const T& value() const& { HIPQ_CHECK(ok() && "value() of an error Result"); return *value_; }
  T&& value() && { HIPQ_CHECK(ok() && "value() of an error Result"); return std::move(*value_); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace hipq

#define HIPQ_CONCAT_INNER_(a, b) a##b
#define HIPQ_CONCAT_(a, b) HIPQ_CONCAT_INNER_(a, b)

// HIPQ_ASSIGN_OR_RETURN(auto x, expr): evaluates expr (a Result), returns its
// Status from the enclosing function on error, else binds the value to x.
#define HIPQ_ASSIGN_OR_RETURN(lhs, expr)                              \
  auto HIPQ_CONCAT_(hipq_result_, __LINE__) = (expr);                 \
  if (!HIPQ_CONCAT_(hipq_result_, __LINE__).ok())                     \
    return HIPQ_CONCAT_(hipq_result_, __LINE__).status();             \
  lhs = std::move(HIPQ_CONCAT_(hipq_result_, __LINE__)).value()
