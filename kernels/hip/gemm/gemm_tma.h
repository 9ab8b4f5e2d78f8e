// Hopper (sm_90a) f16/bf16 GEMM for plain K-major operands (RowsFill:
// activations [M, K], weights [N, K], optional batch stride), warp-
// specialised: the bulk tensor copy engine (TMA) brings the operand tiles
// into a ring of shared-memory stages, and warpgroup matrix instructions
// consume them, the two sides synchronised by mbarriers only.
//
// Block tile 128 x BN x 64 (BN = 256, 192, 160 or 128), 384 threads = 3 warpgroups:
//  - warpgroup 0, the producer: gives its registers back (setmaxnreg.dec 40);
//    one thread waits for a free stage, announces its byte count on the
//    stage's "full" mbarrier and issues two 3-D tensor copies (A: 64 x 128,
//    B: 64 x BN elements of (k, row, batch)). The copy engine writes the
//    128-byte-swizzled K-major layout the wgmma descriptors read
//    (gemm_wgmma.h: swizzle128 / wgmma_desc) and zero-fills rows and k past
//    the operand, so edges need no code.
//  - warpgroups 1 and 2, the consumers (setmaxnreg.inc 232): 64 rows of C
//    each, BN / 2 fp32 accumulators a thread; per k-tile they wait on the
//    stage's full barrier, issue 4 wgmma (k16 each) as one group, keep it in
//    flight (wgmma.wait_group 1) and release the previous k-tile's stage on
//    its "empty" mbarrier once that group has completed.
// The producer runs up to kStages k-tiles ahead, so the copies never sit in
// the consumers' instruction stream (the reason a 128 x 256 tile with
// all-threads cp.async was slower: kernels/dev/README.md).
// Persistent grid (min(tiles, SMs) blocks, tiles strided over them, n
// fastest): the producer loads the next tile's k-tiles while the consumers
// run the epilogue, which stages each warpgroup's 64 x 128 fp32 pieces in a
// buffer of its own (outside the stage ring) and hands 8 consecutive columns
// to Epilogue::row8, as in gemm_wgmma.h, or, for a RegisterEpilogue16
// (tma_store_tile16), finishes the sums in registers and stages 16-bit
// results. 3 stages of 48 KB + 68 KB of
// staging for the 128 x 256 tile, 4 of 36 KB + 44 KB (80-column rounds) for
// 128 x 160, 4 of 40 KB + 52 KB (96-column rounds) for 128 x 192, 4 of 32 KB
// + 68 KB for 128 x 128.
//
// Host side: tensor maps are encoded per call with the driver's
// cuTensorMapEncodeTiled, fetched through cudaGetDriverEntryPointByVersion
// (no link against libcuda) and passed as __grid_constant__ kernel
// parameters (so graph capture keeps them by value). prepare_gemm_tma says
// whether a problem can take this path; when it cannot (no entry point, an
// operand TMA cannot describe, HIPQ_GEMM_TMA=0) the caller uses
// gemm_wgmma.h. The tile width comes from gemm_tma_tile_n (gemm_route.h,
// host code shared with the route choice) or HIPQ_GEMM_TMA=128 / 160 / 192 /
// 256 (RouteSwitches).
#pragma once

#include "kernels/hip/gemm/gemm_wgmma.h"
#include "kernels/hip/gemm/mat_epilogue16.h"
#include "kernels/hip/gemm_route.h"

#if HIPQ_VENDOR_NVIDIA
#include <cuda.h>  // CUtensorMap and the driver's enums (types only)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace hipq::kernels::dev {

