// Backend: the op library's one interface, implemented by `cpu` (host
// memory, always built, complete: every op, tiled and AVX2-dispatched where
// it is hot, the backend CPU-only runs use) and `hip` (AMD through ROCm,
// NVIDIA through kernels/hip/vendors/nvidia). Both are checked against the
// plain fp64 loops of tests/kernels/parity/reference_ops.cpp.
//
// Contract for every op:
//  - Inputs and outputs are Tensors whose memory this backend owns
//    (Location::kDevice for hip; kHost for cpu). Outputs are preallocated by
//    the caller with the exact output shape; ops never allocate per call
//    (scratch comes from the backend's pool, reused).
//  - Shapes, dtypes and locations are checked first; a mismatch returns
//    InvalidArgument naming the op, the operand and both shapes. Nothing is
//    launched then.
//  - Ops are asynchronous on the backend's single stream: no host
//    synchronisation inside an op, so a model step can be captured as a graph.
//    synchronize() waits; copy_to_host() waits for its own copy.
//  - f16/bf16 are storage types: accumulation is fp32 (fp64 for parity_sums).
//  - Input tensors may be strided views unless an op says "contiguous";
//    outputs must be contiguous.
// Thread safety: one Backend is used by one thread (one worker = one GPU =
// one stream). Distinct Backend objects are independent.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "kernels/tensor.h"

namespace hipq::kernels {

class Backend;

// Owning device (or host, for cpu) allocation, returned to its backend's pool
// when destroyed. Move-only. The Backend must outlive its Buffers.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend* owner, void* data, size_t bytes) : owner_(owner), data_(data), bytes_(bytes) {}
  ~Buffer();
  Buffer(Buffer&& o) noexcept;
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // A contiguous tensor over this buffer (checks that it fits).
  Tensor tensor(DType dtype, const std::vector<int64_t>& shape) const;
  // Where its memory is: the device's, or the host's (the cpu backend).
  Location location() const;

