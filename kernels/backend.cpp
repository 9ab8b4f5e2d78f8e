#include "kernels/backend.h"

#include <cstdlib>
#include <string>

#include "base/byte_size.h"
#include "kernels/cpu/cpu_backend.h"
#if HIPQ_HAVE_GPU
#include "kernels/hip/hip_backend.h"
#endif

namespace hipq::kernels {

Buffer::~Buffer() {
  if (owner_ && data_) owner_->release(data_, bytes_);
}

Buffer::Buffer(Buffer&& o) noexcept : owner_(o.owner_), data_(o.data_), bytes_(o.bytes_) {
  o.owner_ = nullptr;
  o.data_ = nullptr;
  o.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (owner_ && data_) owner_->release(data_, bytes_);
    owner_ = o.owner_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.owner_ = nullptr;
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

Location Buffer::location() const {
  return (owner_ && owner_->info().name != "cpu") ? Location::kDevice : Location::kHost;
}

Tensor Buffer::tensor(DType dtype, const std::vector<int64_t>& shape) const {
  Tensor t = Tensor::contiguous(data_, dtype, shape, location());
  HIPQ_CHECK(t.nbytes() <= bytes_);
  return t;
}

std::vector<std::string> available_backends() {
#if HIPQ_HAVE_GPU
  return {"cpu", "hip"};
#else
  return {"cpu"};
#endif
}

int gpu_device_count() {
#if HIPQ_HAVE_GPU
  return hip_device_count();
#else
  return 0;
#endif
}

Status check_matmul_options(const MatmulOptions& o, int64_t N, const Tensor& b) {
  if (o.geglu_pairs && (N % 2 != 0 || o.residual || o.activation != Activation::kNone))
    return Status::InvalidArgument("matmul: geglu_pairs needs an even N (got " + std::to_string(N) +
                                   "), no residual and no activation; b " + b.describe());
  return Status::Ok();
}

namespace {

Status fp8_invalid(const char* op, const std::string& what) {
  return Status::InvalidArgument(std::string(op) + ": " + what);
}

// codes [R, K] u8 contiguous and scales [R] f32 contiguous.
Status check_fp8_rows(const char* op, const char* name, const Fp8Rows& r) {
  const Tensor& c = r.codes;
  const Tensor& s = r.scales;
  if (c.dtype != DType::kU8 || c.ndim != 2 || !c.is_contiguous())
    return fp8_invalid(op, std::string(name) + ".codes " + c.describe() + " must be [rows, K] u8 (e4m3 codes), contiguous");
  if (s.dtype != DType::kF32 || s.ndim != 1 || s.shape[0] != c.shape[0] || !s.is_contiguous())
    return fp8_invalid(op, std::string(name) + ".scales " + s.describe() + " must be [" + std::to_string(c.shape[0]) +
                               "] f32, contiguous, one per row of " + name + ".codes " + c.describe());
  return Status::Ok();
}

}  // namespace

namespace {
// quantize_fp8_rows' conditions, errors naming `op` (it or layer_norm_fp8).
Status check_rows_to_codes(const char* op, const Tensor& x, const Tensor& codes, const Tensor& scales) {
  if (x.ndim != 2 || !(x.dtype == DType::kF32 || x.dtype == DType::kF16 || x.dtype == DType::kBF16) ||
      (x.shape[1] > 1 && x.stride[1] != 1))
    return fp8_invalid(op, "x " + x.describe() + " must be [rows, K] f32/f16/bf16 with unit stride along K");
  Fp8Rows r{codes, scales};
  HIPQ_RETURN_IF_ERROR(check_fp8_rows(op, "out", r));
  if (codes.shape[0] != x.shape[0] || codes.shape[1] != x.shape[1])
    return fp8_invalid(op, "codes " + codes.describe() + " must have x's shape: x " + x.describe());
  return Status::Ok();
}
}  // namespace

Status check_quantize_fp8_rows(const Tensor& x, const Tensor& codes, const Tensor& scales) {
  return check_rows_to_codes("quantize_fp8_rows", x, codes, scales);
}

Status check_layer_norm_fp8(const Tensor& x, const Tensor& codes, const Tensor& scales) {
  if (!x.is_contiguous()) return fp8_invalid("layer_norm_fp8", "x " + x.describe() + " must be contiguous");
  return check_rows_to_codes("layer_norm_fp8", x, codes, scales);
}

Status check_matmul_fp8(const Fp8Rows& a, const Fp8Rows& b, const Tensor& out, const MatmulOptions& o) {
  constexpr const char* op = "matmul_fp8";
  HIPQ_RETURN_IF_ERROR(check_fp8_rows(op, "a", a));
  HIPQ_RETURN_IF_ERROR(check_fp8_rows(op, "b", b));
  if (o.trans_a || !o.trans_b)
    return fp8_invalid(op, "a is [M, K] and b [N, K] (both K-major): set trans_b and not trans_a");
  const int64_t M = a.codes.shape[0], K = a.codes.shape[1], N = b.codes.shape[0];
  if (b.codes.shape[1] != K)
    return fp8_invalid(op, "inner dims differ: a.codes " + a.codes.describe() + " has K = " + std::to_string(K) +
                               ", b.codes " + b.codes.describe() + " has K = " + std::to_string(b.codes.shape[1]));
  HIPQ_RETURN_IF_ERROR(check_matmul_options(o, N, b.codes));
  const int64_t out_n = o.geglu_pairs ? N / 2 : N;
  if (!(out.dtype == DType::kF32 || out.dtype == DType::kF16 || out.dtype == DType::kBF16) || out.ndim != 2 ||
      out.shape[0] != M || out.shape[1] != out_n || !out.is_contiguous())
    return fp8_invalid(op, "out " + out.describe() + " must be [" + std::to_string(M) + ", " + std::to_string(out_n) +
                               "] f32/f16/bf16, contiguous" + (o.geglu_pairs ? " (geglu_pairs halves N)" : ""));
  if (o.bias && (o.bias->dtype != out.dtype || o.bias->ndim != 1 || o.bias->shape[0] != N))
    return fp8_invalid(op, "bias " + o.bias->describe() + " must be [" + std::to_string(N) + "] in out's dtype (out " +
                               out.describe() + ")");
  if (o.residual && (o.residual->dtype != out.dtype || !o.residual->same_shape(out)))
    return fp8_invalid(op, "residual " + o.residual->describe() + " must have out's shape and dtype: out " +
                               out.describe());
  return Status::Ok();
}

Status check_conv2d_fp8(const Tensor& x, const Fp8ConvWeight& w, const Tensor& y, const Conv2dOptions& o) {
  constexpr const char* op = "conv2d_fp8";
  if (x.ndim != 4 || !(x.dtype == DType::kF16 || x.dtype == DType::kBF16) || !x.is_contiguous())
    return fp8_invalid(op, "x " + x.describe() + " must be [N, C, H, W] f16/bf16, contiguous");
  const Tensor& c = w.codes;
  const int64_t C = x.shape[1];
  if (c.dtype != DType::kU8 || c.ndim != 4 || !c.is_contiguous() || c.shape[3] != fp8_conv_channels(C))
    return fp8_invalid(op, "w.codes " + c.describe() + " must be [O, kh, kw, " +
                               std::to_string(fp8_conv_channels(C)) + "] u8, contiguous: the taps of x's " +
                               std::to_string(C) + " channels padded to whole blocks of " +
                               std::to_string(kFp8ConvChannelBlock) + " (x " + x.describe() + ")");
  const int64_t O = c.shape[0], KH = c.shape[1], KW = c.shape[2];
  if (w.scales.dtype != DType::kF32 || w.scales.ndim != 1 || w.scales.shape[0] != O ||
      !w.scales.is_contiguous())
    return fp8_invalid(op, "w.scales " + w.scales.describe() + " must be [" + std::to_string(O) +
                               "] f32, contiguous, one per output channel of w.codes " + c.describe());
  if (o.stride != 1 || o.padding < 0)
    return fp8_invalid(op, "stride " + std::to_string(o.stride) + ", padding " + std::to_string(o.padding) +
                               ": only stride 1 and padding >= 0 (a strided conv runs as conv2d)");
  const int up = o.upsample_x2 ? 1 : 0;
  const int64_t H = x.shape[2] << up, W = x.shape[3] << up;
  const int64_t Ho = H + 2 * o.padding - KH + 1, Wo = W + 2 * o.padding - KW + 1;
  if (KH <= 0 || KW <= 0 || Ho <= 0 || Wo <= 0 || y.ndim != 4 || y.dtype != x.dtype || !y.is_contiguous() ||
      y.shape[0] != x.shape[0] || y.shape[1] != O || y.shape[2] != Ho || y.shape[3] != Wo)
    return fp8_invalid(op, "y " + y.describe() + " must be [" + std::to_string(x.shape[0]) + ", " +
                               std::to_string(O) + ", " + std::to_string(Ho) + ", " + std::to_string(Wo) +
                               "] in x's dtype, contiguous (x " + x.describe() + ", w.codes " + c.describe() +
                               ")");
  if (o.bias &&
      (o.bias->dtype != y.dtype || o.bias->ndim != 1 || o.bias->shape[0] != O || !o.bias->is_contiguous()))
    return fp8_invalid(op, "bias " + o.bias->describe() + " must be [" + std::to_string(O) +
                               "] in y's dtype (y " + y.describe() + ")");
  if (o.residual &&
      (o.residual->dtype != y.dtype || !o.residual->same_shape(y) || !o.residual->is_contiguous()))
    return fp8_invalid(op, "residual " + o.residual->describe() +
                               " must have y's shape and dtype, contiguous: y " + y.describe());
  return Status::Ok();
}

Status check_lora_merge(const Tensor& base, std::span<const LoraFactors> deltas, const Tensor& out) {
  auto invalid = [](const std::string& what) { return Status::InvalidArgument("lora_merge: " + what); };
  if (base.ndim != 2 || !(base.dtype == DType::kF32 || base.dtype == DType::kF16 || base.dtype == DType::kBF16) ||
      !base.is_contiguous())
    return invalid("base " + base.describe() + " must be [O, I] f32/f16/bf16, contiguous");
  const int64_t O = base.shape[0], I = base.shape[1];
  if (out.ndim != 2 || out.dtype != DType::kF32 || out.shape[0] != O || out.shape[1] != I || !out.is_contiguous())
    return invalid("out " + out.describe() + " must be [" + std::to_string(O) + ", " + std::to_string(I) +
                   "] f32, contiguous (base " + base.describe() + ")");
  for (size_t l = 0; l < deltas.size(); ++l) {
    const Tensor& up = deltas[l].up;
    const Tensor& down = deltas[l].down;
    const std::string which = "delta " + std::to_string(l) + ": ";
    if (up.ndim != 2 || up.dtype != DType::kF32 || !up.is_contiguous() || up.shape[0] != O)
      return invalid(which + "up " + up.describe() + " must be [" + std::to_string(O) + ", r] f32, contiguous");
    if (down.ndim != 2 || down.dtype != DType::kF32 || !down.is_contiguous() || down.shape[0] != up.shape[1] ||
        down.shape[1] != I)
      return invalid(which + "down " + down.describe() + " must be [" + std::to_string(up.shape[1]) + ", " +
                     std::to_string(I) + "] f32, contiguous (up " + up.describe() + ")");
  }
  return Status::Ok();
}

namespace {

Result<std::unique_ptr<Backend>> with_env_limit(Result<std::unique_ptr<Backend>> made) {
  if (!made.ok()) return made;
  const char* env = std::getenv(kDeviceMemoryLimitEnv);
  if (env == nullptr || *env == '\0') return made;
  auto limit = parse_byte_size(env);
  if (!limit.ok()) return limit.status().WithContext(kDeviceMemoryLimitEnv);
  HIPQ_RETURN_IF_ERROR((*made)->set_memory_limit(*limit));
  return made;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_backend(std::string_view name, int device) {
  if (name == "cpu") return with_env_limit(make_cpu_backend());
  if (name == "hip") {
#if HIPQ_HAVE_GPU
    return with_env_limit(make_hip_backend(device));
#else
    return Status::NotFound("backend 'hip' is not built into this binary (configure with -DHIPQ_GPU=amd or -DHIPQ_GPU=nvidia)");
#endif
  }
  return Status::NotFound("unknown backend '" + std::string(name) + "' (available: cpu" +
#if HIPQ_HAVE_GPU
                          std::string(", hip") +
#else
                          std::string() +
#endif
                          ")");
}

}  // namespace hipq::kernels