template <int BN_>
struct TmaShape {
  static_assert(BN_ == 128 || BN_ == 160 || BN_ == 192 || BN_ == 256, "wgmma n of one instruction");
  static constexpr int BM = 128, BN = BN_, BK = 64;
  static constexpr int kStages = BN == 256 ? 3 : 4;
  static constexpr int kConsumers = 2;                     // warpgroups, 64 rows of C each
  static constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup
  static constexpr int kAccum = BN / 2;                    // fp32 accumulators a consumer thread
  static constexpr int kATileBytes = BM * BK * 2;          // 128 rows x 128 bytes
  static constexpr int kBTileBytes = BN * BK * 2;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  // Epilogue staging, outside the stage ring (the producer is already filling
  // it for the next tile): per consumer warpgroup 64 rows x kEpiCols fp32
  // columns, BN / kEpiCols rounds a tile.
  static constexpr int kEpiCols = BN == 160 ? 80 : BN == 192 ? 96 : 128, kLdc = kEpiCols + 8;
  static_assert(BN % kEpiCols == 0 && kEpiCols % 8 == 0, "whole rounds of 8-column groups");
  static constexpr int kEpiBytes = kConsumers * 64 * kLdc * 4;
  static constexpr int kSmemBytes = kStages * kStageBytes + kEpiBytes + 1024;  // + alignment slack (1 KB swizzle atoms)
  static_assert(kSmemBytes + 256 <= 227 * 1024, "fits the opt-in shared memory of an SM");
  static_assert(kATileBytes % 1024 == 0 && kBTileBytes % 1024 == 0, "stages keep the 1 KB swizzle alignment");
};

// ---- mbarriers, tensor copies, register reallocation (PTX ISA 8.0, sm_90) ----

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
#if HIPQ_WGMMA_DEVICE
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}
// Makes the initialised barriers visible to the copy engine (async proxy).
__device__ __forceinline__ void mbar_init_fence() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if HIPQ_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}
// One arrival plus `bytes` of copies the phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if HIPQ_WGMMA_DEVICE
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#endif
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred done;\n"
      "HIPQ_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra HIPQ_MBAR_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
#if HIPQ_WGMMA_DEVICE
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}
// Box of `map` at (c0, c1, c2) -> shared memory at dst; completes `bytes` on bar.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
#endif
}
// The 4-D form: box at (c0, c1, c2, c3), coordinates past an edge (also
// negative ones) zero-filled.
__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
#endif
}

// What the producer copies into a stage's B tile for k-tile kt of the tile
// whose columns start at n0, image / batch entry `batch`.
// TmaRowsLoad: BN rows of a RowsFill operand through its (k, row, batch)
// map (b_batch 0: broadcast over the batch).
// bk: the k-tile's width in elements (64 of 16-bit, 32 of fp32: 128 bytes).
struct TmaRowsLoad {
  int b_batch = 0;
  int bk = 64;
  __device__ __forceinline__ void load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int kt, int n0,
                                       int batch) const {
    tma_load_3d(dst, map, bar, kt * bk, n0, batch * b_batch);
  }
};
// TmaConvLoad: the implicit im2col of a stride-1 convolution over an NHWC
// input whose (c, x, y, image) map has boxes of 64 x bw x bh x 1: column n
// of the GEMM is output pixel n of image `batch` (n = y * Wo + x), k =
// (ky, kx, c) with C a multiple of bk (64 16-bit or 32 fp32 channels), so
// k-tile kt is bk channels of one tap. A tile's BN pixels are bh whole output rows (bw = Wo) or one piece of
// a row (bh = 1), so the box at (c0, x0 + kx - pad, y0 + ky - pad, image)
// holds them in GEMM row order; the copy engine zero-fills the padding.
struct TmaConvLoad {
  int cblocks = 1;  // C / bk
  int bk = 64;
  int KW = 1, pad = 0, Wo = 1;
  // Rows of zeros above the mapped input: `pad` for a whole image; for a band
  // of output rows over a band of input rows (conv2d.hip), `pad` less the
  // input rows the band holds above its first output row.
  int pad_y = 0;
  __device__ __forceinline__ void load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int kt, int n0,
                                       int batch) const {
    const int tap = kt / cblocks, c0 = (kt - tap * cblocks) * bk;
    const int ky = tap / KW, kx = tap - ky * KW;
    const int y0 = n0 / Wo, x0 = n0 - y0 * Wo;
    tma_load_4d(dst, map, bar, c0, x0 + kx - pad, y0 + ky - pad_y, batch);
  }
};

template <int R>
__device__ __forceinline__ void setmaxnreg_dec() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}
template <int R>
__device__ __forceinline__ void setmaxnreg_inc() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}
// Named barrier `id` (1..15) among `threads` threads (whole warps).
__device__ __forceinline__ void named_sync(int id, int threads) {
#if HIPQ_WGMMA_DEVICE
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
}

