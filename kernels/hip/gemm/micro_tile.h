// The register micro-tile of the SIMT GEMM cores (gemm_tile.h: fp32 words
// and fmaf; gemm_dot2.h: f16 pairs and dot2): a thread's TM x TN
// accumulators, its rows kRowsT apart from row m, its columns kColsT apart
// from column n.
//
// micro_tile_products: the products of one shared-memory k-tile (KS steps of
// one word each, a word being what `mac` takes: an fp32 value or an f16
// pair) into the accumulators.
// store_micro_tile: the accumulators handed to the epilogue.
//
// The loop over the accumulators is expanded by templates, so every index is
// a constant, instead of being left to the loop unroller: with the
// epilogue's call in its body, the AMD compiler (clang 15) declines to
// unroll it ("unrolled size is too large"); the accumulator array is then
// indexed at run time and lives in scratch memory for the whole kernel, so
// every product of the main loop loads and stores its accumulator there
// (seen in the gfx1030 code of both cores: a buffer_load_dword and a
// buffer_store_dword beside each v_fmac_f32 / v_dot2c_f32_f16).
#pragma once

#include <utility>

#include "kernels/hip/hip_common.h"

namespace hipq::kernels::dev {

template <int TM, int TN, int kRowsT, int kColsT, int KS, int LDA, int LDB, class Word, class Mac>
__device__ __forceinline__ void micro_tile_products(const Word (&As)[KS][LDA], const Word (&Bs)[KS][LDB], int tr,
                                                    int tc, float (&acc)[TM][TN], const Mac& mac) {
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    Word a[TM], b[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = As[ks][tr + i * kRowsT];
#pragma unroll
    for (int j = 0; j < TN; ++j) b[j] = Bs[ks][tc + j * kColsT];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = mac(a[i], b[j], acc[i][j]);
  }
}

template <int TM, int TN, int kRowsT, int kColsT, class Epilogue>
__device__ __forceinline__ void store_micro_tile(const float (&acc)[TM][TN], int batch, int m, int n, int M,
                                                 int N, const Epilogue& ep) {
  [&]<int... I>(std::integer_sequence<int, I...>) {
    (
        [&] {
          constexpr int i = I / TN, j = I % TN;
          const int mm = m + i * kRowsT, nn = n + j * kColsT;
          if (mm < M && nn < N) ep(batch, mm, nn, acc[i][j]);
        }(),
        ...);
  }
  (std::make_integer_sequence<int, TM * TN>{});
}

}  // namespace hipq::kernels::dev
