// Hopper (sm_90a) GEMM of e4m3 codes (matmul_fp8): the structure of
// gemm_wgmma.h with 8-bit operands. wgmma.mma_async m64n128k32 .e4m3.e4m3
// with fp32 accumulators reads both operands from shared memory; 8-bit wgmma
// takes only K-major operands, which is what the codes are ([M, K] and
// [N, K] rows). A k-tile is 128 codes = one 128-byte swizzled row, so the
// shared layout, the descriptors and the 32-byte step between the four
// k32 instructions of a k-tile are byte for byte those of the 16-bit kernel
// (whose k-tile is 64 elements of 2 bytes). Block tile 128 x 128 x 128,
// 4-stage cp.async pipeline (16-byte copies = 16 codes; K a multiple of 16,
// rows zero-filled past M, N and K: code 0 is +0), two warpgroups of 64 rows.
//
// Accumulator promotion: the fp8 wgmma does not add in full fp32. Its
// products are exact, but they and the accumulator it is handed are aligned
// to the largest of them and summed with about 14 significant bits (the
// DeepSeek-V3 report; CUTLASS' "FP8FastAccum" kernels against its default
// two-accumulator ones). Within one instruction that costs about 1e-3 of
// the output's rms (the H200's f32-output parity cases, K = 80 .. 1280);
// handed a running sum, every later product loses its low bits to the
// large accumulator and the error grows with K (a model of the sum,
// tests/kernels/fp8_wgmma_sum_test.cpp: 1e-2 of the rms at K = 5120). Here each
// kFp8PromotionK of K runs its wgmma into a temporary accumulator that the
// first instruction zeroes (scale-d 0), and after wgmma.wait_group the
// temporary is added into the fp32 main accumulator with ordinary fp32
// adds (CUTLASS' mma_promotion_interval, 4 k32 instructions by default).
// Two 64-float accumulators a thread need more registers than two blocks a
// multiprocessor leave (128 a thread), so one block of 256 threads runs on
// each, with a deeper pipeline.
// Epilogue: acc * scale_a[m] * scale_b[n], then the matmul epilogue's row8.
// Compiled only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL).
#pragma once

#include "kernels/hip/gemm/gemm_wgmma.h"

#if HIPQ_VENDOR_NVIDIA
namespace hipq::kernels::dev {

// K summed by the matrix units between two promotions into fp32 registers:
// 128 codes = the 4 k32 wgmma of one k-tile.
constexpr int kFp8PromotionK = 128;

struct WgmmaFp8Shape {
  static constexpr int BM = 128, BN = 128, BK = 128, kStages = 4, kThreads = 256;
  static_assert(BK == kFp8PromotionK, "one promotion a k-tile");
  static constexpr int kTileBytes = 128 * BK;                 // one operand's stage: 128 rows x 128 bytes
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kLdc = BN + 8;
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;
  static_assert(BM * kLdc * 4 <= kStages * kStageBytes, "epilogue staging fits the pipeline buffers");
};

// A K-major matrix of e4m3 codes: row r at p + batch * sb + r * ld (bytes);
// ld, sb multiples of 16, p 16-byte aligned, K a multiple of 16
// (wgmma_staging.h).
struct CodeRowsFill : KMajorRowsFill<uint8_t> {};

__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
#endif
}

// m64n160k32: the 128 x 160 tile of gemm_tma_fp8.h (its default width).
__device__ __forceinline__ void wgmma_m64n160k32_e4m3(float (&d)[80], uint64_t da, uint64_t db, int scale_d) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, %80, %81, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
      : "l"(da), "l"(db), "r"(scale_d));
#endif
}

// The wgmma of n = BN (128 or 160) the TMA kernel's tile takes.
template <int BN>
__device__ __forceinline__ void wgmma_m64nNk32_e4m3(float (&d)[BN / 2], uint64_t da, uint64_t db, int scale_d) {
  if constexpr (BN == 160) {
    wgmma_m64n160k32_e4m3(d, da, db, scale_d);
  } else {
    static_assert(BN == 128, "an n the e4m3 wgmma wrappers have");
    wgmma_m64n128k32_e4m3(d, da, db, scale_d);
  }
}

