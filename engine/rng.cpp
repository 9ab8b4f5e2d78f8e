#include "engine/rng.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace hipq::engine {
namespace {

// torch's at::mt19937 is the standard engine seeded with the low 32 bits.
class TorchCpuGenerator {
 public:
  explicit TorchCpuGenerator(uint64_t seed) : engine_(static_cast<uint32_t>(seed & 0xffffffffu)) {}
  uint32_t random() { return static_cast<uint32_t>(engine_()); }
  uint64_t random64() {
    const uint64_t hi = random();
    const uint64_t lo = random();
    return (hi << 32) | lo;
  }
  // at::uniform_real_distribution<float>(0, 1): 24 random bits.
  float uniform_float() { return static_cast<float>(random() & ((1u << 24) - 1)) * (1.0f / (1u << 24)); }
  // at::uniform_real_distribution<double>(0, 1): 53 random bits.
  double uniform_double() {
    return static_cast<double>(random64() & ((uint64_t{1} << 53) - 1)) * (1.0 / static_cast<double>(uint64_t{1} << 53));
  }
  // at::normal_distribution<double>(0, 1) with the generator's cached second sample.
  double normal_double() {
    if (has_cached_) {
      has_cached_ = false;
      return cached_;
    }
    const double u1 = uniform_double();
    const double u2 = uniform_double();
    const double r = std::sqrt(-2.0 * std::log1p(-u2));
    const double theta = 2.0 * M_PI * u1;
    cached_ = r * std::sin(theta);
    has_cached_ = true;
    return r * std::cos(theta);
  }

 private:
  std::mt19937 engine_;
  bool has_cached_ = false;
  double cached_ = 0;
};

float bits_to_float(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t float_to_bits(float f) { return std::bit_cast<uint32_t>(f); }

// Scalar transcriptions of the Cephes-style log and sincos that torch's AVX2
// normal kernel uses (avx_mathfun.h), one lane at a time, with the same fp32
// operation order so every rounding matches. torch's build lets the compiler
// fuse multiply-adds (-mfma, contraction on); the std::fma calls mark exactly
// the pairs it fuses, established against torch's output over 2^18 samples.
float cephes_logf(float x) {
  const bool invalid = !(x > 0.0f);
  x = std::max(x, bits_to_float(0x00800000u));
  int32_t e_int = static_cast<int32_t>(float_to_bits(x) >> 23);
  x = bits_to_float((float_to_bits(x) & ~0x7f800000u) | float_to_bits(0.5f));
  e_int -= 0x7f;
  float e = static_cast<float>(e_int);
  e = e + 1.0f;
  const bool mask = x < 0.707106781186547524f;
  const float tmp = mask ? x : 0.0f;
  x = x - 1.0f;
  e = e - (mask ? 1.0f : 0.0f);
  x = x + tmp;
  const float z = x * x;
  float y = 7.0376836292E-2f;
  y = std::fma(y, x, -1.1514610310E-1f);
  y = std::fma(y, x, 1.1676998740E-1f);
  y = std::fma(y, x, -1.2420140846E-1f);
  y = std::fma(y, x, 1.4249322787E-1f);
  y = std::fma(y, x, -1.6668057665E-1f);
  y = std::fma(y, x, 2.0000714765E-1f);
  y = std::fma(y, x, -2.4999993993E-1f);
  y = std::fma(y, x, 3.3333331174E-1f);
  y = y * x;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = std::fma(-z, 0.5f, y);
  x = x + y;
  x = std::fma(e, 0.693359375f, x);
  return invalid ? bits_to_float(0xffffffffu) : x;
}

void cephes_sincosf(float xin, float* s, float* c) {
  uint32_t sign_bit_sin = float_to_bits(xin) & 0x80000000u;
  float x = bits_to_float(float_to_bits(xin) & 0x7fffffffu);
  float y = x * 1.27323954473516f;
  int32_t j = static_cast<int32_t>(y);  // truncation, as cvttps
  j = (j + 1) & ~1;
  y = static_cast<float>(j);
  const uint32_t swap_sign_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool poly_mask = (j & 2) == 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const int32_t j4 = j - 2;
  const uint32_t sign_bit_cos = static_cast<uint32_t>(~j4 & 4) << 29;
  sign_bit_sin ^= swap_sign_sin;

  const float z = x * x;
  float yc = 2.443315711809948E-005f;
  yc = std::fma(yc, z, -1.388731625493765E-003f);
  yc = std::fma(yc, z, 4.166664568298827E-002f);
  yc = yc * z;
  yc = std::fma(yc, z, -(z * 0.5f));
  yc = yc + 1.0f;

  float ys = -1.9515295891E-4f;
  ys = std::fma(ys, z, 8.3321608736E-3f);
  ys = std::fma(ys, z, -1.6666654611E-1f);
  ys = ys * z;
  ys = std::fma(ys, x, x);

  const float sin_v = poly_mask ? ys : yc;
  const float cos_v = poly_mask ? yc : ys;
  *s = bits_to_float(float_to_bits(sin_v) ^ sign_bit_sin);
  *c = bits_to_float(float_to_bits(cos_v) ^ sign_bit_cos);
}

// normal_fill_16_AVX2 for mean 0, std 1: data[0..8) and data[8..16) become
// the cosine and sine halves of eight Box-Muller pairs.
void normal_fill_16(float* data) {
  const float two_pi = static_cast<float>(2.0f * M_PI);
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j];
    const float u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * cephes_logf(u1));
    const float theta = two_pi * u2;
    float st, ct;
    cephes_sincosf(theta, &st, &ct);
    // _mm256_fmadd_ps(n, std=1, mean=0): n * 1 + 0, which is n except that a
    // -0 (u1 == 1 gives radius -0) becomes +0.
    data[j] = radius * ct + 0.0f;
    data[j + 8] = radius * st + 0.0f;
  }
}

}  // namespace

