// The f16 pair layout of the packed-half kernels (kernels/hip/half_pairs.h)
// on the host: the function gemm_dot2.h and attention_dot2.h run when they
// turn two row pieces into pairs along the rows.
#include "kernels/hip/half_pairs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>

namespace hipq::kernels::dev {
namespace {

// A 16-byte piece of 8 f16 bit patterns as the kernels read it: four words,
// element 2i in the low half of word i (little-endian memory order).
void piece(const uint16_t (&e)[8], uint32_t (&w)[4]) { std::memcpy(w, e, sizeof w); }

TEST(HalfPairsTest, EachColumnGetsItsElementOfBothRowsLowFirst) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    uint16_t a[8], b[8];
    for (int e = 0; e < 8; ++e) {
      a[e] = static_cast<uint16_t>(rng());
      b[e] = static_cast<uint16_t>(rng());
    }
    uint32_t lo[4], hi[4], w[8];
    piece(a, lo);
    piece(b, hi);
    interleave_pairs(lo, hi, w);
    for (int e = 0; e < 8; ++e) {
      // In memory a pair word is (first, second): what dot2 multiplies as (x, y).
      uint16_t pair[2];
      std::memcpy(pair, &w[e], sizeof pair);
      ASSERT_EQ(pair[0], a[e]) << "column " << e << ", trial " << trial;
      ASSERT_EQ(pair[1], b[e]) << "column " << e << ", trial " << trial;
    }
  }
}

TEST(HalfPairsTest, ZeroRowGivesPairsWithZeroSecondHalf) {
  // The fills pass a zero piece for a row past the operand (k + 1 == K, the
  // last key): the pairs keep the first row's values and multiply 0 there.
  const uint16_t a[8] = {0x3c00, 0xbc00, 0x7bff, 0x0001, 0x8000, 0x7c00, 0xfc00, 0x7e00};
  const uint16_t z[8] = {};
  uint32_t lo[4], hi[4], w[8];
  piece(a, lo);
  piece(z, hi);
  interleave_pairs(lo, hi, w);
  for (int e = 0; e < 8; ++e) EXPECT_EQ(w[e], static_cast<uint32_t>(a[e])) << "column " << e;
}

}  // namespace
}  // namespace hipq::kernels::dev
