// Helpers for the cpu backend's known-answer tests: host tensors that own
// their memory, built from literal values, and a backend per test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/check.h"
#include "kernels/backend.h"

namespace hipq::kernels::testing {

// A host tensor owning its bytes; `t` views them (contiguous).
struct Owned {
  std::vector<uint8_t> bytes;
  Tensor t;
  std::vector<float> values() const {
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = load_as_f32(t.data, t.dtype, i);
    return v;
  }
};

inline Owned make(const std::vector<int64_t>& shape, const std::vector<float>& values,
                  DType dt = DType::kF32) {
  Owned o;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  o.bytes.assign(static_cast<size_t>(n) * dtype_size(dt), 0);
  o.t = Tensor::contiguous(o.bytes.data(), dt, shape);
  for (int64_t i = 0; i < n && !values.empty(); ++i)
    store_from_f32(o.bytes.data(), dt, i, values[static_cast<size_t>(i) % values.size()]);
  return o;
}

inline Owned zeros(const std::vector<int64_t>& shape, DType dt = DType::kF32) { return make(shape, {}, dt); }

inline std::unique_ptr<Backend> cpu() {
  auto b = make_backend("cpu");
  HIPQ_CHECK(b.ok());
  return std::move(*b);
}

#define EXPECT_VALUES_NEAR(actual, expected, tol)                                   \
  do {                                                                              \
    const std::vector<float> a_ = (actual);                                         \
    const std::vector<float> e_ = (expected);                                       \
    ASSERT_EQ(a_.size(), e_.size());                                                \
    for (size_t i_ = 0; i_ < a_.size(); ++i_) EXPECT_NEAR(a_[i_], e_[i_], tol) << "at " << i_; \
  } while (0)

}  // namespace hipq::kernels::testing
