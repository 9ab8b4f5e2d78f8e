// parity_sums on the cpu: fp64 sums over two same-shape tensors for parity
// metrics (cosine, rel L2, max abs). Elements where a or b is NaN/Inf are
// counted in nonfinite_a / nonfinite_b and left out of every sum; count is
// the number of elements.
#include <cmath>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::cpu {

Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b) {
  constexpr std::string_view op = "parity_sums";
  HIPQ_RETURN_IF_ERROR(check_host(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_host(op, "b", b));
  HIPQ_RETURN_IF_ERROR(check_float(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_float(op, "b", b));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "b", b, a.shape_vec()));
  ParitySums s;
  s.count = a.numel();
  const DType da = a.dtype, db = b.dtype;
  // f64 inputs are read as f64, not through float.
  auto load = [](const void* p, DType t, int64_t off) -> double {
    return t == DType::kF64 ? static_cast<const double*>(p)[off] : static_cast<double>(load_as_f32(p, t, off));
  };
  for_each_offset2(a.ndim, a.shape.data(), a.stride.data(), b.stride.data(),
                   [&](int64_t, int64_t oa, int64_t ob) {
                     const double x = load(a.data, da, oa), y = load(b.data, db, ob);
                     const bool fx = std::isfinite(x), fy = std::isfinite(y);
                     if (!fx) ++s.nonfinite_a;
                     if (!fy) ++s.nonfinite_b;
                     if (!fx || !fy) return;
                     const double d = x - y;
                     s.dot += x * y;
                     s.norm_a2 += x * x;
                     s.norm_b2 += y * y;
                     s.sum_sq_diff += d * d;
                     if (std::fabs(d) > s.max_abs_diff) s.max_abs_diff = std::fabs(d);
                   });
  return s;
}

}  // namespace hipq::kernels::cpu