template <typename TC>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t da, uint64_t db);

template <>
__device__ __forceinline__ void wgmma_m64n256k16<__half>(float (&d)[128], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "n"(1));
#endif
}
template <>
__device__ __forceinline__ void wgmma_m64n256k16<__nv_bfloat16>(float (&d)[128], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(da), "l"(db), "n"(1));
#endif
}

// m64n160k16: the 128 x 160 tile (N a multiple of 160: SDXL's 640 and 1280
// fill a wave of 132 SMs with it, gemm_tma_tile_n).
template <typename TC>
__device__ __forceinline__ void wgmma_m64n160k16(float (&d)[80], uint64_t da, uint64_t db);

template <>
__device__ __forceinline__ void wgmma_m64n160k16<__half>(float (&d)[80], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
      "}, %80, %81, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "l"(da), "l"(db), "n"(1));
#endif
}
template <>
__device__ __forceinline__ void wgmma_m64n160k16<__nv_bfloat16>(float (&d)[80], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
      "}, %80, %81, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "l"(da), "l"(db), "n"(1));
#endif
}

// m64n192k16: the 128 x 192 tile (a conv over 32-wide images: 6 output rows
// a tile, gemm_tma_tile_n).
template <typename TC>
__device__ __forceinline__ void wgmma_m64n192k16(float (&d)[96], uint64_t da, uint64_t db);

template <>
__device__ __forceinline__ void wgmma_m64n192k16<__half>(float (&d)[96], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
      "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(da), "l"(db), "n"(1));
#endif
}
template <>
__device__ __forceinline__ void wgmma_m64n192k16<__nv_bfloat16>(float (&d)[96], uint64_t da, uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
      "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
      : "l"(da), "l"(db), "n"(1));
#endif
}

template <typename TC, int BN>
__device__ __forceinline__ void wgmma_row_block(float (&d)[BN / 2], uint64_t da, uint64_t db) {
  if constexpr (BN == 256)
    wgmma_m64n256k16<TC>(d, da, db);
  else if constexpr (BN == 192)
    wgmma_m64n192k16<TC>(d, da, db);
  else if constexpr (BN == 160)
    wgmma_m64n160k16<TC>(d, da, db);
  else
    wgmma_m64n128k16<TC>(d, da, db, 1);
}

// A consumer warpgroup's 64 x BN fp32 accumulators (rows m0 .. m0 + 63 of C,
// columns n0 ..) to the epilogue: staged kEpiCols columns at a time in the
// warpgroup's buffer cs (64 x kLdc floats, outside the stage ring), then
// ep.row8 on 8 consecutive columns a thread (the accumulator layout:
// wgmma_staging.h wgmma_acc_row / wgmma_acc_col). epi_bar: the warpgroup's
// named barrier.
template <int BN, int kEpiCols, int kLdc, class Epilogue>
__device__ __forceinline__ void tma_store_tile(const float (&d)[BN / 2], float* cs, int epi_bar, int ct, int m0,
                                               int n0, int M, int N, int batch, const Epilogue& ep) {
  const int r = wgmma_acc_row(ct);
#pragma unroll
  for (int h = 0; h < BN / kEpiCols; ++h) {
    named_sync(epi_bar, 128);  // the buffer's previous readers are done
#pragma unroll
    for (int j = 0; j < kEpiCols / 8; ++j) {
      const int jj = h * (kEpiCols / 8) + j;
      const int c = wgmma_acc_col(ct, j);
      *reinterpret_cast<float2*>(cs + r * kLdc + c) = make_float2(d[4 * jj], d[4 * jj + 1]);
      *reinterpret_cast<float2*>(cs + (r + 8) * kLdc + c) = make_float2(d[4 * jj + 2], d[4 * jj + 3]);
    }
    named_sync(epi_bar, 128);
#pragma unroll 1
    for (int g = ct; g < 64 * (kEpiCols / 8); g += 128) {
      const int rr = g / (kEpiCols / 8), cc = (g % (kEpiCols / 8)) * 8;
      const int m = m0 + rr, n = n0 + h * kEpiCols + cc;
      if (m < M && n < N) ep.row8(batch, m, n, N, cs + rr * kLdc + cc);
    }
  }
}

