// The fp8 form of a convolution weight (Fp8ConvWeight, backend.h), made on a
// backend from its 16-bit (or f32) weight [O, C, kh, kw] by backend ops only:
// the weight rearranged to taps before channels in a zeroed [O, kh, kw, Cp]
// buffer of its dtype (copy of a permuted view), then quantize_fp8_rows of
// that buffer seen as [O, kh * kw * Cp]: one scale an output channel, the
// padding zero codes. Every backend makes the same bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "kernels/backend.h"

namespace hipq::kernels {

// `codes` [O, kh, kw, fp8_conv_channels(C)] u8 and `scales` [O] f32, both
// contiguous memory of `be`, written from w [O, C, kh, kw] (f32/f16/bf16,
// contiguous), in the backend's stream order (no wait). InvalidArgument
// naming the operand whose shape is wrong.
Status make_fp8_conv_weight(Backend& be, const Tensor& w, const Fp8ConvWeight& out);

// The shape of the codes of a conv weight of shape w [O, C, kh, kw]:
// [O, kh, kw, fp8_conv_channels(C)].
inline std::vector<int64_t> fp8_conv_codes_shape(const std::vector<int64_t>& w) {
  return {w[0], w[2], w[3], fp8_conv_channels(w[1])};
}

}  // namespace hipq::kernels
