#include "coordinator/statistics/outliers.h"

#include <algorithm>

#include "coordinator/statistics/descriptive.h"

namespace hipq::coordinator::statistics {

std::string_view outlier_class_name(OutlierClass c) {
  switch (c) {
    case OutlierClass::kNone: return "none";
    case OutlierClass::kLowSevere: return "low severe";
    case OutlierClass::kLowMild: return "low mild";
    case OutlierClass::kHighMild: return "high mild";
    case OutlierClass::kHighSevere: return "high severe";
  }
  return "none";
}

Result<OutlierReport> classify_outliers(std::span<const double> values) {
  HIPQ_RETURN_IF_ERROR(check_sample(values, "outliers"));
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  OutlierReport r;
  Fences& f = r.fences;
  f.q1 = quantile_sorted(sorted, 0.25);
  f.q3 = quantile_sorted(sorted, 0.75);
  f.iqr = f.q3 - f.q1;
  f.low_severe = f.q1 - 3.0 * f.iqr;
  f.low_mild = f.q1 - 1.5 * f.iqr;
  f.high_mild = f.q3 + 1.5 * f.iqr;
  f.high_severe = f.q3 + 3.0 * f.iqr;
  r.flags.reserve(values.size());
  for (double x : values) {
    OutlierClass c = OutlierClass::kNone;
    if (x < f.low_severe) {
      c = OutlierClass::kLowSevere;
      ++r.low_severe;
    } else if (x < f.low_mild) {
      c = OutlierClass::kLowMild;
      ++r.low_mild;
    } else if (x > f.high_severe) {
      c = OutlierClass::kHighSevere;
      ++r.high_severe;
    } else if (x > f.high_mild) {
      c = OutlierClass::kHighMild;
      ++r.high_mild;
    }
    r.flags.push_back(c);
  }
  return r;
}

}  // namespace hipq::coordinator::statistics
