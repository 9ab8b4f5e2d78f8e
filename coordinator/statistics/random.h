// SplitMix64: the small, fully specified random generator behind hipq's
// bootstrap resampling, so a seeded result is the same on every platform and
// can be reproduced outside hipq (tools/stats/make_expected.py does).
//
// next(): state += 0x9E3779B97F4A7C15; z = state;
//         z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;
//         z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//         return z ^ (z >> 31)            (all arithmetic mod 2^64)
// below(n): floor(next() * n / 2^64), an index in [0, n) (Lemire's
// multiply-shift without rejection; its bias is below n / 2^64).
// std::uniform_int_distribution is not used: its algorithm differs between
// standard libraries.
// Thread safety: one generator per thread.
#pragma once

#include <cstdint>

namespace hipq::coordinator::statistics {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

}  // namespace hipq::coordinator::statistics