 private:
  Backend* owner_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

struct BackendInfo {
  std::string name;            // "cpu" | "hip"
  std::string device_name;     // "NVIDIA H200", "AMD Radeon RX 6800", "host CPU"
  std::string arch;            // "sm_90", "gfx1030", "x86_64"
  int device_index = 0;
  int64_t memory_bytes = 0;    // total device memory
  std::string runtime_version; // e.g. "CUDA runtime 13000" / "HIP 5.2.21153"
  std::string driver_version;
  int warp_size = 1;
  int multiprocessors = 0;
  double peak_fp32_tflops = 0; // 0 = unknown; for roofline percentages
  double peak_fp16_tflops = 0;
  double peak_bandwidth_gbs = 0;
  // How fp32 GEMM products (matmul, conv2d) are computed (kernels/fp32_math.h):
  // "3xTF32 split on tensor cores" or "fp32 FMA" on hip, "fp32" on cpu.
  std::string fp32_products;
  // How f16 products are computed (kernels/f16_math.h): "tensor cores
  // (wgmma), fp32 accumulate", "packed-half dot2 into fp32", ... on hip,
  // "fp32" on cpu.
  std::string f16_products;
  // Whether the backend keeps a rearranged copy of each constant 16-bit conv
  // weight it convolves with (hold_constant; the hip backend's Hopper conv),
  // which memory plans count.
  bool keeps_conv_weight_forms = false;
  // How matmul_fp8 computes ("e4m3 wgmma, fp32 accumulate", "e4m3 emulated
  // exactly, fp32 accumulate" on cpu), or "" when this device has no fp8
  // products; then fp8_refusal says why (the precision fp8 is refused with it).
  std::string fp8_products;
  std::string fp8_refusal;
  // Whether an fp32 conv with Conv2dOptions::upsample_x2 reads the half-size
  // input as it is (no upsampled copy made), which memory plans count.
  bool fp32_conv_reads_upsampled = false;
  // The same for an f16/bf16 conv.
  bool f16_conv_reads_upsampled = false;
};

// A backend's memory (Backend::memory_stats). Bytes are size-class bytes
// (what the pool hands out), not the bytes asked for.
struct MemoryStats {
  int64_t in_use = 0;        // handed out and not yet released
  int64_t cached = 0;        // released blocks the pool keeps (graph reservations included)
  int64_t peak = 0;          // highest in_use since reset_peak()
  int64_t limit = 0;         // the cap set by set_memory_limit; 0 = none
  int64_t device_total = 0;  // the device's memory (cpu: 0, not known)
  int64_t device_free = 0;   // free on the device as its driver says now (cpu: 0)
};

enum class Activation : uint8_t { kNone = 0, kGelu = 1, kGeluTanh = 2, kSilu = 3, kQuickGelu = 4 };
enum class UnaryOp : uint8_t { kGelu = 0, kGeluTanh = 1, kSilu = 2, kQuickGelu = 3, kNeg = 4, kExp = 5 };
enum class BinaryOp : uint8_t { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3 };

// out[b] = act(alpha * op(a[b]) @ op(b[b]) + bias) + residual[b]
//   a: [M, K] (or [K, M] if trans_a), optionally with a leading batch dim [B, ...]
//   b: [K, N] (or [N, K] if trans_b — a PyTorch Linear weight is [N, K])
//   bias: [N] or null; residual: same shape as out or null; out: [B?, M, N].
// A batch dim of 1 (or absent) on a or b broadcasts.
struct MatmulOptions {
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  const Tensor* bias = nullptr;
  const Tensor* residual = nullptr;
  Activation activation = Activation::kNone;  // applied before the residual add
  // GEGLU in the epilogue (diffusers' GEGLU after its projection, fused): the
  // product's N columns are (value, gate) pairs 2j, 2j + 1, bias included, and
  // out[..., j] = value * gelu(gate) (erf GELU), so out has N / 2 columns (N
  // even). No activation, no residual. The weight rows come interleaved so
  // (ParamLayout::kInterleavedHalves; engine/models/layers.h, Geglu).
  bool geglu_pairs = false;
};

// The conditions MatmulOptions puts on a product of N columns, checked alike
// by every backend: InvalidArgument naming b when geglu_pairs meets an odd N,
// a residual or an activation.
Status check_matmul_options(const MatmulOptions& o, int64_t N, const Tensor& b);

// An fp8 (e4m3) operand of matmul_fp8 (kernels/fp8_e4m3.h, docs/kernels.md
// "fp8"): codes [R, K] u8 (e4m3 bit patterns, contiguous, K-major) and
// scales [R] f32, the dequantization factor of each row, as
// quantize_fp8_rows writes them. Views; the caller owns the memory.
struct Fp8Rows {
  Tensor codes;
  Tensor scales;
};

// An fp8 convolution weight (conv2d_fp8, docs/kernels.md "fp8"): codes
// [O, kh, kw, Cp] u8, taps before channels, each tap's C input channels
// followed by Cp - C zero codes (Cp = fp8_conv_channels(C): whole k-tiles of
// the e4m3 kernels), contiguous; scales [O] f32, one an output channel. Made
// by quantize_fp8_rows of the 16-bit weight in that layout seen as
// [O, kh * kw * Cp] (the zeros change no amax). Views; the caller owns the
// memory.
struct Fp8ConvWeight {
  Tensor codes;
  Tensor scales;
};
inline constexpr int64_t kFp8ConvChannelBlock = 128;
inline constexpr int64_t fp8_conv_channels(int64_t c) {
  return (c + kFp8ConvChannelBlock - 1) / kFp8ConvChannelBlock * kFp8ConvChannelBlock;
}

// The shape and dtype conditions of quantize_fp8_rows and matmul_fp8, alike
// on every backend (locations are each backend's own check): InvalidArgument
// naming the op, the operand and the shapes.
Status check_quantize_fp8_rows(const Tensor& x, const Tensor& codes, const Tensor& scales);
// layer_norm_fp8's: quantize_fp8_rows' with x contiguous.
Status check_layer_norm_fp8(const Tensor& x, const Tensor& codes, const Tensor& scales);
Status check_matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, const Tensor& out, const MatmulOptions& o);
struct Conv2dOptions;
Status check_conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, const Tensor& y, const Conv2dOptions& o);

// One low-rank delta of lora_merge (a LoRA pair on one weight): up [O, r]
// and down [r, I], f32, contiguous, and its coefficient (scale * alpha / r).
// Views; the caller owns the memory.
struct LoraFactors {
  Tensor up;
  Tensor down;
  float coefficient = 0.0f;
};

// The shape and dtype conditions of lora_merge, alike on every backend
// (locations are each backend's own check): InvalidArgument naming the
// operand, the delta and the shapes.
Status check_lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, const Tensor& out);

