#include "base/check.h"

#include <cstdio>
#include <cstdlib>

namespace hipq {
void check_failed(const char* expr, const char* func, const char* file, int line) {
  std::fprintf(stderr, "hipq: internal check failed: %s in %s at %s:%d\n", expr, func, file, line);
  std::fflush(stderr);
  std::abort();
}
}  // namespace hipq