// tma_store_tile for a RegisterEpilogue16 (out, bias and residual one 16-bit type):
// the epilogue's arithmetic on the accumulators in registers (alpha, bias,
// residual or GEGLU, in row8's order, so the same bits), each result rounded
// to 16 bits and staged in the warpgroup's buffer (64 rows x BN + 8 16-bit
// values: the fp32 buffer's bytes hold them), then written 16 bytes a thread.
// Against tma_store_tile with row8: half the staged bytes, one round instead
// of BN / kEpiCols, each thread's bias columns loaded once a tile.
template <int BN, int kGroup, int kDt>
__device__ __forceinline__ void tma_store_tile16(const float (&d)[BN / 2], uint16_t* cs, int epi_bar, int ct, int m0,
                                                 int n0, int M, int N, int batch, const MatEpilogue16<kDt>& ep) {
  constexpr int kLd = BN + 8;  // 16-bit values a staged row (bank offset 4 words a row)
  const int r = wgmma_acc_row(ct);
  const int64_t ra = static_cast<int64_t>(batch) * ep.rb + static_cast<int64_t>(m0 + r) * ep.rm;
  const int64_t rb8 = ra + 8 * ep.rm;
  const bool in_a = m0 + r < M, in_b = m0 + r + 8 < M;
  // The loads of kG column pairs are issued together before their results
  // are staged (a load after a shared store would wait for it).
  constexpr int kJ = BN / 8, kG = kGroup > 0 ? kGroup : kJ % 8 == 0 ? 8 : 10;
  static_assert(kJ % kG == 0, "whole groups of column pairs");
  // Columns n, n + 1 of `p` (n even) as one word; the second 0 past N.
  const auto pair_at = [N](const uint16_t* p, int64_t at, int n) -> uint32_t {
    if (n + 1 < N) return *reinterpret_cast<const uint32_t*>(p + at + n);
    return n < N ? p[at + n] : 0u;
  };
  const auto lo = [](uint32_t w) { return dev::from_16bit(kDt, static_cast<uint16_t>(w)); };
  const auto hi = [](uint32_t w) { return dev::from_16bit(kDt, static_cast<uint16_t>(w >> 16)); };
  named_sync(epi_bar, 128);  // the buffer's previous readers are done
  if (ep.geglu) {
    // Columns n, n + 1 of a thread's pair are (value, gate): output n / 2.
#pragma unroll
    for (int j0 = 0; j0 < kJ; j0 += kG) {
      uint32_t bw[kG];
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int n = n0 + wgmma_acc_col(ct, j0 + g);  // N is even: a pair is in whole or not at all
        bw[g] = ep.bias && n + 1 < N ? *reinterpret_cast<const uint32_t*>(ep.bias + n) : 0u;
      }
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int j = j0 + g;
        float v0 = ep.alpha * d[4 * j], g0 = ep.alpha * d[4 * j + 1];
        float v1 = ep.alpha * d[4 * j + 2], g1 = ep.alpha * d[4 * j + 3];
        if (ep.bias) {
          const float bv = lo(bw[g]), bg = hi(bw[g]);
          v0 += bv, g0 += bg, v1 += bv, g1 += bg;
        }
        const uint32_t y = dev::pack2_16bit(kDt, v0 * dev::gelu(g0), v1 * dev::gelu(g1));
        const int c = wgmma_acc_col(ct, j) / 2;  // the pair's output column
        cs[r * kLd + c] = static_cast<uint16_t>(y);
        cs[(r + 8) * kLd + c] = static_cast<uint16_t>(y >> 16);
      }
    }
  } else {
#pragma unroll
    for (int j0 = 0; j0 < kJ; j0 += kG) {
      uint32_t bw[kG], wa[kG], wb[kG];
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int n = n0 + wgmma_acc_col(ct, j0 + g);
        bw[g] = ep.bias ? pair_at(ep.bias, 0, n) : 0u;
        wa[g] = ep.res && in_a ? pair_at(ep.res, ra, n) : 0u;
        wb[g] = ep.res && in_b ? pair_at(ep.res, rb8, n) : 0u;
      }
#pragma unroll
      for (int g = 0; g < kG; ++g) {
        const int j = j0 + g;
        float x0 = ep.alpha * d[4 * j], x1 = ep.alpha * d[4 * j + 1];
        float x2 = ep.alpha * d[4 * j + 2], x3 = ep.alpha * d[4 * j + 3];
        if (ep.bias) {
          const float b0 = lo(bw[g]), b1 = hi(bw[g]);
          x0 += b0, x1 += b1, x2 += b0, x3 += b1;
        }
        if (ep.res) x0 += lo(wa[g]), x1 += hi(wa[g]), x2 += lo(wb[g]), x3 += hi(wb[g]);
        const int c = wgmma_acc_col(ct, j);
        *reinterpret_cast<uint32_t*>(cs + r * kLd + c) = dev::pack2_16bit(kDt, x0, x1);
        *reinterpret_cast<uint32_t*>(cs + (r + 8) * kLd + c) = dev::pack2_16bit(kDt, x2, x3);
      }
    }
  }
  named_sync(epi_bar, 128);
  // 16 bytes (8 outputs) a thread from the staged rows to out: kWide staged
  // outputs a row, out's rows n_out long, the tile's first column c0.
  const auto write_out = [&](auto wide, int n_out, int c0) {
    constexpr int kChunks = decltype(wide)::value / 8;
#pragma unroll 1
    for (int g = ct; g < 64 * kChunks; g += 128) {
      const int rr = g / kChunks, cc = (g % kChunks) * 8;
      const int m = m0 + rr, n = c0 + cc;
      if (m >= M || n >= n_out) continue;
      const uint16_t* src = cs + rr * kLd + cc;
      uint16_t* dst = ep.out + batch * ep.ob + static_cast<int64_t>(m) * ep.om + n;
      if (n + 8 <= n_out) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else {
        for (int e = 0; n + e < n_out; ++e) dst[e] = src[e];
      }
    }
  };
  if (ep.geglu)
    write_out(std::integral_constant<int, BN / 2>{}, N / 2, n0 / 2);
  else
    write_out(std::integral_constant<int, BN>{}, N, n0);
}

