// Element types of hipq tensors and the host-side conversions between them.
//
// Reduced-precision types (f16, bf16) are storage formats: every op computes
// in fp32 (or wider) and rounds once on store (round to nearest even).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace hipq::kernels {

enum class DType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kI32 = 3, kI64 = 4, kU8 = 5, kF64 = 6 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kF64: return 8;
  }
  return 0;
}

// "f32", "f16", "bf16", "i32", "i64", "u8", "f64".
std::string_view dtype_name(DType t);
// Inverse of dtype_name; also accepts "fp32"/"fp16"/"float32"/"float16"/"bfloat16".
std::optional<DType> parse_dtype(std::string_view name);
constexpr bool is_float(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Reads element i (linear index into `data` of type t) as float / writes it.
// `data` need not be aligned to the element size (tensors read from files).
float load_as_f32(const void* data, DType t, int64_t i);
void store_from_f32(void* data, DType t, int64_t i, float v);

}  // namespace hipq::kernels
