// The parity harness's vocabulary: a ParityCase is one op on one dtype and
// shape with its parameters; it declares its inputs, how to run the op on a
// Backend, and an independent fp64 reference computed from the same rounded
// inputs. parity_runner.h runs a case on a backend and checks the result.
// (The idea of ggml's test-backend-ops.)
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/backend.h"

namespace hipq::kernels::parity {

// One input buffer of a case. Values are drawn deterministically from the
// case name, rounded to `dtype`, and uploaded; the op sees `view(buffer)`.
struct InputSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> alloc_shape;            // shape of the buffer
  std::function<Tensor(const Tensor&)> view;   // logical view; identity when empty
  double lo = -1.0, hi = 1.0;                  // uniform range (integers: [lo, hi))
  std::vector<double> values;                  // explicit values instead (alloc order)
};

// |out - ref| <= atol * max(1, rms(ref)) + rtol * |ref| per element, and
// sum((out - ref)^2) / sum(ref^2) <= nmse over the checked elements.
struct Tolerance {
  double atol = 1e-4;
  double rtol = 1e-4;
  double nmse = 1e-8;
};

Tolerance default_tolerance(DType dtype);

// fp64 value of output element i (row-major over the output shape).
using ElementFn = std::function<double(int64_t)>;

struct ParityCase {
  std::string op;     // the Backend op ("matmul", "conv2d", ...)
  std::string name;   // unique test name: <op>_<dtype>_<what>
  DType dtype = DType::kF32;
  bool heavy = false; // SDXL-size: runs only where a device exists
  std::vector<InputSpec> inputs;
  std::vector<int64_t> out_shape;
  DType out_dtype = DType::kF32;
  // Runs the op; `in` are the input views on the backend, `out` the output.
  std::function<Status(Backend&, const std::vector<Tensor>& in, Tensor& out)> run;
  // Builds the reference from host views of the rounded inputs (f32 data
  // holding exactly the values the backend got, same strides as the views).
  std::function<ElementFn(const std::vector<Tensor>& host_in)> reference;
  Tolerance tol;
  // 0: compare every element; else this many sampled elements (plus the first
  // and last) — all elements are still checked for NaN/Inf and guards.
  int64_t ref_samples = 0;
};

// The whole table; `heavy` selects the SDXL-size cases or the rest.
std::vector<ParityCase> parity_cases(bool heavy);

// gtest prints a case by its name.
inline void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.name; }

// HIPQ_PARITY_FILTER: comma-separated substrings; a case runs when its name
// contains one of them (all cases when unset or empty).
bool case_selected(const std::string& name);

}  // namespace hipq::kernels::parity