// y = conv2d(x, w) + bias (+ residual), NCHW. x: [N, C, H, W]; w: [O, C, kh, kw];
// bias: [O] or null; y: [N, O, Ho, Wo]. Implicit GEMM: no full im2col buffer.
struct Conv2dOptions {
  int stride = 1;
  int padding = 0;
  const Tensor* bias = nullptr;
  const Tensor* residual = nullptr;  // [N, O, Ho, Wo] or null
  // The conv reads x as its nearest 2x upsample (upsample_nearest2x): it sees
  // [N, C, 2H, 2W] without that tensor being made, and y, Ho and Wo are those
  // of the upsampled input. Every output is the same sum as the conv of the
  // upsampled tensor (Upsample2D: one full-size activation fewer).
  bool upsample_x2 = false;
};

// x: [N, C, *] (any trailing spatial dims, contiguous); gamma, beta: [C].
struct GroupNormOptions {
  int groups = 32;
  float eps = 1e-5f;
  bool fuse_silu = false;
};

// Fused attention, flash style (online softmax, no N×N matrix in memory).
// q: [B, Sq, H*D], k: [B, Sk, H*D], v: [B, Sk, H*D] (strided views allowed on
// the last-but-one dim), out: [B, Sq, H*D]. scale defaults to 1/sqrt(D) when 0.
struct AttentionOptions {
  int heads = 1;
  float scale = 0.0f;
  bool causal = false;  // query i attends keys j <= i (+ Sk - Sq offset)
};

// Sinusoidal embedding of timesteps t: [N] f32 -> out [N, dim], as diffusers'
// get_timestep_embedding(t, dim, flip_sin_to_cos, downscale_freq_shift, 1, max_period).
struct TimestepEmbeddingOptions {
  int dim = 320;
  bool flip_sin_to_cos = true;
  float downscale_freq_shift = 0.0f;
  float max_period = 10000.0f;
};

// Sums for parity metrics, accumulated in fp64 over two same-shape tensors.
struct ParitySums {
  double dot = 0;         // sum a*b
  double norm_a2 = 0;     // sum a*a
  double norm_b2 = 0;     // sum b*b
  double sum_sq_diff = 0; // sum (a-b)^2
  double max_abs_diff = 0;
  int64_t nonfinite_a = 0;  // count of NaN/Inf in a
  int64_t nonfinite_b = 0;
  int64_t count = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const BackendInfo& info() const = 0;

  // ---- memory, copies, sync, timing ---------------------------------------
  // From a pool: freed blocks are reused by size class; no OS call per op.
  virtual Result<Buffer> allocate(size_t bytes) = 0;
  // Used by ~Buffer; do not call directly.
  virtual void release(void* data, size_t bytes) = 0;
  virtual Status copy_to_device(const void* host, void* device, size_t bytes) = 0;
  virtual Status copy_to_host(const void* device, void* host, size_t bytes) = 0;  // waits
  virtual Status copy_device(const void* src, void* dst, size_t bytes) = 0;
  virtual Status memset_zero(void* device, size_t bytes) = 0;
  virtual Status synchronize() = 0;
  // Timing with device events: record() returns an id; elapsed_ms(a, b)
  // synchronises on b. The cpu backend uses the host clock.
  virtual Result<int> record_event() = 0;
  virtual Result<double> elapsed_ms(int start_event, int end_event) = 0;
  virtual int64_t bytes_in_use() const = 0;
  virtual int64_t peak_bytes() const = 0;
  virtual void reset_peak() = 0;
  // What this backend holds of its device's memory and what the device has
  // (docs/memory.md). in_use + cached is what the process takes from the
  // device for tensors; the runtime's own context comes on top.
  virtual MemoryStats memory_stats() const = 0;
  // The bytes a request of `bytes` takes from the pool (its size class).
  virtual size_t block_bytes(size_t bytes) const = 0;
  // Caps what this backend holds (in_use + cached, graph reservations
  // included) at `bytes`; 0 removes the cap. An allocation past the cap first
  // returns the cached blocks to the device, then fails with
  // ResourceExhausted as a real out-of-memory would (ops with a lower-memory
  // route take it then). InvalidArgument for a negative cap.
  // make_backend() sets it from HIPQ_DEVICE_MEMORY_LIMIT.
  virtual Status set_memory_limit(int64_t bytes) = 0;
  // Returns the cached free blocks to the device (not those reserved for a
  // live graph); waits for the stream first.
  virtual Status trim_cache() = 0;
  // Forgets every form derived from constant blocks (hold_constant); an op
  // makes a form again on its next use. Default: nothing is kept.
  virtual void drop_constant_forms() {}
  // The caller promises that the block at `data` (from allocate(), `bytes`
  // long) does not change until it is released: a backend may keep forms
  // derived from it once (the hip backend: conv weights in the layout of its
  // matrix-unit conv) instead of deriving them on every op. The weight loader
  // calls it for every parameter. Default: ignored.
  virtual void hold_constant(const void* /*data*/, size_t /*bytes*/) {}
  // The held block at `data` was written again (a LoRA switch rewrites a
  // weight in place, engine/lora/lora_rebind.h): the forms derived from it
  // are dropped (an op makes them again from the new bytes on its next use)
  // and it stays constant. Call after the write is complete on the stream.
  // Default: nothing is kept.
  virtual void constant_changed(const void* /*data*/) {}

