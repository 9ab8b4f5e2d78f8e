// Runs a ParityCase on one Backend and checks it: inputs generated and
// uploaded, output surrounded by guard regions (sentinel bytes that must stay
// untouched) and pre-filled with NaN so unwritten elements show, inputs
// checked unchanged afterwards, every output element checked for NaN/Inf,
// then compared with the case's fp64 reference under its Tolerance.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "parity/parity_case.h"

namespace hipq::kernels::parity {

struct ParityReport {
  bool ok = false;
  std::string backend;
  int64_t checked = 0;      // elements compared with the reference
  double max_abs_err = 0;
  double max_err_ratio = 0; // worst |out - ref| / bound (<= 1 passes)
  double nmse = 0;
  std::string failure;      // what went wrong, empty when ok
  std::string summary() const;
};

// Guard bytes on each side of every output (a multiple of 256 keeps alignment).
inline constexpr size_t kGuardBytes = 256;
inline constexpr uint8_t kGuardByte = 0xA5;

ParityReport run_case(Backend& backend, const ParityCase& c);

// Per-process tally of reports, printed as a table (backend x dtype: cases
// passed / failed, worst error ratio) by a gtest environment at exit.
void record_report(const ParityCase& c, const ParityReport& r);
std::string summary_table();

// Deterministic input values of a case (alloc order, rounded to the dtype).
std::vector<float> make_input_values(const ParityCase& c, size_t input_index);

}  // namespace hipq::kernels::parity