// out = ep(scale_a[m] * scale_b[n] * sum_k A(m, k) B(n, k)) over codes.
template <class Epilogue>
__global__ void __launch_bounds__(256, 1)
    gemm_wgmma_fp8_kernel(int M, int N, int K, CodeRowsFill fa, CodeRowsFill fb, const float* scale_a,
                          const float* scale_b, Epilogue ep) {
#if HIPQ_WGMMA_DEVICE
  using S = WgmmaFp8Shape;
  extern __shared__ unsigned char wgmma_fp8_smem[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(wgmma_fp8_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = wgmma_fp8_smem + (base - raw);
  auto a_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes); };
  auto b_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes + S::kTileBytes); };

  const int batch = blockIdx.z;
  const int m0 = blockIdx.y * S::BM;
  const int n0 = blockIdx.x * S::BN;
  const int tid = threadIdx.x;
  const int wg = tid / 128;
  fa.begin(batch, m0, tid);
  fb.begin(batch, n0, tid);

  float acc[64];  // fp32 main accumulator: the CUDA cores add into it
  float d[64];    // the matrix units' partial sum of one k-tile
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f, d[i] = 0.0f;

  const int k_tiles = (K + S::BK - 1) / S::BK;
#pragma unroll
  for (int s = 0; s < S::kStages - 1; ++s) {
    if (s < k_tiles) {
      fa.issue(a_tile(s), s * S::BK, tid);
      fb.issue(b_tile(s), s * S::BK, tid);
    }
    cp_async_commit();
  }
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait_n<S::kStages - 2>();
    fence_proxy_async();
    __syncthreads();
    const int nk = kt + S::kStages - 1;
    if (nk < k_tiles) {
      fa.issue(a_tile(nk % S::kStages), nk * S::BK, tid);
      fb.issue(b_tile(nk % S::kStages), nk * S::BK, tid);
    }
    cp_async_commit();
    const int s = kt % S::kStages;
#pragma unroll
    for (int i = 0; i < 64; ++i) wgmma_fence_operand(d[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < S::BK / 32; ++kk) {
      const uint64_t da = wgmma_desc(a_tile(s) + static_cast<uint32_t>(wg * 64 * 128 + kk * 32));
      const uint64_t db = wgmma_desc(b_tile(s) + static_cast<uint32_t>(kk * 32));
      wgmma_m64n128k32_e4m3(d, da, db, kk == 0 ? 0 : 1);  // the first one starts d from zero
    }
    wgmma_commit();
    wgmma_wait_all();
#pragma unroll
    for (int i = 0; i < 64; ++i) wgmma_fence_operand(d[i]);
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[i] += d[i];  // promotion: fp32 adds
  }
  cp_async_wait_n<0>();
  __syncthreads();

  float* cs = reinterpret_cast<float*>(base_ptr);
  stage_wgmma_acc(cs, S::kLdc, acc, tid);  // the layout does not depend on the operand type
  __syncthreads();
#pragma unroll 1
  for (int g = tid; g < S::BM * (S::BN / 8); g += S::kThreads) {
    const int rr = g / (S::BN / 8), cc = (g % (S::BN / 8)) * 8;
    const int m = m0 + rr, n = n0 + cc;
    if (m < M && n < N) {
      const float sa = scale_a[m];
      float v[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) v[e] = n + e < N ? cs[rr * S::kLdc + cc + e] * sa * scale_b[n + e] : 0.0f;
      ep.row8(batch, m, n, N, v);
    }
  }
#else
  __trap();  // launched only where HipContext::fp8 and wgmma hold
#endif
}

template <class Epilogue>
hipError_t launch_gemm_wgmma_fp8(hipStream_t stream, int batch, int M, int N, int K, const CodeRowsFill& fa,
                                 const CodeRowsFill& fb, const float* scale_a, const float* scale_b,
                                 const Epilogue& ep) {
  using S = WgmmaFp8Shape;
  auto* kernel = gemm_wgmma_fp8_kernel<Epilogue>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  dim3 grid((N + S::BN - 1) / S::BN, (M + S::BM - 1) / S::BM, batch);
  kernel<<<grid, S::kThreads, S::kSmemBytes, stream>>>(M, N, K, fa, fb, scale_a, scale_b, ep);
  return hipGetLastError();
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
