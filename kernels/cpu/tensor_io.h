// Reading and writing cpu tensors as fp32, whatever their dtype and strides.
//
// The ops compute in fp32 (fp64 where stated) on contiguous scratch copies:
// gather_f32 reads a (possibly strided, f16/bf16) view in row-major logical
// order, scatter_f32 writes one back with a single rounding per element.
// Scratch buffers are per thread and reused across calls, so steady-state ops
// do not allocate.
// Thread safety: gather/scatter are pure; scratch() is per calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"

namespace hipq::kernels::cpu {

// Elements of `t` in row-major logical order, as float, into dst[numel].
void gather_f32(const Tensor& t, float* dst);
// Writes src[numel] into `t` (any strides, any float dtype), rounding once.
void scatter_f32(const float* src, const Tensor& t);
// Elements [begin, begin + count) of t in row-major logical order, as float.
void gather_range_f32(const Tensor& t, int64_t begin, int64_t count, float* dst);
// Writes src[count] into elements [begin, begin + count) of t.
void scatter_range_f32(const float* src, const Tensor& t, int64_t begin, int64_t count);

// Pointer to t's data as contiguous f32 when it already is; else gathers into
// `scratch` (resized) and returns its data.
const float* as_f32(const Tensor& t, std::vector<float>& scratch);

// True when the memory spans of a and b (first to last element) intersect.
bool overlaps(const Tensor& a, const Tensor& b);

// as_f32 for an op input that `out` may share memory with: the very same
// memory is returned as is (row-wise ops read a row before writing it), a
// partial overlap is copied first.
const float* as_f32_input(const Tensor& t, const Tensor& out, std::vector<float>& scratch);

// A per-thread reusable buffer; `slot` distinguishes buffers used together in
// one op (0..7). Contents are unspecified; grows, never shrinks.
float* scratch(int slot, size_t count);

// Calls f(linear_index, offset) for every element of a view with the given
// shape and strides (in elements), in row-major order.
template <typename F>
void for_each_offset(int ndim, const int64_t* shape, const int64_t* stride, F&& f) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  if (n == 0) return;
  if (ndim == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  int64_t idx[kMaxDims] = {};
  int64_t off = 0;
  const int last = ndim - 1;
  const int64_t inner = shape[last], inner_stride = stride[last];
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) f(i + j, off + j * inner_stride);
    for (int d = last - 1; d >= 0; --d) {
      off += stride[d];
      if (++idx[d] < shape[d]) break;
      off -= stride[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// Same, over two views of one shape: f(linear_index, offset_a, offset_b).
template <typename F>
void for_each_offset2(int ndim, const int64_t* shape, const int64_t* stride_a,
                      const int64_t* stride_b, F&& f) {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  if (n == 0) return;
  if (ndim == 0) {
    f(int64_t{0}, int64_t{0}, int64_t{0});
    return;
  }
  int64_t idx[kMaxDims] = {};
  int64_t oa = 0, ob = 0;
  const int last = ndim - 1;
  const int64_t inner = shape[last], sa = stride_a[last], sb = stride_b[last];
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t j = 0; j < inner; ++j) f(i + j, oa + j * sa, ob + j * sb);
    for (int d = last - 1; d >= 0; --d) {
      oa += stride_a[d];
      ob += stride_b[d];
      if (++idx[d] < shape[d]) break;
      oa -= stride_a[d] * shape[d];
      ob -= stride_b[d] * shape[d];
      idx[d] = 0;
    }
  }
}

}  // namespace hipq::kernels::cpu
