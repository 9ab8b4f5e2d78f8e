// e4m3 codes decoded exactly to fp32 on the cpu (kernels/fp8_e4m3.h's
// decoder through a 256-entry table), for the ops that multiply codes with
// the fp32 kernels: matmul_fp8.cpp, conv2d_fp8.cpp.
#pragma once

#include <vector>

#include "kernels/tensor.h"

namespace hipq::kernels::cpu {

// dst[i] = the value of codes' i-th code (contiguous u8), resized to fit.
void decode_e4m3(const Tensor& codes, std::vector<float>& dst);

}  // namespace hipq::kernels::cpu
