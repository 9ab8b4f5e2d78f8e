// String helpers shared by tests.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>

namespace hipq::testing {

// "<prefix><n>", built through a stream: GCC 12's -Wrestrict misfires on
// `"w" + std::to_string(n)` once inlined (GCC bug 105329), which -Werror
// turns into a build failure.
inline std::string numbered(std::string_view prefix, int64_t n) {
  std::ostringstream out;
  out << prefix << n;
  return out.str();
}

}  // namespace hipq::testing
