// The f16 pair layouts of the packed-half kernels (gemm_dot2.h,
// attention_dot2.h): a 32-bit word holds two f16 values, the first in its low
// half (as in memory), and one dot2 multiplies two such words.
//
// interleave_pairs turns two 16-byte pieces of 8 f16 values each, `lo` from
// one row of an operand and `hi` from the next (k and k + 1 of a row-major
// [K, N] operand; keys j and j + 1 of V), into 8 pairs (lo[e], hi[e]), one a
// column: the layout a dot2 along those rows needs.
//
// Plain C++ (HIPQ_HOST_DEVICE): tests/kernels/hip/half_pairs_test.cpp runs
// the function the kernels run.
#pragma once

#include <cstdint>

#include "kernels/hip/host_device.h"

namespace hipq::kernels::dev {

// w[e] = (element e of lo, element e of hi), e = 0 .. 7; lo / hi as four
// words, element 2i in the low half of word i.
HIPQ_HOST_DEVICE inline void interleave_pairs(const uint32_t (&lo)[4], const uint32_t (&hi)[4], uint32_t (&w)[8]) {
  for (int i = 0; i < 4; ++i) {
    w[2 * i] = (lo[i] & 0xffffu) | (hi[i] << 16);
    w[2 * i + 1] = (lo[i] >> 16) | (hi[i] & 0xffff0000u);
  }
}

}  // namespace hipq::kernels::dev