Result<RngKind> parse_rng_kind(std::string_view name) {
  if (name == "torch-cpu") return RngKind::kTorchCpu;
  if (name == "torch-cuda") return RngKind::kTorchCuda;
  return Status::InvalidArgument("unknown rng '" + std::string(name) + "' (expected torch-cpu or torch-cuda)");
}

std::string_view rng_kind_name(RngKind kind) { return kind == RngKind::kTorchCpu ? "torch-cpu" : "torch-cuda"; }

namespace {

// torch's CPU normal_kernel for any dtype: below 16 elements the serial path
// (one double Box-Muller sample per element, stored through `store`); else
// every element first gets a uniform, blocks of 16 become Box-Muller pairs
// (`fill16`), and when numel is not a multiple of 16 the last 16 values
// (overlapping finished ones) are redrawn from fresh uniforms.
template <class Store, class Uniform, class Fill16>
std::vector<float> torch_normal_fill(TorchCpuGenerator& gen, int64_t numel, Store store, Uniform uniform,
                                     Fill16 fill16) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(numel, 0)));
  if (numel <= 0) return out;
  if (numel < 16) {
    for (auto& v : out) v = store(gen.normal_double());
    return out;
  }
  for (auto& v : out) v = uniform(gen);
  for (int64_t i = 0; i + 16 <= numel; i += 16) fill16(out.data() + i);
  if (numel % 16 != 0) {
    float* tail = out.data() + numel - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform(gen);
    fill16(tail);
  }
  return out;
}

std::vector<float> randn_cpu_f32(TorchCpuGenerator& gen, int64_t numel) {
  return torch_normal_fill(
      gen, numel, [](double v) { return static_cast<float>(v); },
      [](TorchCpuGenerator& g) { return g.uniform_float(); }, normal_fill_16);
}

// ---- torch.randn in float16 / bfloat16 on the CPU generator -----------------