  // Graph capture: the ops enqueued between begin_capture() and end_capture()
  // are recorded, not run; end_capture() returns an id whose replay_graph()
  // enqueues the same kernels again on the stream, reading and writing the
  // same addresses (update inputs in place with copy_to_device before a
  // replay). Every block the capture touched (allocated or released while
  // capturing) is reserved for the graph until destroy_graph(): later
  // allocations never alias its temporaries. Buffers the graph reads that
  // were allocated before the capture must outlive destroy_graph(). Nothing
  // may synchronise the host while capturing (copy_to_host, parity_sums,
  // elapsed_ms). Backends without graphs (cpu) return Unimplemented and
  // callers run eagerly.
  virtual Status begin_capture() { return Status::Unimplemented("graph capture is not supported by " + info().name); }
  virtual Result<int> end_capture() { return Status::Unimplemented("graph capture is not supported by " + info().name); }
  virtual Status replay_graph(int /*id*/) {
    return Status::Unimplemented("graph replay is not supported by " + info().name);
  }
  virtual void destroy_graph(int /*id*/) {}

  // ---- ops (one file per op per backend: kernels/<backend>/<op>.*) --------
  virtual Status matmul(const Tensor& a, const Tensor& b, Tensor& out, const MatmulOptions& o) = 0;
  // ---- fp8 linear layers (docs/kernels.md, "fp8") ----
  // Row-wise dynamic e4m3 quantization (torchao's rowwise recipe): x [R, K]
  // f32/f16/bf16 (rows may be strided, K unit-stride) -> codes [R, K] u8
  // (contiguous) and scales [R] f32 (contiguous): s_r = f32(448 / max(amax_r,
  // 1e-12)), codes = e4m3(x * s_r) rounded to nearest even with saturation,
  // scales[r] = f32(1 / s_r). Bit-identical on every backend.
  virtual Status quantize_fp8_rows(const Tensor& x, Tensor& codes, Tensor& scales) = 0;
  // A LayerNorm feeding an fp8 Linear, its output never written in 16 bits:
  // the codes and scales quantize_fp8_rows gives of layer_norm(x, gamma,
  // beta, eps) rounded to x's dtype, byte for byte. x [R, D] f32/f16/bf16
  // contiguous; gamma / beta as layer_norm's; codes [R, D] u8, scales [R] f32.
  virtual Status layer_norm_fp8(const Tensor& x, const Tensor* gamma, const Tensor* beta, float eps, Tensor& codes,
                                Tensor& scales) = 0;
  // out[m, n] = epilogue(a.scales[m] * b.scales[n] * sum_k e4m3(a[m, k]) e4m3(b[n, k])),
  // the sum in fp32 (fp64 on cpu: exact products, one rounding), then alpha,
  // bias, activation, residual or geglu_pairs as matmul's epilogue (o).
  // a: [M, K] rows, b: [N, K] rows (a Linear weight), both K-major; o.trans_b
  // must be set and o.trans_a not (the layout 8-bit wgmma reads). out [M, N]
  // (N / 2 with geglu_pairs) f32/f16/bf16 contiguous; bias [N], residual
  // out's shape, both out's dtype. FailedPrecondition (fp8_refusal) on a
  // device without fp8 products.
  virtual Status matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, Tensor& out, const MatmulOptions& o) = 0;
  // ---- LoRA merge (engine/lora/, docs/adapters.md) ----
  // out[o, i] = f32(base[o, i]) + acc[o, i], where acc starts at 0 and takes,
  // for each delta in the order given and k = 0, 1, ..., r - 1 in turn,
  // acc += (coefficient * up[o, k]) * down[k, i]: every product and sum
  // rounded to fp32 on its own (no fused multiply-add), so every backend
  // gives the same bits (the host merge's, engine/lora/lora_merge.h).
  // base [O, I] f32/f16/bf16, contiguous (a conv kernel [O, C, kh, kw] seen as
  // [O, C * kh * kw]); out [O, I] f32, contiguous; no deltas: out = base.
  virtual Status lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, Tensor& out) = 0;
  virtual Status conv2d(const Tensor& x, const Tensor& w, Tensor& y, const Conv2dOptions& o) = 0;
  // conv2d with both operands in e4m3 (docs/kernels.md "fp8"): x [N, C, H, W]
  // f16/bf16, contiguous, is quantized per image (the rule of
  // quantize_fp8_rows over each image's C * H * W values: one scale s_n an
  // image, so no image's result depends on another's); w its Fp8ConvWeight.
  // y[n, o, p] = round(acc * w.scales[o] * s_n + bias[o] (+ residual)), acc
  // the fp32 sum over taps and channels of the e4m3 products (fp64 on cpu).
  // Stride 1 only (padding and upsample_x2 as conv2d); y, bias, residual in
  // x's dtype. FailedPrecondition (fp8_refusal) on a device without fp8
  // products.
  virtual Status conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, Tensor& y, const Conv2dOptions& o) = 0;
  virtual Status group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                            const GroupNormOptions& o) = 0;
  // Over the last dim; gamma/beta [D] (either may be null for no affine).
  virtual Status layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, Tensor& y,
                            float eps) = 0;
  // Over the last dim of x (scaled by `scale` first), optional causal mask
  // on the last two dims.
  virtual Status softmax(const Tensor& x, Tensor& y, float scale, bool causal) = 0;
  virtual Status attention(const Tensor& q, const Tensor& k, const Tensor& v, Tensor& out,
                           const AttentionOptions& o) = 0;
  virtual Status unary(UnaryOp op, const Tensor& x, Tensor& y) = 0;
  // x: [..., 2F] -> y: [..., F] = x[..., :F] * gelu(x[..., F:]) (diffusers GEGLU).
  virtual Status geglu(const Tensor& x, Tensor& y) = 0;
  // y = a (op) b, b broadcast to a's shape (numpy rules, b's dims right-aligned).
  virtual Status binary(BinaryOp op, const Tensor& a, const Tensor& b, Tensor& y) = 0;
  // y = alpha * x + beta (elementwise).
  virtual Status scale(const Tensor& x, Tensor& y, float alpha, float beta) = 0;
  // Concatenate along `dim`; all inputs equal except that dim.
  virtual Status concat(std::span<const Tensor> xs, int dim, Tensor& y) = 0;
  // [N, C, H, W] -> [N, C, 2H, 2W], nearest.
  virtual Status upsample_nearest2x(const Tensor& x, Tensor& y) = 0;
  virtual Status timestep_embedding(const Tensor& t, Tensor& y, const TimestepEmbeddingOptions& o) = 0;
  // ids: [N...] i32/i64, table: [V, D] -> y: [N..., D]. Out-of-range ids: InvalidArgument
  // on cpu; clamped (and reported by the harness) on hip.
  virtual Status embedding(const Tensor& ids, const Tensor& table, Tensor& y) = 0;
  // Strided copy with dtype conversion: the layout transforms (permute,
  // NCHW <-> NHWC, make contiguous) and casts f32 <-> f16 <-> bf16.
  virtual Status copy(const Tensor& src, Tensor& dst) = 0;
  virtual Status fill(Tensor& y, float value) = 0;
  virtual Result<ParitySums> parity_sums(const Tensor& a, const Tensor& b) = 0;
};

// Names of the backends compiled into this build ("cpu", and "hip" when built
// with HIPQ_GPU=amd|nvidia).
std::vector<std::string> available_backends();
// Number of visible GPUs for the hip backend (0 when none or not built).
int gpu_device_count();
// "cpu" or "hip" with a device index. NotFound when the name is unknown or not
// built; Unavailable when the device is not there. The memory cap of
// HIPQ_DEVICE_MEMORY_LIMIT (a size as base/byte_size.h reads it, "" or unset:
// none) is set on the new backend; InvalidArgument naming the variable when
// it is not a size.
Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int device = 0);
// The environment variable make_backend() reads the memory cap from.
inline constexpr const char* kDeviceMemoryLimitEnv = "HIPQ_DEVICE_MEMORY_LIMIT";

}  // namespace hipq::kernels
