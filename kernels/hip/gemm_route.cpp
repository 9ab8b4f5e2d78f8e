#include "kernels/hip/gemm_route.h"

namespace hipq::kernels {
namespace {

constexpr int64_t kMaxTmaStride = int64_t{1} << 40;  // bytes, cuTensorMapEncodeTiled's bound
constexpr int kTf32TileN = 128;                      // gemm/gemm_tma_3xtf32.h: Tma3xTf32Shape::BN
constexpr int kFp8TileN = 128;                       // gemm/gemm_tma_fp8.h: TmaFp8Shape::BN

// Whether a plain 16-bit operand of `rows` rows, K wide, row stride ld and
// batch stride sb (elements) is one a (k, row, batch) tensor map describes
// (gemm/gemm_tma.h: encode_rows_map).
bool tma_rows_ok(int64_t ld, int64_t sb, int64_t rows, int64_t K, int64_t batch) {
  if (K <= 0 || rows <= 0 || ld < K || sb < 0) return false;
  const bool batched = batch > 1 && sb != 0;
  const int64_t row_bytes = ld * 2;
  const int64_t batch_bytes = batched ? sb * 2 : row_bytes * rows;
  return row_bytes % 16 == 0 && batch_bytes % 16 == 0 && row_bytes < kMaxTmaStride &&
         batch_bytes < kMaxTmaStride;
}

// Whether a plain K-major code matrix of `rows` rows, K wide, row stride ld
// (bytes) is one a (k, row, 1) tensor map describes (gemm/gemm_tma_fp8.h:
// encode_code_rows_map).
bool tma_code_rows_ok(int64_t ld, int64_t rows, int64_t K) {
  return K > 0 && rows > 0 && ld >= K && ld % 16 == 0 && ld * rows < kMaxTmaStride;
}

// Whether the split copies of fp32 operands (rows x ldk, ldk = K rounded up
// to 4) fit the 3xTF32 wgmma kernel's tensor maps and grid
// (gemm/gemm_tma_3xtf32.h: set_tf32_grid, encode_f32_rows_map).
bool tf32_wgmma_ok(const GemmProblem& p, int multiprocessors) {
  int blocks = 0;
  if (p.batch <= 0 || p.batch > 65535 || p.M <= 0 || p.N <= 0 || p.K <= 0 ||
      !tma_grid_blocks(p.batch, p.M, p.N, kTf32TileN, multiprocessors, blocks))
    return false;
  const int64_t row_bytes = (p.K + 3) / 4 * 4 * 4;
  return row_bytes * p.M < kMaxTmaStride && row_bytes * p.N < kMaxTmaStride;
}

}  // namespace

GemmRoute choose_gemm_route(const GemmProblem& p, const GemmDevice& d) {
  GemmRoute r;
  r.a_k_fast = p.a_sk == 1;
  r.b_k_fast = p.b_sk == 1 && p.b_sn != 1;
  // 16-bit operands of one dtype: the matrix-unit and packed-half kernels.
  const bool same_16bit = p.a_dtype == p.b_dtype && p.a_dtype != DType::kF32;
  const bool f16 = same_16bit && p.a_dtype == DType::kF16;
  if (same_16bit) {
    if (p.a_sk == 1) {
      if (gemm_plain(p.a_aligned16, p.a_sb, p.a_sm, p.K, 8)) r.a = {true, p.a_sm};
    } else if (p.a_sm == 1) {
      if (gemm_plain(p.a_aligned16, p.a_sb, p.a_sk, p.M, 8)) r.a = {true, p.a_sk};
    }
    if (r.b_k_fast) {
      if (gemm_plain(p.b_aligned16, p.b_sb, p.b_sn, p.K, 8)) r.b = {true, p.b_sn};
    } else if (p.b_sn == 1) {
      if (gemm_plain(p.b_aligned16, p.b_sb, p.b_sk, p.N, 8)) r.b = {true, p.b_sk};
    }
  }

  // Hopper: both operands K-major and plain -> warpgroup matrix instructions,
  // preferably fed by TMA. HIPQ_DOT2 keeps f16 on the packed-half kernel.
  if (d.wgmma && same_16bit && r.a_k_fast && r.b_k_fast && r.a.plain && r.b.plain && !(d.dot2_f16 && f16)) {
    r.geglu_fused = p.geglu_pairs;
    int blocks = 0;
    const int tile = d.gemm_tma > 0 ? d.gemm_tma : gemm_tma_tile_n(p.batch, p.M, p.N, d.multiprocessors);
    if (d.gemm_tma != 0 && p.M > 0 && p.N > 0 && p.K > 0 && p.batch > 0 && p.batch <= 65535 &&
        tma_grid_blocks(p.batch, p.M, p.N, tile, d.multiprocessors, blocks) &&
        tma_rows_ok(r.a.ld, p.a_sb, p.M, p.K, p.batch) && tma_rows_ok(r.b.ld, p.b_sb, p.N, p.K, p.batch)) {
      r.kernel = GemmKernel::kTmaWgmma;
      r.tile_n = tile;
    } else {
      r.kernel = GemmKernel::kWgmma;
    }
    return r;
  }
  // fp32 operands on the matrix units as 3xTF32 (unless HIPQ_FP32_MATH=fma).
  if (d.fp32_3xtf32 && p.a_dtype == DType::kF32 && p.b_dtype == DType::kF32) {
    r.kernel = d.wgmma && d.fp32_wgmma && tf32_wgmma_ok(p, d.multiprocessors) ? GemmKernel::kTf32Wgmma
                                                                              : GemmKernel::kTf32Mma;
    return r;
  }
  if (d.dot2_f16 && f16) {
    r.kernel = GemmKernel::kDot2;
    return r;
  }
  if (d.matrix_units && same_16bit) {
    r.kernel = GemmKernel::kMma;
    return r;
  }
  r.kernel = GemmKernel::kSimt;
  const int64_t big_blocks = ((p.M + 127) / 128) * ((p.N + 127) / 128) * p.batch;
  r.tile_n = big_blocks >= d.multiprocessors ? 128 : 64;
  return r;
}

GemmRoute choose_fp8_route(const GemmProblem& p, const GemmDevice& d) {
  GemmRoute r;
  r.a_k_fast = p.a_sk == 1;
  r.b_k_fast = p.b_sk == 1;
  r.geglu_fused = p.geglu_pairs;
  // 16-byte copies of 16 codes: K, the row strides and batch strides whole pieces.
  if (p.a_dtype == DType::kU8 && p.b_dtype == DType::kU8 && r.a_k_fast && r.b_k_fast &&
      gemm_plain(p.a_aligned16, p.a_sb, p.a_sm, p.K, 16))
    r.a = {true, p.a_sm};
  if (p.a_dtype == DType::kU8 && p.b_dtype == DType::kU8 && r.b_k_fast &&
      gemm_plain(p.b_aligned16, p.b_sb, p.b_sn, p.K, 16))
    r.b = {true, p.b_sn};
  if (!(d.fp8 && d.wgmma && r.a.plain && r.b.plain && p.K > 0 && p.batch <= 65535)) {
    r.kernel = GemmKernel::kFp8Simt;
    return r;
  }
  int blocks = 0;
  if (d.gemm_tma != 0 && p.batch == 1 && p.M > 0 && p.N > 0 &&
      tma_grid_blocks(1, p.M, p.N, kFp8TileN, d.multiprocessors, blocks) && tma_code_rows_ok(r.a.ld, p.M, p.K) &&
      tma_code_rows_ok(r.b.ld, p.N, p.K)) {
    r.kernel = GemmKernel::kFp8TmaWgmma;
    r.tile_n = kFp8TileN;
  } else {
    r.kernel = GemmKernel::kFp8Wgmma;
  }
  return r;
}

std::string fp8_refusal(bool vendor_nvidia, bool sm90a_build, int major, int minor, const std::string& device) {
  const std::string cc = std::to_string(major) + "." + std::to_string(minor);
  if (!vendor_nvidia)
    return "fp8 (e4m3) products need an NVIDIA Hopper GPU (compute capability 9.0); " + device +
           " is an AMD device without fp8 matrix instructions: use bf16 or fp16";
  if (major != 9 || minor != 0)
    return "fp8 (e4m3) products need an NVIDIA Hopper GPU (compute capability 9.0); " + device +
           " has compute capability " + cc + ": use bf16 or fp16";
  if (!sm90a_build)
    return std::string("fp8 (e4m3) products need a build for sm_90a (its wgmma instructions); this build has "
                       "none: rebuild with the default CUDA architectures, or use bf16 or fp16");
  return "";
}

const char* gemm_kernel_name(GemmKernel k) {
  switch (k) {
    case GemmKernel::kTmaWgmma:
      return "tma_wgmma";
    case GemmKernel::kWgmma:
      return "wgmma";
    case GemmKernel::kTf32Wgmma:
      return "3xtf32_wgmma";
    case GemmKernel::kTf32Mma:
      return "3xtf32_mma";
    case GemmKernel::kMma:
      return "mma";
    case GemmKernel::kDot2:
      return "dot2";
    case GemmKernel::kSimt:
      return "simt";
    case GemmKernel::kFp8TmaWgmma:
      return "fp8_tma_wgmma";
    case GemmKernel::kFp8Wgmma:
      return "fp8_wgmma";
    case GemmKernel::kFp8Simt:
      return "fp8_simt";
  }
  return "?";
}

}  // namespace hipq::kernels
