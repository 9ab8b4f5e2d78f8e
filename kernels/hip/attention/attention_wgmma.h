// Hopper (sm_90a) fused attention for f16/bf16, head dim 64, no causal mask:
// SDXL's self attention (4096 and 1024 tokens) and its 77-key cross
// attention (one partial key tile). Flash style
// as attention_mma.h (scores never leave registers, online softmax in base 2
// with fp32 running max and sum, P rounded to the 16-bit type for the second
// product), on the warpgroup matrix instructions and the tensor copy engine:
//
// Block: 64 * NC queries of one (batch, head), NC = 2 or 3 consumer
// warpgroups beside one producer warpgroup (128 * (NC + 1) threads):
//  - warpgroup 0, the producer (setmaxnreg.dec 40, or 24 with three
//    consumers): one thread copies the block's Q tile (64 NC x 64) once and
//    then, per 128-key tile, K and V (128 x 64 each) into a ring of kStages
//    stages, each a "full" mbarrier (transaction bytes) and an "empty" one
//    (consumer arrivals), as in gemm_tma.h. Maps are 4-D (d, head, sequence,
//    batch) over [B, S, H * D] with 128-byte swizzle: each tile row (a query
//    or key) is 128 bytes.
//  - warpgroups 1 .. NC, the consumers (setmaxnreg.inc 232, or 160 with
//    three): 64 queries each.
//    Per key tile: S (64 x 128, fp32) = Q K^T as 4 wgmma m64n128k16 with both
//    operands in shared memory (K-major: Q's and K's rows are d-contiguous);
//    the online softmax on S's registers; O (64 x 64) += P V as 8 wgmma
//    m64n64k16 with P from registers (the accumulator layout of S's columns
//    16k .. 16k + 15 is the A fragment of k-slice k) and V from shared memory
//    as an MN-major operand (V's rows are keys with d contiguous: the
//    transposed-B form, same 128-byte swizzled atoms, 1024 bytes a group of
//    8 keys). The consumers run independently, so one's softmax overlaps
//    another's products: each waits on its own products and exponentials in
//    turn, so a third consumer on the SM (FlashAttention-3's choice for head
//    dim 64) fills more of those waits, at 160 registers a thread.
// Which NC a problem gets, and whether a partial key tile is taken at all:
// AttnWgmmaRoute, from HipContext's HIPQ_ATTN_WGMMA* knobs. Two consumers and
// whole key tiles unless asked: the three-consumer form and the key tails
// compile without spills but are not measured on a device yet.
// Queries past Sq are zero-filled by the copy engine and never stored.
#pragma once

#include "kernels/hip/attention/attention_mma.h"  // AttnMmaArgs, pack2
#include "kernels/hip/gemm/gemm_tma.h"

#if HIPQ_VENDOR_NVIDIA
#include <algorithm>
#include <cstring>
#include <type_traits>

namespace hipq::kernels::dev {

template <int NC>
struct AttnWgmmaShape {
  static_assert(NC == 2 || NC == 3, "two or three consumer warpgroups");
  static constexpr int kConsumers = NC;
  static constexpr int kQ = 64 * NC, kKeys = 128, D = 64;
  static constexpr int kStages = NC == 3 ? 4 : 3;
  static constexpr int kThreads = 128 * (NC + 1);
  static constexpr int kProducerRegs = NC == 3 ? 24 : 40, kConsumerRegs = NC == 3 ? 160 : 232;
  static_assert(128 * (kProducerRegs + NC * kConsumerRegs) <= 65536, "the warpgroups' registers fit an SM");
  static constexpr int kTileBytes = kKeys * D * 2;  // a K or V tile
  static constexpr int kQBytes = kQ * D * 2;        // a multiple of 1024: the stages stay swizzle-aligned
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kSmemBytes = kQBytes + kStages * kStageBytes + 1024;  // + 1 KB alignment slack
  static_assert(kSmemBytes <= 227 * 1024, "fits the opt-in shared memory of an SM");
};

struct AttnWgmmaArgs {
  void* out;
  int64_t osb, oss;  // out's batch and sequence strides (elements)
  int H, Sq, Sk;
  float scale_log2;
};

// O (64 x 64) += A (64 x 16, registers) . B (16 x 64 from the MN-major
// shared tile described by db).
template <typename TC>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tb(float (&d)[32], const uint32_t (&a)[4], uint64_t db);

template <>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tb<__half>(float (&d)[32], const uint32_t (&a)[4], uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(1));
#endif
}
template <>
__device__ __forceinline__ void wgmma_m64n64k16_rs_tb<__nv_bfloat16>(float (&d)[32], const uint32_t (&a)[4],
                                                                     uint64_t db) {
#if HIPQ_WGMMA_DEVICE
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
      "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "n"(1));
#endif
}