// c10::Half / c10::BFloat16 as torch's normal_fill_16<scalar_t> uses them:
// storage rounded to nearest even; arithmetic between two of them (or with an
// int) is done in float and rounded back; std::log/sqrt/sin/cos of one are
// c10's reduced-float overloads (BFloat16-math.h): the float function, rounded
// back; with a double operand the arithmetic is double. Checked bit-exact
// against torch 2.11 (tests/data/rng/torch_randn_cpu_reduced.safetensors);
// rounding only where a float result is stored is not (about 31% of values
// then differ in the last place).
struct Reduced {
  kernels::DType dtype;
  float operator()(float v) const {
    return dtype == kernels::DType::kF16 ? kernels::f16_to_f32(kernels::f32_to_f16(v))
                                         : kernels::bf16_to_f32(kernels::f32_to_bf16(v));
  }
  // at::uniform_real_distribution<T>(0, 1): numeric_limits<T>::digits random bits.
  int digits() const { return dtype == kernels::DType::kF16 ? 11 : 8; }
};

void normal_fill_16_reduced(const Reduced& t, float* data) {
  for (int j = 0; j < 8; ++j) {
    const float u1 = t(1.0f - data[j]);                       // 1 - T -> T
    const float u2 = data[j + 8];
    const float radius = t(std::sqrt(t(-2.0f * t(std::log(u1)))));  // sqrt(T(-2 * log(T)))
    // 2.0f * pi<double> * T -> double; stored in T through float.
    const float theta = t(static_cast<float>(2.0 * M_PI * static_cast<double>(u2)));
    // T * cos(T) -> T; * std (T, 1) changes nothing; + mean (T, +0) turns the
    // -0 of u1 == 1 (sqrt(-2 * 0) is -0) into +0, as torch's output has it.
    data[j] = t(radius * t(std::cos(theta))) + 0.0f;
    data[j + 8] = t(radius * t(std::sin(theta))) + 0.0f;
  }
}

std::vector<float> randn_cpu(TorchCpuGenerator& gen, int64_t numel, kernels::DType dtype) {
  if (dtype != kernels::DType::kF16 && dtype != kernels::DType::kBF16) return randn_cpu_f32(gen, numel);
  const Reduced t{dtype};
  const uint32_t mask = (1u << t.digits()) - 1;
  const float scale = 1.0f / static_cast<float>(1u << t.digits());
  return torch_normal_fill(
      gen, numel, [&](double v) { return t(static_cast<float>(v)); },  // to T through float
      [&](TorchCpuGenerator& g) { return static_cast<float>(g.random() & mask) * scale; },  // exact in T
      [&](float* block) { normal_fill_16_reduced(t, block); });
}

}  // namespace

// ---- torch's CUDA generator (Philox4x32-10, as curand) ----------------------

