// Tensor: a non-owning, strided view of memory that one Backend owns.
//
// Shape and strides are in elements (not bytes), outermost dimension first,
// like PyTorch. A Tensor never frees anything: memory belongs to a Buffer
// (backend.h) or to the caller (host data for the CPU backend). Views made by
// reshape/slice/permute share the memory of the original.
// Thread safety: a value type; concurrent reads are fine.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace hipq::kernels {

inline constexpr int kMaxDims = 6;

// Where the memory of a tensor lives.
enum class Location : uint8_t { kHost = 0, kDevice = 1 };

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Location location = Location::kHost;
  int ndim = 0;
  std::array<int64_t, kMaxDims> shape{};
  std::array<int64_t, kMaxDims> stride{};

  // A contiguous (row-major) view of `data`.
  static Tensor contiguous(void* data, DType dtype, const std::vector<int64_t>& shape,
                           Location loc = Location::kHost);

  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool is_contiguous() const;
  int64_t dim(int d) const { return shape[d < 0 ? d + ndim : d]; }
  std::vector<int64_t> shape_vec() const { return {shape.begin(), shape.begin() + ndim}; }
  bool same_shape(const Tensor& o) const;

  // Views. Each returns a tensor sharing `data`; reshape requires contiguity.
  Tensor reshape(const std::vector<int64_t>& new_shape) const;
  Tensor slice(int dim, int64_t start, int64_t length) const;
  Tensor permute(const std::vector<int>& order) const;
  Tensor transpose(int d0, int d1) const;

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }

  // "[2, 4, 128, 128] f16 device" for error messages.
  std::string describe() const;
};

}  // namespace hipq::kernels
