// How hipq prints a measured number in tables and reports: `digits`
// significant digits like printf's %g, but never in exponent notation for
// magnitudes from 1e-4 up to 1e15 — 14210.3 at 4 digits is "14210", not
// "1.421e+04" (a timing in ms reads as a plain number); trailing zeros are
// dropped as %g drops them ("2.5", "3"). Outside that range, and for NaN and
// infinities, it is %g's output.
// Thread safety: pure function.
#pragma once

#include <string>

namespace hipq {

std::string format_significant(double value, int digits);

}  // namespace hipq