__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

template <typename TC, int NC>
__global__ void __launch_bounds__(AttnWgmmaShape<NC>::kThreads, 1)
    attention_wgmma_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                           const __grid_constant__ CUtensorMap tv, AttnWgmmaArgs a) {
#if HIPQ_WGMMA_DEVICE
  using S = AttnWgmmaShape<NC>;
  extern __shared__ unsigned char attn_smem[];
  __shared__ uint64_t q_bar, full_bar[S::kStages], empty_bar[S::kStages];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(attn_smem));
  const uint32_t base = (raw + 1023u) & ~1023u;
  const uint32_t q_tile = base;
  auto k_tile = [&](int s) { return base + static_cast<uint32_t>(S::kQBytes + s * S::kStageBytes); };
  auto v_tile = [&](int s) { return k_tile(s) + static_cast<uint32_t>(S::kTileBytes); };
  auto bar = [](uint64_t& b) { return static_cast<uint32_t>(__cvta_generic_to_shared(&b)); };

  const int bh = blockIdx.y;
  const int b = bh / a.H, h = bh - b * a.H;
  const int q0 = blockIdx.x * S::kQ;
  const int tiles = (a.Sk + S::kKeys - 1) / S::kKeys;  // the last one partial where kKeys does not divide Sk
  const int wg = threadIdx.x / 128;
  // Consumers with queries to do (the last block of a sequence may have
  // fewer than NC); only they free the stages.
  const int active = min(NC, (a.Sq - q0 + 63) / 64);
  if (threadIdx.x == 0) {
    mbar_init(bar(q_bar), 1);
    for (int s = 0; s < S::kStages; ++s) {
      mbar_init(bar(full_bar[s]), 1);
      mbar_init(bar(empty_bar[s]), active * 128);
    }
    mbar_init_fence();
  }
  __syncthreads();

  if (wg == 0) {
    setmaxnreg_dec<S::kProducerRegs>();
    if (threadIdx.x == 0) {
      tma_prefetch_map(&tq);
      tma_prefetch_map(&tk);
      tma_prefetch_map(&tv);
      mbar_arrive_expect_tx(bar(q_bar), S::kQBytes);
      tma_load_4d(q_tile, &tq, bar(q_bar), 0, h, q0, b);
#pragma unroll 1
      for (int j = 0; j < tiles; ++j) {
        const int s = j % S::kStages;
        if (j >= S::kStages) mbar_wait(bar(empty_bar[s]), ((j / S::kStages) - 1) & 1);
        mbar_arrive_expect_tx(bar(full_bar[s]), S::kStageBytes);
        tma_load_4d(k_tile(s), &tk, bar(full_bar[s]), 0, h, j * S::kKeys, b);
        tma_load_4d(v_tile(s), &tv, bar(full_bar[s]), 0, h, j * S::kKeys, b);
      }
    }
    return;
  }

  setmaxnreg_inc<S::kConsumerRegs>();
  const int cw = wg - 1;
  if (cw >= active) return;
  const int ct = threadIdx.x % 128;
  const int warp = ct / 32, lane = ct % 32;
  // This thread's rows of S and O: r0 = warp * 16 + lane / 4 and r0 + 8 of
  // the warpgroup's 64; columns 8j + 2 (lane % 4) + {0, 1}.
  float o[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
  const uint32_t q_rows = q_tile + static_cast<uint32_t>(cw * 64 * 128);
  float sc[64];  // S of the current key tile, then its P
#pragma unroll
  for (int i = 0; i < 64; ++i) sc[i] = 0.0f;
  mbar_wait(bar(q_bar), 0);

#pragma unroll 1
  for (int j = 0; j < tiles; ++j) {
    const int s = j % S::kStages;
    mbar_wait(bar(full_bar[s]), (j / S::kStages) & 1);
#pragma unroll
    for (int i = 0; i < 64; ++i) wgmma_fence_operand(sc[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < S::D / 16; ++kk)
      wgmma_m64n128k16<TC>(sc, wgmma_desc(q_rows + static_cast<uint32_t>(kk * 32)),
                           wgmma_desc(k_tile(s) + static_cast<uint32_t>(kk * 32)), kk > 0 ? 1 : 0);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 64; ++i) wgmma_fence_operand(sc[i]);

    // Keys past Sk (zero-filled by the copy engine: their scores are 0, their
    // V rows 0) leave the softmax: score -inf. This thread's key of sc[4c + e]
    // is 8c + 2 (lane % 4) + (e & 1) of the tile; a partial tile has at least one.
    if (j == tiles - 1 && a.Sk % S::kKeys != 0) {
      const int valid = a.Sk - j * S::kKeys;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const int key = 8 * c + 2 * (lane % 4);
        if (key >= valid) sc[4 * c] = sc[4 * c + 2] = -INFINITY;
        if (key + 1 >= valid) sc[4 * c + 1] = sc[4 * c + 3] = -INFINITY;
      }
    }
    // Online softmax, base 2: row r0 holds sc[4c + 0/1], row r0 + 8 sc[4c + 2/3].
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 16; ++c) mx = fmaxf(mx, fmaxf(sc[4 * c + 2 * r], sc[4 * c + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_run[r], mx * a.scale_log2);
      corr[r] = fast_exp2(m_run[r] - m_new);  // 0 on the first tile (m_run = -inf)
      m_run[r] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        const float p0 = fast_exp2(fmaf(sc[4 * c + 2 * r], a.scale_log2, -m_new));
        const float p1 = fast_exp2(fmaf(sc[4 * c + 2 * r + 1], a.scale_log2, -m_new));
        sc[4 * c + 2 * r] = p0;
        sc[4 * c + 2 * r + 1] = p1;
        sum += p0 + p1;
      }
      l_run[r] = l_run[r] * corr[r] + sum;  // this thread's columns; summed over the row's 4 lanes at the end
    }
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      o[4 * c] *= corr[0];
      o[4 * c + 1] *= corr[0];
      o[4 * c + 2] *= corr[1];
      o[4 * c + 3] *= corr[1];
    }
    uint32_t pa[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      pa[kk][0] = pack2<TC>(sc[8 * kk + 0], sc[8 * kk + 1]);
      pa[kk][1] = pack2<TC>(sc[8 * kk + 2], sc[8 * kk + 3]);
      pa[kk][2] = pack2<TC>(sc[8 * kk + 4], sc[8 * kk + 5]);
      pa[kk][3] = pack2<TC>(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma_fence_operand(o[i]);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
      wgmma_m64n64k16_rs_tb<TC>(o, pa[kk], wgmma_desc(v_tile(s) + static_cast<uint32_t>(kk * 2048)));
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < 32; ++i) wgmma_fence_operand(o[i]);
    mbar_arrive(bar(empty_bar[s]));
  }

  // out[b, q, h * 64 + col] = O / l.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int q = q0 + cw * 64 + warp * 16 + lane / 4 + 8 * r;
    if (q >= a.Sq) continue;
    TC* row = static_cast<TC*>(a.out) + b * a.osb + static_cast<int64_t>(q) * a.oss + h * S::D;
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      const int col = 8 * c + 2 * (lane % 4);
      *reinterpret_cast<uint32_t*>(row + col) = pack2<TC>(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv);
    }
  }