template <class Epilogue>
struct RegisterEpilogueGroup : std::integral_constant<int, -1> {};  // not a RegisterEpilogue16
template <int kDt, int kGroup>
struct RegisterEpilogueGroup<RegisterEpilogue16<kDt, kGroup>> : std::integral_constant<int, kGroup> {};

// A consumer warpgroup's tile to the epilogue: tma_store_tile16 where the
// epilogue is a RegisterEpilogue16, else tma_store_tile (staging buffer cs of
// 64 x kLdc floats either way).
template <int BN, int kEpiCols, int kLdc, class Epilogue>
__device__ __forceinline__ void tma_epilogue(const float (&d)[BN / 2], float* cs, int epi_bar, int ct, int m0, int n0,
                                             int M, int N, int batch, const Epilogue& ep) {
  constexpr int kGroup = RegisterEpilogueGroup<Epilogue>::value;
  if constexpr (kGroup >= 0) {
    static_assert(64 * (BN + 8) * 2 <= 64 * kLdc * 4, "the 16-bit rows fit the fp32 staging buffer");
    tma_store_tile16<BN, kGroup>(d, reinterpret_cast<uint16_t*>(cs), epi_bar, ct, m0, n0, M, N, batch, ep);
  } else {
    tma_store_tile<BN, kEpiCols, kLdc>(d, cs, epi_bar, ct, m0, n0, M, N, batch, ep);
  }
}

