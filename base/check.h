// Invariant checks that stay on in release builds.
//
// HIPQ_CHECK(cond) is for bugs, never for bad input (bad input gets a Status).
// On failure it reports the expression, function, file and line through one
// [[noreturn]] reporter and aborts.
#pragma once

namespace hipq {
[[noreturn]] void check_failed(const char* expr, const char* func, const char* file, int line);
}  // namespace hipq

#define HIPQ_CHECK(cond) \
  ((cond) ? (void)0 : ::hipq::check_failed(#cond, __func__, __FILE__, __LINE__))
