// Hopper (sm_90a) variant of the f16/bf16 GEMM core: warpgroup matrix
// instructions (wgmma.mma_async m64n128k16, fp32 accumulators) reading both
// operands from shared memory in the 128-byte-swizzled K-major layout, fed by
// a 3-stage cp.async pipeline. Block tile 128 x 128 x 64, 256 threads = two
// warpgroups, each owning 64 rows of C; every thread also issues its share of
// the copies. 97 KB of shared memory and <= 128 registers a thread let two
// blocks share a multiprocessor, so one's epilogue and prologue overlap the
// other's matrix work (measured: see docs/benchmarks.md). The epilogue stages
// the fp32 tile in shared memory and hands each thread 8 consecutive columns
// (Epilogue::row8), so stores are 16 bytes wide where the output allows.
//
// Operands are K-major rows fetched by a fill policy (a kernel template
// argument) with three calls: begin(batch, row0, tid) once, issue(stage
// address, k0, tid) per k-tile (16-byte cp.async, zero-filled past the
// operand), and the row count it covers:
//  - RowsFill: a plain matrix, row r at p + batch * sb + r * ld (linear
//    layers: activations [M, K], weights [N, K]);
//  - conv2d.hip's NhwcFill: the implicit im2col of an NHWC input, one row per
//    output pixel, k = (ky, kx, c) with C a multiple of 64.
// Compiled only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); HipContext::wgmma
// says at run time whether the device and the build have it.
#pragma once

#include "kernels/hip/gemm/wgmma_staging.h"

#if HIPQ_VENDOR_NVIDIA
namespace hipq::kernels::dev {

struct WgmmaShape {
  static constexpr int BM = 128, BN = 128, BK = 64, kStages = 3, kThreads = 256;
  static constexpr int kTileBytes = 128 * BK * 2;             // one operand's stage: 128 rows x 128 bytes
  static constexpr int kStageBytes = 2 * kTileBytes;          // A + B
  static constexpr int kLdc = BN + 8;                         // fp32 staging row (floats)
  static constexpr int kSmemBytes = kStages * kStageBytes + 1024;  // + alignment slack (swizzle atoms are 1 KB)
  static_assert(BM * kLdc * 4 <= kStages * kStageBytes, "epilogue staging fits the pipeline buffers");
};

// A plain K-major 16-bit matrix: rows [0, rows), row r at p + batch * sb + r * ld;
// ld, sb multiples of 8 and p 16-byte aligned (plain_operand_16bit), K a
// multiple of 8 (wgmma_staging.h).
struct RowsFill : KMajorRowsFill<uint16_t> {};

__device__ __forceinline__ uint64_t wgmma_desc(uint32_t addr) {
  // start address, leading offset (unused for swizzled K-major: 1), stride
  // offset 1024 bytes between 8-row groups, 128-byte swizzle.
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_wait_all() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void fence_proxy_async() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait_n() {
#if HIPQ_WGMMA_DEVICE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// Keeps the compiler from moving accumulator accesses across the async matrix ops.
__device__ __forceinline__ void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

template <typename TC>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], uint64_t da, uint64_t db, int scale_d);

template <>
__device__ __forceinline__ void wgmma_m64n128k16<__half>(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
#endif
}
template <>
__device__ __forceinline__ void wgmma_m64n128k16<__nv_bfloat16>(float (&d)[64], uint64_t da, uint64_t db,
                                                                int scale_d) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
#endif
}

// C[batch][m][n] = sum_k A(m, k) B(n, k); the epilogue gets fp32 sums:
// ep.row8(batch, m, n, N, v) for v = C[m][n .. n+7] (fewer past N).
template <typename TC, class FillA, class FillB, class Epilogue>
__global__ void __launch_bounds__(256, 2) gemm_wgmma_kernel(int M, int N, int K, FillA fa, FillB fb, Epilogue ep) {
#if HIPQ_WGMMA_DEVICE
  using S = WgmmaShape;
  extern __shared__ unsigned char wgmma_smem[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(wgmma_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;
  unsigned char* base_ptr = wgmma_smem + (base - raw);
  auto a_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes); };
  auto b_tile = [&](int s) { return base + static_cast<uint32_t>(s * S::kStageBytes + S::kTileBytes); };

  const int batch = blockIdx.z;
  const int m0 = blockIdx.y * S::BM;
  const int n0 = blockIdx.x * S::BN;
  const int tid = threadIdx.x;
  const int wg = tid / 128;  // warpgroup: rows wg * 64 of the block tile
  fa.begin(batch, m0, tid);
  fb.begin(batch, n0, tid);

  float d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.0f;

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
    cp_async_wait_n<S::kStages - 2>();  // this thread's copies of tile kt are done
    fence_proxy_async();                 // ... and visible to the matrix units
    __syncthreads();                     // everyone's; and stage (kt - 1) is no longer read
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
    for (int kk = 0; kk < S::BK / 16; ++kk) {
      const uint64_t da = wgmma_desc(a_tile(s) + static_cast<uint32_t>(wg * 64 * 128 + kk * 32));
      const uint64_t db = wgmma_desc(b_tile(s) + static_cast<uint32_t>(kk * 32));
      wgmma_m64n128k16<TC>(d, da, db, 1);
    }
    wgmma_commit();
    wgmma_wait_all();
#pragma unroll
    for (int i = 0; i < 64; ++i) wgmma_fence_operand(d[i]);
  }
  cp_async_wait_n<0>();
  __syncthreads();

  float* cs = reinterpret_cast<float*>(base_ptr);
  stage_wgmma_acc(cs, S::kLdc, d, tid);
  __syncthreads();
#pragma unroll 1
  for (int g = tid; g < S::BM * (S::BN / 8); g += S::kThreads) {
    const int rr = g / (S::BN / 8), cc = (g % (S::BN / 8)) * 8;
    const int m = m0 + rr, n = n0 + cc;
    if (m < M && n < N) ep.row8(batch, m, n, N, cs + rr * S::kLdc + cc);
  }
#else
  __trap();  // launched only where HipContext::wgmma holds
#endif
}

template <typename TC, class FillA, class FillB, class Epilogue>
hipError_t launch_gemm_wgmma(hipStream_t stream, int batch, int M, int N, int K, const FillA& fa, const FillB& fb,
                             const Epilogue& ep) {
  using S = WgmmaShape;
  auto* kernel = gemm_wgmma_kernel<TC, FillA, FillB, Epilogue>;
  if (hipError_t e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
      e != hipSuccess)
    return e;
  dim3 grid((N + S::BN - 1) / S::BN, (M + S::BM - 1) / S::BM, batch);
  kernel<<<grid, S::kThreads, S::kSmemBytes, stream>>>(M, N, K, fa, fb, ep);
  return hipGetLastError();
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
