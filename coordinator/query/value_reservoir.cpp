#include "coordinator/query/value_reservoir.h"

#include <cmath>

namespace hipq::coordinator::query {

void ValueReservoir::add(double v) {
  if (n_ < cap_) {
    values_.push_back(v);
  } else if (cap_ > 0) {
    const uint64_t j = rng_.below(static_cast<uint64_t>(n_) + 1);
    if (j < cap_) values_[static_cast<size_t>(j)] = v;
  }
  ++n_;
  sum_ += v;
  if (v < min_) min_ = v;
  if (v > max_) max_ = v;
  const double d = v - mean_;
  mean_ += d / static_cast<double>(n_);
  m2_ += d * (v - mean_);
}

double ValueReservoir::sd() const {
  if (n_ < 2) return std::nan("");
  return std::sqrt(m2_ / static_cast<double>(n_ - 1));
}

}  // namespace hipq::coordinator::query
