// layer_norm_fp8 on the cpu: its definition itself, layer_norm into a row
// buffer of x's dtype, then quantize_fp8_rows of it (the hip kernel fuses
// the two and must give these bytes).
#include <cstdint>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"

namespace hipq::kernels::cpu {

Status layer_norm_fp8(const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps, Tensor& codes,
                      Tensor& scales) {
  constexpr std::string_view op = "layer_norm_fp8";
  HIPQ_RETURN_IF_ERROR(check_host(op, "x", x));
  HIPQ_RETURN_IF_ERROR(check_host(op, "codes", codes));
  HIPQ_RETURN_IF_ERROR(check_host(op, "scales", scales));
  HIPQ_RETURN_IF_ERROR(check_layer_norm_fp8(x, codes, scales));
  std::vector<uint8_t> rounded(x.nbytes());
  Tensor y = Tensor::contiguous(rounded.data(), x.dtype, x.shape_vec(), Location::kHost);
  HIPQ_RETURN_IF_ERROR(layer_norm(x, gamma, beta, y, eps));
  return quantize_fp8_rows(y, codes, scales);
}

}  // namespace hipq::kernels::cpu
