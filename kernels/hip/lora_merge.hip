// lora_merge: out [O, I] f32 = f32(base) + sum over deltas of (c * up) @ down,
// every product and sum rounded to fp32 on its own, in the order
// kernels/backend.h gives (deltas in order, k ascending), so the bits equal
// the cpu backend's. The rank is small (4 .. 128), so the op moves base and
// out once: a block makes a 64 x 64 tile of out from a 64 x r slice of up and
// an r x 64 slice of down staged in shared memory 16 ranks at a time; a warp
// reads and writes whole 32-column rows (coalesced), each thread 16 outputs.
#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

// No fused multiply-add: nvcc's round-to-nearest intrinsics are never
// contracted; clang (HIP on AMD) gets plain operations with contraction off
// in the kernel.
#if defined(__CUDACC__) && !defined(__clang__)
#define HIPQ_LORA_MUL(a, b) __fmul_rn((a), (b))
#define HIPQ_LORA_ADD(a, b) __fadd_rn((a), (b))
#else
#define HIPQ_LORA_MUL(a, b) ((a) * (b))
#define HIPQ_LORA_ADD(a, b) ((a) + (b))
#endif

namespace hipq::kernels {
namespace {

constexpr int kTileRows = 64;
constexpr int kTileCols = 64;
constexpr int kRankStep = 16;
constexpr int kThreadsX = 32;  // a warp: one row's 32 columns
constexpr int kThreadsY = 8;
constexpr int kRowsPerThread = kTileRows / kThreadsY;  // 8
constexpr int kColsPerThread = kTileCols / kThreadsX;  // 2
constexpr int kMaxDeltas = 8;  // per launch; more deltas take further launches

struct DeltaArgs {
  const float* up[kMaxDeltas];
  const float* down[kMaxDeltas];
  int rank[kMaxDeltas];
  float coefficient[kMaxDeltas];
  int count = 0;
};

// resume: acc starts from out (an earlier launch's deltas) instead of 0;
// finish: out = base + acc, else out = acc.
__global__ void __launch_bounds__(kThreadsX * kThreadsY)
    lora_merge_kernel(const void* __restrict__ base, int base_dt, float* __restrict__ out, int64_t rows,
                      int64_t cols, DeltaArgs deltas, bool resume, bool finish) {
#if defined(__clang__)
#pragma clang fp contract(off)
#endif
  __shared__ float up_s[kTileRows][kRankStep + 1];
  __shared__ float down_s[kRankStep][kTileCols];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int tid = ty * kThreadsX + tx;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTileRows;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTileCols;
  float acc[kRowsPerThread][kColsPerThread];
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
    for (int b = 0; b < kColsPerThread; ++b) {
      const int64_t r = row0 + ty + a * kThreadsY, c = col0 + tx + b * kThreadsX;
      acc[a][b] = resume && r < rows && c < cols ? out[r * cols + c] : 0.0f;
    }
  }
  for (int l = 0; l < deltas.count; ++l) {
    const float* up = deltas.up[l];
    const float* down = deltas.down[l];
    const int rank = deltas.rank[l];
    const float coef = deltas.coefficient[l];
    for (int k0 = 0; k0 < rank; k0 += kRankStep) {
      const int kn = min(kRankStep, rank - k0);
      __syncthreads();  // the previous step's tiles are read
      for (int e = tid; e < kTileRows * kRankStep; e += kThreadsX * kThreadsY) {
        const int r = e / kRankStep, k = e % kRankStep;
        const int64_t gr = row0 + r;
        up_s[r][k] = gr < rows && k < kn ? HIPQ_LORA_MUL(coef, up[gr * rank + k0 + k]) : 0.0f;
      }
      for (int e = tid; e < kRankStep * kTileCols; e += kThreadsX * kThreadsY) {
        const int k = e / kTileCols, c = e % kTileCols;
        const int64_t gc = col0 + c;
        down_s[k][c] = gc < cols && k < kn ? down[static_cast<int64_t>(k0 + k) * cols + gc] : 0.0f;
      }
      __syncthreads();
      for (int k = 0; k < kn; ++k) {
        float d[kColsPerThread];
#pragma unroll
        for (int b = 0; b < kColsPerThread; ++b) d[b] = down_s[k][tx + b * kThreadsX];
#pragma unroll
        for (int a = 0; a < kRowsPerThread; ++a) {
          const float u = up_s[ty + a * kThreadsY][k];
#pragma unroll
          for (int b = 0; b < kColsPerThread; ++b) acc[a][b] = HIPQ_LORA_ADD(acc[a][b], HIPQ_LORA_MUL(u, d[b]));
        }
      }
    }
  }
#pragma unroll
  for (int a = 0; a < kRowsPerThread; ++a) {
#pragma unroll
    for (int b = 0; b < kColsPerThread; ++b) {
      const int64_t r = row0 + ty + a * kThreadsY, c = col0 + tx + b * kThreadsX;
      if (r >= rows || c >= cols) continue;
      const int64_t i = r * cols + c;
      out[i] = finish ? HIPQ_LORA_ADD(dev::ld(base, base_dt, i), acc[a][b]) : acc[a][b];
    }
  }
}

}  // namespace

Status hip_lora_merge(HipContext& ctx, const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out) {
  constexpr const char* op = "lora_merge";
  HIPQ_RETURN_IF_ERROR(require_device_float(base, op, "base"));
  HIPQ_RETURN_IF_ERROR(require_device_float(out, op, "out"));
  for (const LoraFactors& d : deltas) {
    HIPQ_RETURN_IF_ERROR(require_device_float(d.up, op, "up"));
    HIPQ_RETURN_IF_ERROR(require_device_float(d.down, op, "down"));
  }
  HIPQ_RETURN_IF_ERROR(check_lora_merge(base, deltas, out));
  const int64_t rows = base.shape[0], cols = base.shape[1];
  if (rows == 0 || cols == 0) return Status::Ok();
  const int64_t grid_x = (cols + kTileCols - 1) / kTileCols, grid_y = (rows + kTileRows - 1) / kTileRows;
  if (grid_y > 65535)
    return Status::InvalidArgument(std::string(op) + ": base " + base.describe() + " has more than " +
                                   std::to_string(int64_t{65535} * kTileRows) + " rows");
  const dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y));
  const dim3 block(kThreadsX, kThreadsY);
  size_t next = 0;
  do {
    DeltaArgs args{};
    for (; next < deltas.size() && args.count < kMaxDeltas; ++next, ++args.count) {
      const LoraFactors& d = deltas[next];
      args.up[args.count] = static_cast<const float*>(d.up.data);
      args.down[args.count] = static_cast<const float*>(d.down.data);
      args.rank[args.count] = static_cast<int>(d.up.shape[1]);
      args.coefficient[args.count] = d.coefficient;
    }
    const bool resume = next > static_cast<size_t>(args.count);
    const bool finish = next == deltas.size();
    lora_merge_kernel<<<grid, block, 0, ctx.stream>>>(base.data, static_cast<int>(base.dtype),
                                                      static_cast<float*>(out.data), rows, cols, args, resume,
                                                      finish);
    HIPQ_HIP_RETURN_IF_LAUNCH_FAILED();
  } while (next < deltas.size());
  return Status::Ok();
}

}  // namespace hipq::kernels