#else
  __trap();  // launched only where HipContext::wgmma holds
#endif
}

// The 4-D map (d, head, sequence, batch) of a [B, S, H * 64] operand with
// batch / sequence strides sb / ss (elements) and boxes of 64 x 1 x rows x 1.
inline bool encode_heads_map(CUtensorMap& map, bool bf16, const void* p, int B, int S, int H, int64_t sb,
                             int64_t ss, int rows) {
  const TensorMapEncodeTiled encode = tensor_map_encoder();
  if (!encode || p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0 || (ss * 2) % 16 != 0 ||
      (sb * 2) % 16 != 0 || ss < static_cast<int64_t>(H) * 64 || sb < 0)
    return false;
  constexpr int64_t kMaxStride = int64_t{1} << 40;
  if (ss * 2 >= kMaxStride || sb * 2 >= kMaxStride) return false;
  const cuuint64_t dims[4] = {64, static_cast<cuuint64_t>(H), static_cast<cuuint64_t>(S),
                              static_cast<cuuint64_t>(B)};
  const cuuint64_t strides[3] = {128, static_cast<cuuint64_t>(ss * 2),
                                 static_cast<cuuint64_t>(B > 1 ? sb * 2 : ss * 2 * S)};
  const cuuint32_t box[4] = {64, 1, static_cast<cuuint32_t>(rows), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  std::memset(&map, 0, sizeof map);
  return encode(&map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<void*>(p),
                dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// How a problem is routed to the wgmma kernel (HipContext's knobs).
struct AttnWgmmaRoute {
  int multiprocessors = 1;
  int consumers = 2;       // 2 or 3 consumer warpgroups a block; 0: attention_wgmma_consumers' choice
  bool key_tails = false;  // also take key counts that are not a multiple of the 128-key tile
};

// The consumer warpgroups a block gets: `forced` (2 or 3), else the count
// whose blocks take fewer waves over the SMs (one block an SM), a wave of
// 3-consumer blocks counted as kThreeConsumerWave of a 2-consumer one (the
// SM shared by more work). SDXL: 1024 tokens x 40 heads-batches are 320
// blocks of two (3 waves) or 240 of three (2 waves); 4096 x 20 are 640 (5)
// or 440 (4).
inline int attention_wgmma_consumers(int Sq, int BH, int sms, int forced) {
  if (forced == 2 || forced == 3) return forced;
  constexpr double kThreeConsumerWave = 1.25;
  auto waves = [&](int nc) {
    const int64_t blocks = static_cast<int64_t>((Sq + 64 * nc - 1) / (64 * nc)) * BH;
    return static_cast<double>((blocks + sms - 1) / std::max(sms, 1));
  };
  return waves(3) * kThreeConsumerWave < waves(2) ? 3 : 2;
}

// Launches attention_wgmma_kernel when the problem is one it takes (head dim
// 64, not causal, keys a multiple of 128 unless route.key_tails, rows TMA
// can describe); false (nothing launched) otherwise. `e` gets the launch's
// error.
template <typename TC, int NC>
bool launch_attention_wgmma_nc(hipStream_t stream, const AttnMmaArgs& m, int B, hipError_t& e) {
  using S = AttnWgmmaShape<NC>;
  const bool bf16 = std::is_same_v<TC, __nv_bfloat16>;
  CUtensorMap tq, tk, tv;
  if (!encode_heads_map(tq, bf16, m.q, B, m.Sq, m.H, m.qsb, m.qss, S::kQ) ||
      !encode_heads_map(tk, bf16, m.k, B, m.Sk, m.H, m.ksb, m.kss, S::kKeys) ||
      !encode_heads_map(tv, bf16, m.v, B, m.Sk, m.H, m.vsb, m.vss, S::kKeys))
    return false;
  auto* kernel = attention_wgmma_kernel<TC, NC>;
  e = hipFuncSetAttribute(kernel, hipFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes);
  if (e != hipSuccess) return true;
  const AttnWgmmaArgs args{m.out, static_cast<int64_t>(m.Sq) * m.H * S::D, static_cast<int64_t>(m.H) * S::D, m.H,
                           m.Sq, m.Sk, m.scale_log2};
  kernel<<<dim3((m.Sq + S::kQ - 1) / S::kQ, B * m.H), S::kThreads, S::kSmemBytes, stream>>>(tq, tk, tv, args);
  e = hipGetLastError();
  return true;
}

template <typename TC>
bool launch_attention_wgmma(hipStream_t stream, const AttnMmaArgs& m, int B, const AttnWgmmaRoute& route,
                            hipError_t& e) {
  if (m.causal || !(m.scale_log2 > 0.0f) || m.Sk <= 0 || m.Sq <= 0 || B <= 0 || B * m.H > 65535)
    return false;
  if (!route.key_tails && m.Sk % AttnWgmmaShape<2>::kKeys != 0) return false;
  return attention_wgmma_consumers(m.Sq, B * m.H, route.multiprocessors, route.consumers) == 3
             ? launch_attention_wgmma_nc<TC, 3>(stream, m, B, e)
             : launch_attention_wgmma_nc<TC, 2>(stream, m, B, e);
}

}  // namespace hipq::kernels::dev
#endif  // HIPQ_VENDOR_NVIDIA