namespace {

struct Philox4 {
  uint32_t v[4];
};

Philox4 philox4x32_10(Philox4 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * ctr.v[0];
    const uint64_t p1 = uint64_t{0xCD9E8D57u} * ctr.v[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    ctr = Philox4{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ctr;
}

// curand's _curand_box_muller: (sin, cos) * sqrt(-2 log u). The device uses
// logf and the __sincosf intrinsic; double math rounded once is within a few
// ulp of it.
void box_muller(uint32_t x, uint32_t y, float* first, float* second) {
  constexpr float kInv = 2.3283064e-10f;                    // CURAND_2POW32_INV
  constexpr float kInv2Pi = 2.3283064e-10f * 6.2831855f;    // CURAND_2POW32_INV_2PI
  const float u = static_cast<float>(x) * kInv + kInv / 2.0f;
  const float v = static_cast<float>(y) * kInv2Pi + kInv2Pi / 2.0f;
  const double s = std::sqrt(-2.0 * std::log(static_cast<double>(u)));
  *first = static_cast<float>(std::sin(static_cast<double>(v)) * s);
  *second = static_cast<float>(std::cos(static_cast<double>(v)) * s);
}

}  // namespace

std::vector<float> torch_randn_cuda(uint64_t seed, int64_t numel, int multiprocessors, int max_threads_per_sm,
                                    uint64_t philox_offset) {
  std::vector<float> out(static_cast<size_t>(std::max<int64_t>(numel, 0)));
  if (numel <= 0) return out;
  // torch's calc_execution_policy + distribution_elementwise_grid_stride_kernel
  // (aten/src/ATen/native/cuda/DistributionTemplates.h), unroll 4 for float.
  constexpr uint64_t kBlock = 256;
  constexpr uint64_t kUnroll = 4;
  const uint64_t n = static_cast<uint64_t>(numel);
  uint64_t grid = (n + kBlock - 1) / kBlock;
  const uint64_t blocks_per_sm = static_cast<uint64_t>(max_threads_per_sm) / kBlock;
  grid = std::min<uint64_t>(static_cast<uint64_t>(multiprocessors) * blocks_per_sm, grid);
  const uint64_t threads = kBlock * grid;
  const uint64_t stride = threads * kUnroll;
  const uint64_t rounded = ((n - 1) / stride + 1) * stride;
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (uint64_t idx = 0; idx < threads; ++idx) {
    // curand_init(seed, subsequence = idx, offset): counter (call_lo, call_hi, idx_lo, idx_hi).
    // torch passes the generator's offset (a multiple of 4 values) to
    // curand_init: the counter's first word starts at offset / 4.
    uint64_t call = philox_offset / 4;
    for (uint64_t linear = idx; linear < rounded; linear += stride, ++call) {
      const Philox4 r = philox4x32_10(Philox4{{static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32),
                                               static_cast<uint32_t>(idx), static_cast<uint32_t>(idx >> 32)}},
                                      k0, k1);
      float vals[4];
      box_muller(r.v[0], r.v[1], &vals[0], &vals[1]);
      box_muller(r.v[2], r.v[3], &vals[2], &vals[3]);
      for (uint64_t ii = 0; ii < kUnroll; ++ii) {
        const uint64_t li = linear + threads * ii;
        if (li < n) out[li] = vals[ii];
      }
    }
  }
  return out;
}

uint64_t torch_cuda_offset_increment(int64_t numel, int multiprocessors, int max_threads_per_sm) {
  if (numel <= 0) return 0;
  // calc_execution_policy's counter_offset: rounds of the grid-stride loop
  // times curand4_engine_calls (4), which philox_cuda_state rounds up to a
  // multiple of 4 (already one).
  constexpr uint64_t kBlock = 256;
  constexpr uint64_t kUnroll = 4;
  const uint64_t n = static_cast<uint64_t>(numel);
  const uint64_t blocks_per_sm = static_cast<uint64_t>(max_threads_per_sm) / kBlock;
  const uint64_t grid = std::min<uint64_t>(static_cast<uint64_t>(multiprocessors) * blocks_per_sm,
                                           (n + kBlock - 1) / kBlock);
  return ((n - 1) / (kBlock * grid * kUnroll) + 1) * 4;
}

struct TorchGenerator::Cpu {
  explicit Cpu(uint64_t seed) : gen(seed) {}
  TorchCpuGenerator gen;
};

TorchGenerator::TorchGenerator(RngKind kind, uint64_t seed) : kind_(kind), seed_(seed) {
  if (kind == RngKind::kTorchCpu) cpu_ = std::make_unique<Cpu>(seed);
}
TorchGenerator::~TorchGenerator() = default;
TorchGenerator::TorchGenerator(TorchGenerator&&) noexcept = default;
TorchGenerator& TorchGenerator::operator=(TorchGenerator&&) noexcept = default;

std::vector<float> TorchGenerator::randn(int64_t numel, kernels::DType dtype) {
  if (kind_ == RngKind::kTorchCpu) return randn_cpu(cpu_->gen, numel, dtype);
  std::vector<float> out = torch_randn_cuda(seed_, numel, 132, 2048, philox_offset_);
  philox_offset_ += torch_cuda_offset_increment(numel);
  return out;
}

std::vector<float> torch_randn_cpu(uint64_t seed, int64_t numel) {
  TorchCpuGenerator gen(seed);
  return randn_cpu_f32(gen, numel);
}

std::vector<float> torch_randn_cpu(uint64_t seed, int64_t numel, kernels::DType dtype) {
  TorchCpuGenerator gen(seed);
  return randn_cpu(gen, numel, dtype);
}

std::vector<float> randn(RngKind kind, uint64_t seed, int64_t numel, kernels::DType dtype) {
  return TorchGenerator(kind, seed).randn(numel, dtype);
}

}  // namespace hipq::engine
