// quantize_fp8_rows on the cpu: per row, the largest magnitude, the row's
// multiplier and the e4m3 codes, all through kernels/fp8_e4m3.h (the
// functions the hip kernel runs), so both backends write the same bytes.
#include <cmath>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/fp8_e4m3.h"

namespace hipq::kernels::cpu {

Status quantize_fp8_rows(const Tensor& x, Tensor& codes, Tensor& scales) {
  constexpr std::string_view op = "quantize_fp8_rows";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_host(op, "codes", codes));
  HIPQ_RETURN_IF_ERROR(check_host(op, "scales", scales));
  HIPQ_RETURN_IF_ERROR(check_quantize_fp8_rows(x, codes, scales));
  const int64_t R = x.shape[0], K = x.shape[1];
  if (R == 0) return Status::Ok();
  uint8_t* q = static_cast<uint8_t*>(codes.data);
  float* sc = static_cast<float*>(scales.data);
  ThreadPool::global().parallel_for(R, std::max<int64_t>(1, 65536 / std::max<int64_t>(K, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t base = r * x.stride[0];
      float amax = 0.0f;
      bool nan = false;
      for (int64_t k = 0; k < K; ++k) {
        const float v = load_as_f32(x.data, x.dtype, base + k);
        row[static_cast<size_t>(k)] = v;
        nan = nan || std::isnan(v);
        amax = std::fmax(amax, std::fabs(v));
      }
      const float s = fp8::row_scale(nan ? NAN : amax);
      uint8_t* qr = q + r * K;
      for (int64_t k = 0; k < K; ++k) qr[k] = fp8::quantize(row[static_cast<size_t>(k)], s);
      sc[r] = fp8::dequant_scale(s);
    }
  });
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