// C[batch][m][n] = sum_k A(m, k) B(n, k) with A read through the tensor map
// ta (k, m, batch) and B through tb as `bl` says (TmaRowsLoad: (k, n,
// batch); TmaConvLoad: an NHWC input); a_batch is 0 for an A broadcast over
// the batch (its map has one batch entry). The
// epilogue gets fp32 sums: ep.row8(batch, m, n, N, v) for v = C[m][n .. n+7].
// Persistent: block i takes tiles i, i + gridDim.x, ... (n fastest, then m,
// then batch); the stage ring and its phases run on across tiles, so the
// producer loads tile i + 1 while the consumers run tile i's epilogue.
template <typename TC, int BN, class BLoad, class Epilogue>
__global__ void __launch_bounds__(384, 1)
    gemm_tma_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, int M, int N,
                    int K, int batches, int a_batch, BLoad bl, Epilogue ep) {
#if HIPQ_WGMMA_DEVICE
  using S = TmaShape<BN>;
  static_assert(S::kThreads == 384, "__launch_bounds__ above");
  extern __shared__ unsigned char tma_smem[];
  __shared__ uint64_t full_bar[S::kStages], empty_bar[S::kStages];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(tma_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;
  auto a_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes); };
  auto b_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes + S::kATileBytes); };
  auto full = [&](int s) { return static_cast<uint32_t>(__cvta_generic_to_shared(&full_bar[s])); };
  auto empty = [&](int s) { return static_cast<uint32_t>(__cvta_generic_to_shared(&empty_bar[s])); };

  const int m_tiles = (M + S::BM - 1) / S::BM;
  const int n_tiles = (N + S::BN - 1) / S::BN;
  const int tiles = batches * m_tiles * n_tiles;
  const int k_tiles = (K + S::BK - 1) / S::BK;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(full(s), 1);                     // the producer's arrive.expect_tx (+ the copies' bytes)
      mbar_init(empty(s), S::kConsumers * 128);  // every consumer thread
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    // Producer.
    setmaxnreg_dec<40>();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&ta);
      tma_prefetch_map(&tb);
      int it = 0;  // k-tiles issued by this block so far (all its tiles)
#pragma unroll 1
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int n0 = (t % n_tiles) * S::BN;
        const int m0 = ((t / n_tiles) % m_tiles) * S::BM;
        const int batch = t / (n_tiles * m_tiles);
#pragma unroll 1
        for (int kt = 0; kt < k_tiles; ++kt, ++it) {
          const int s = it % S::kStages;
          if (it >= S::kStages) mbar_wait(empty(s), ((it / S::kStages) - 1) & 1);  // its last reader is done
          mbar_arrive_expect_tx(full(s), S::kStageBytes);
          tma_load_3d(a_tile(s), &ta, full(s), kt * S::BK, m0, batch * a_batch);
          bl.load(b_tile(s), &tb, full(s), kt, n0, batch);
        }
      }
    }
    return;
  }

  // Consumers: warpgroup cw owns rows cw * 64 .. + 63 of each tile.
  setmaxnreg_inc<232>();
  const int cw = wg - 1;
  const int ct = threadIdx.x % 128;
  // This warpgroup's staging buffer and named barrier (2 + cw; 0 is __syncthreads).
  float* cs = reinterpret_cast<float*>(tma_smem + (base - raw) + S::kStages * S::kStageBytes) + cw * 64 * S::kLdc;
  int it = 0;
  float d[S::kAccum];
#pragma unroll 1
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int n0 = (t % n_tiles) * S::BN;
    const int m0 = ((t / n_tiles) % m_tiles) * S::BM;
    const int batch = t / (n_tiles * m_tiles);
#pragma unroll
    for (int i = 0; i < S::kAccum; ++i) d[i] = 0.0f;
#pragma unroll 1
    for (int kt = 0; kt < k_tiles; ++kt, ++it) {
      const int s = it % S::kStages;
      mbar_wait(full(s), (it / S::kStages) & 1);
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) wgmma_fence_operand(d[i]);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < S::BK / 16; ++kk) {
        const uint64_t da = wgmma_desc(a_tile(s) + static_cast<uint32_t>(cw * 64 * 128 + kk * 32));
        const uint64_t db = wgmma_desc(b_tile(s) + static_cast<uint32_t>(kk * 32));
        wgmma_row_block<TC, BN>(d, da, db);
      }
      wgmma_commit();
      wgmma_wait<1>();  // the previous k-tile's products are done: its stage may be refilled
#pragma unroll
      for (int i = 0; i < S::kAccum; ++i) wgmma_fence_operand(d[i]);
      if (kt > 0) mbar_arrive(empty((it - 1) % S::kStages));
    }
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < S::kAccum; ++i) wgmma_fence_operand(d[i]);
    mbar_arrive(empty((it - 1) % S::kStages));  // the tile's last stage

    tma_epilogue<S::BN, S::kEpiCols, S::kLdc>(d, cs, 2 + cw, ct, m0 + cw * 64, n0, M, N, batch, ep);
  }
