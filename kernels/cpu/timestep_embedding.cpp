// timestep_embedding on the cpu, as diffusers' get_timestep_embedding with
// scale 1: freq_i = exp(-ln(max_period) * i / (half - shift)), i < half = dim/2;
// emb = [sin(t freq), cos(t freq)] (halves swapped when flip_sin_to_cos), zero
// padded to an odd dim. Frequencies and arguments are rounded to fp32 where
// diffusers computes them in fp32, so large timesteps land on the same angle.
#include <cmath>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::cpu {

Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) {
  constexpr std::string_view op = "timestep_embedding";
  HIPQ_RETURN_IF_ERROR(check_host(op, "t", t));
  HIPQ_RETURN_IF_ERROR(check_host(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_float(op, "y", y));
  HIPQ_RETURN_IF_ERROR(check_ndim(op, "t", t, 1, 1));
  HIPQ_RETURN_IF_ERROR(check_contiguous(op, "y", y));
  if (t.dtype == DType::kU8) return invalid(op, "operand 't' " + t.describe() + " must be float or integer (i32/i64)");
  if (o.dim < 2) return invalid(op, "dim must be >= 2 (got " + std::to_string(o.dim) + ")");
  const int64_t N = t.shape[0], dim = o.dim, half = dim / 2;
  if (static_cast<float>(half) - o.downscale_freq_shift == 0.0f)
    return invalid(op, "dim/2 - downscale_freq_shift is 0");
  HIPQ_RETURN_IF_ERROR(check_shape(op, "y", y, {N, dim}));
  if (N == 0) return Status::Ok();
  std::vector<float> ts(static_cast<size_t>(N));
  gather_f32(t, ts.data());
  std::vector<float> freq(static_cast<size_t>(half));
  const float neg_log = static_cast<float>(-std::log(static_cast<double>(o.max_period)));
  const float denom = static_cast<float>(half) - o.downscale_freq_shift;
  for (int64_t i = 0; i < half; ++i) {
    const float e = neg_log * static_cast<float>(i) / denom;
    freq[static_cast<size_t>(i)] = static_cast<float>(std::exp(static_cast<double>(e)));
  }
  std::vector<float> out(static_cast<size_t>(N * dim), 0.0f);
  for (int64_t n = 0; n < N; ++n) {
    float* row = out.data() + n * dim;
    for (int64_t i = 0; i < half; ++i) {
      const double arg = static_cast<double>(ts[static_cast<size_t>(n)] * freq[static_cast<size_t>(i)]);
      const auto s = static_cast<float>(std::sin(arg));
      const auto c = static_cast<float>(std::cos(arg));
      if (o.flip_sin_to_cos) {
        row[i] = c;
        row[half + i] = s;
      } else {
        row[i] = s;
        row[half + i] = c;
      }
    }
  }
  scatter_f32(out.data(), y);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
