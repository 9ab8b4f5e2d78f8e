#include "kernels/fp8_conv_weight.h"

#include <string>

namespace hipq::kernels {

Status make_fp8_conv_weight(Backend& be, const Tensor& w, const Fp8ConvWeight& out) {
  if (w.ndim != 4 || !w.is_contiguous() ||
      !(w.dtype == DType::kF32 || w.dtype == DType::kF16 || w.dtype == DType::kBF16))
    return Status::InvalidArgument("make_fp8_conv_weight: w " + w.describe() +
                                   " must be [O, C, kh, kw] f32/f16/bf16, contiguous");
  const int64_t O = w.shape[0], C = w.shape[1], KH = w.shape[2], KW = w.shape[3], Cp = fp8_conv_channels(C);
  if (out.codes.dtype != DType::kU8 || out.codes.ndim != 4 || !out.codes.is_contiguous() ||
      out.codes.shape[0] != O || out.codes.shape[1] != KH || out.codes.shape[2] != KW ||
      out.codes.shape[3] != Cp)
    return Status::InvalidArgument("make_fp8_conv_weight: codes " + out.codes.describe() + " must be [" +
                                   std::to_string(O) + ", " + std::to_string(KH) + ", " + std::to_string(KW) +
                                   ", " + std::to_string(Cp) + "] u8, contiguous, for w " + w.describe());
  if (O == 0) return Status::Ok();
  HIPQ_ASSIGN_OR_RETURN(Buffer padded,
                        be.allocate(static_cast<size_t>(O * KH * KW * Cp) * dtype_size(w.dtype)));
  Tensor taps_last = padded.tensor(w.dtype, {O, KH, KW, Cp});
  if (Cp != C) HIPQ_RETURN_IF_ERROR(be.fill(taps_last, 0.0f));
  Tensor dst = taps_last.slice(3, 0, C);
  HIPQ_RETURN_IF_ERROR(be.copy(w.permute({0, 2, 3, 1}), dst));
  Tensor codes = out.codes.reshape({O, KH * KW * Cp});
  Tensor scales = out.scales;
  // The padded copy goes back to the pool at return, in the stream's order
  // (after the quantization has read it).
  return be.quantize_fp8_rows(taps_last.reshape({O, KH * KW * Cp}), codes, scales);
}

}  // namespace hipq::kernels