#else
  __trap();  // launched only where HipContext::wgmma holds
#endif
}

// ---- host side ----

using TensorMapEncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                          const cuuint64_t*, const cuuint32_t*, const cuuint32_t*,
                                          CUtensorMapInterleave, CUtensorMapSwizzle, CUtensorMapL2promotion,
                                          CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled (CUDA 12.0 ABI), or nullptr when the
// driver does not export it. Looked up once.
inline TensorMapEncodeTiled tensor_map_encoder() {
  static const TensorMapEncodeTiled fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();  // not sticky; keep it from surfacing at the next launch check
      return TensorMapEncodeTiled{nullptr};
    }
    return reinterpret_cast<TensorMapEncodeTiled>(p);
  }();
  return fn;
}

// The 3-D map (k, row, batch) of a RowsFill operand with boxes of 64 x
// box_rows x 1, 128-byte swizzle, zero fill past the edges. `batched`: 1 when
// the operand has a batch stride, 0 when it is broadcast (one batch entry).
// False when TMA cannot describe it (then the caller falls back).
inline bool encode_rows_map(CUtensorMap& map, bool bf16, const RowsFill& f, int batch, int box_rows, int& batched) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || f.p == nullptr || f.K <= 0 || f.rows <= 0 || f.ld < f.K || f.sb < 0) return false;
  constexpr uint64_t kMaxStride = uint64_t{1} << 40;
  batched = batch > 1 && f.sb != 0 ? 1 : 0;
  const uint64_t row_bytes = static_cast<uint64_t>(f.ld) * 2;
  const uint64_t batch_bytes = batched ? static_cast<uint64_t>(f.sb) * 2 : row_bytes * static_cast<uint64_t>(f.rows);
  if (reinterpret_cast<uintptr_t>(f.p) % 16 != 0 || row_bytes % 16 != 0 || batch_bytes % 16 != 0 ||
      row_bytes >= kMaxStride || batch_bytes >= kMaxStride)
    return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(f.K), static_cast<cuuint64_t>(f.rows),
                              static_cast<cuuint64_t>(batched ? batch : 1)};
  const cuuint64_t strides[2] = {row_bytes, batch_bytes};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  std::memset(&map, 0, sizeof map);
  return encode(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
                const_cast<uint16_t*>(f.p), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// One problem's tensor maps and block tile, filled by prepare_gemm_tma.
struct GemmTmaPlan {
  CUtensorMap a, b;
  int a_batch = 0, b_batch = 0;
  int bn = 256;
  int blocks = 1;  // persistent grid: min(tiles, multiprocessors)
};

// Whether a bn-pixel conv tile is whole output rows of width Wo or one piece
// of a row (TmaConvLoad's boxes).
inline bool conv_tile_fits(int bn, int Wo) { return bn >= Wo ? bn % Wo == 0 : Wo % bn == 0; }

// Whether the TMA kernel takes C[batch] = A B^T for these RowsFill operands
// (fa.rows == M, fb.rows == N, both of width K); fills `plan` when it does.
// `tile`: the tile width (choose_gemm_route's tile_n, or
// RouteSwitches::gemm_tma: 0 never, 128 / 160 / 192 / 256 that width, -1
// gemm_tma_tile_n's, gemm_route.h).
inline bool prepare_gemm_tma(GemmTmaPlan& plan, bool bf16, const RowsFill& fa, const RowsFill& fb, int batch, int M,
                             int N, int K, int multiprocessors, int tile) {
  if (tile == 0 || M <= 0 || N <= 0 || K <= 0 || batch <= 0 || batch > 65535) return false;
  plan.bn = tile > 0 ? tile : gemm_tma_tile_n(batch, M, N, multiprocessors);
  return tma_grid_blocks(batch, M, N, plan.bn, multiprocessors, plan.blocks) &&
         encode_rows_map(plan.a, bf16, fa, batch, 128, plan.a_batch) &&
         encode_rows_map(plan.b, bf16, fb, batch, plan.bn, plan.b_batch);
}

// Whether the TMA kernel takes a stride-1 convolution as C[image] = W X^T:
// the weights fa ([O, T * C] rows, taps before channels, broadcast over the
// images) and an NHWC input x [images, H, W, C] with C % 64 == 0, output
// Ho x Wo with Ho * Wo % 8 == 0, `pad` zeros on each side, KW taps a row.
// The tile width must make a tile whole output rows or one piece of a row
// (TmaConvLoad); fills `plan` and `bl` when it can.
inline bool prepare_conv_tma(GemmTmaPlan& plan, TmaConvLoad& bl, bool bf16, const RowsFill& fa, const uint16_t* x,
                             int images, int H, int W, int C, int Ho, int Wo, int KW, int pad, int multiprocessors,
                             int tile) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || tile == 0 || x == nullptr || images <= 0 || images > 65535 || C <= 0 || C % 64 != 0 || Ho <= 0 ||
      Wo <= 0 || (static_cast<int64_t>(Ho) * Wo) % 8 != 0 || fa.rows <= 0 || KW <= 0 || pad < 0 ||
      reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return false;
  const int P = Ho * Wo;
  const auto fits = [Wo](int bn) { return conv_tile_fits(bn, Wo); };
  plan.bn = tile > 0 ? (fits(tile) ? tile : 0) : gemm_tma_tile_n(images, fa.rows, P, multiprocessors, fits);
  if (plan.bn == 0 || !tma_grid_blocks(images, fa.rows, P, plan.bn, multiprocessors, plan.blocks) ||
      !encode_rows_map(plan.a, bf16, fa, images, 128, plan.a_batch))
    return false;
  const int bw = std::min(plan.bn, Wo), bh = plan.bn / bw;
  const uint64_t row = static_cast<uint64_t>(C) * 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(C), static_cast<cuuint64_t>(W), static_cast<cuuint64_t>(H),
                              static_cast<cuuint64_t>(images)};
  const cuuint64_t strides[3] = {row, row * W, row * W * H};  // bytes between x, y and image neighbours
  constexpr uint64_t kMaxStride = uint64_t{1} << 40;
  if (strides[2] >= kMaxStride) return false;
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(bw), static_cast<cuuint32_t>(bh), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  std::memset(&plan.b, 0, sizeof plan.b);
  if (encode(&plan.b, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
             const_cast<uint16_t*>(x), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  bl.cblocks = C / 64;
  bl.KW = KW;
  bl.pad = pad;
  bl.pad_y = pad;
  bl.Wo = Wo;
  return true;
}

template <typename TC, int BN, class BLoad, class Epilogue>
hipError_t launch_gemm_tma_tile(hipStream_t stream, const GemmTmaPlan& plan, int batch, int M, int N, int K,
                                const BLoad& bl, const Epilogue& ep) {
  using S = TmaShape<BN>;
  auto* kernel = gemm_tma_kernel<TC, BN, BLoad, Epilogue>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  kernel<<<plan.blocks, S::kThreads, S::kSmemBytes, stream>>>(plan.a, plan.b, M, N, K, batch, plan.a_batch, bl,
                                                              ep);
  return hipGetLastError();
}

template <typename TC, class BLoad, class Epilogue>
hipError_t launch_gemm_tma(hipStream_t stream, const GemmTmaPlan& plan, int batch, int M, int N, int K,
                           const BLoad& bl, const Epilogue& ep) {
  switch (plan.bn) {
    case 256:
      return launch_gemm_tma_tile<TC, 256>(stream, plan, batch, M, N, K, bl, ep);
    case 192:
      return launch_gemm_tma_tile<TC, 192>(stream, plan, batch, M, N, K, bl, ep);
    case 160:
      return launch_gemm_tma_tile<TC, 160>(stream, plan, batch, M, N, K, bl, ep);
    default:
      return launch_gemm_tma_tile<TC, 128>(stream, plan, batch, M, N, K, bl, ep);
  }
}
// C[batch] = A B^T for the RowsFill operands of prepare_gemm_tma.
template <typename TC, class Epilogue>
hipError_t launch_gemm_tma(hipStream_t stream, const GemmTmaPlan& plan, int batch, int M, int N, int K,
                           const Epilogue& ep) {
  return launch_gemm_tma<TC>(stream, plan, batch, M, N, K, TmaRowsLoad{plan.b_batch}, ep);
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
