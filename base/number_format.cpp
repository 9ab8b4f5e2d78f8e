#include "base/number_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hipq {

std::string format_significant(double v, int digits) {
  if (digits < 1) digits = 1;
  char buf[128];
  const double mag = std::fabs(v);
  if (!std::isfinite(v) || v == 0 || mag < 1e-4 || mag >= 1e15) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    return buf;
  }
  // The exponent after rounding to `digits` (9.9996 at 4 digits is 10.00).
  char probe[64];
  std::snprintf(probe, sizeof probe, "%.*e", digits - 1, v);
  int exponent = 0;
  if (const char* e = std::strchr(probe, 'e')) exponent = std::atoi(e + 1);
  const int decimals = exponent >= digits - 1 ? 0 : digits - 1 - exponent;
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    while (out.back() == '0') out.pop_back();
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

}  // namespace hipq
