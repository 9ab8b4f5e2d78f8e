#include "kernels/dtype.h"

#include <cmath>
#include <cstring>

namespace hipq::kernels {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kF64: return "f64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view n) {
  if (n == "f32" || n == "fp32" || n == "float32" || n == "F32") return DType::kF32;
  if (n == "f16" || n == "fp16" || n == "float16" || n == "F16") return DType::kF16;
  if (n == "bf16" || n == "bfloat16" || n == "BF16") return DType::kBF16;
  if (n == "i32" || n == "int32" || n == "I32") return DType::kI32;
  if (n == "i64" || n == "int64" || n == "I64") return DType::kI64;
  if (n == "u8" || n == "uint8" || n == "U8") return DType::kU8;
  if (n == "f64" || n == "float64" || n == "F64") return DType::kF64;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      mant &= 0x3ffu;
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | mant << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absu = u & 0x7fffffffu;
  if (absu >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (absu > 0x7f800000u ? 0x200u : 0));
  if (absu >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (absu < 0x38800000u) {  // subnormal or zero in half
    float a;
    std::memcpy(&a, &absu, 4);
    // 2^-24 is the smallest half subnormal; nearbyint rounds half to even.
    auto m = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t rounding = 0xfffu + ((absu >> 13) & 1u);
  absu += rounding;
  return static_cast<uint16_t>(sign | ((absu - 0x38000000u) >> 13));
}

namespace {
// Element i of T at `data` through memcpy: tensors from a file (safetensors
// offsets are byte offsets) need not be aligned to their element size.
template <typename T>
T load_at(const void* data, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(data) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T>
void store_at(void* data, int64_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(data) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}
}  // namespace

float load_as_f32(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return load_at<float>(data, i);
    case DType::kF16: return f16_to_f32(load_at<uint16_t>(data, i));
    case DType::kBF16: return bf16_to_f32(load_at<uint16_t>(data, i));
    case DType::kI32: return static_cast<float>(load_at<int32_t>(data, i));
    case DType::kI64: return static_cast<float>(load_at<int64_t>(data, i));
    case DType::kU8: return static_cast<float>(load_at<uint8_t>(data, i));
    case DType::kF64: return static_cast<float>(load_at<double>(data, i));
  }
  return 0.f;
}

void store_from_f32(void* data, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: store_at<float>(data, i, v); return;
    case DType::kF16: store_at<uint16_t>(data, i, f32_to_f16(v)); return;
    case DType::kBF16: store_at<uint16_t>(data, i, f32_to_bf16(v)); return;
    case DType::kI32: store_at<int32_t>(data, i, static_cast<int32_t>(v)); return;
    case DType::kI64: store_at<int64_t>(data, i, static_cast<int64_t>(v)); return;
    case DType::kU8: store_at<uint8_t>(data, i, static_cast<uint8_t>(std::fmin(255.f, std::fmax(0.f, std::nearbyint(v))))); return;
    case DType::kF64: store_at<double>(data, i, static_cast<double>(v)); return;
  }
}

}  // namespace hipq::kernels
