#include "kernels/tensor.h"

#include <sstream>

#include "base/check.h"

namespace hipq::kernels {

Tensor Tensor::contiguous(void* data, DType dtype, const std::vector<int64_t>& shape, Location loc) {
  HIPQ_CHECK(shape.size() <= static_cast<size_t>(kMaxDims));
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.location = loc;
  t.ndim = static_cast<int>(shape.size());
  int64_t s = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = s;
    s *= shape[d];
  }
  return t;
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[d];
  return n;
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] != 1 && stride[d] != s) return false;
    s *= shape[d];
  }
  return true;
}

bool Tensor::same_shape(const Tensor& o) const {
  if (ndim != o.ndim) return false;
  for (int d = 0; d < ndim; ++d)
    if (shape[d] != o.shape[d]) return false;
  return true;
}

Tensor Tensor::reshape(const std::vector<int64_t>& new_shape) const {
  HIPQ_CHECK(is_contiguous());
  Tensor t = contiguous(data, dtype, new_shape, location);
  HIPQ_CHECK(t.numel() == numel());
  return t;
}

Tensor Tensor::slice(int d, int64_t start, int64_t length) const {
  if (d < 0) d += ndim;
  HIPQ_CHECK(d >= 0 && d < ndim && start >= 0 && start + length <= shape[d]);
  Tensor t = *this;
  t.data = static_cast<char*>(data) + static_cast<size_t>(start * stride[d]) * dtype_size(dtype);
  t.shape[d] = length;
  return t;
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  HIPQ_CHECK(static_cast<int>(order.size()) == ndim);
  Tensor t = *this;
  for (int d = 0; d < ndim; ++d) {
    t.shape[d] = shape[order[d]];
    t.stride[d] = stride[order[d]];
  }
  return t;
}

Tensor Tensor::transpose(int d0, int d1) const {
  if (d0 < 0) d0 += ndim;
  if (d1 < 0) d1 += ndim;
  Tensor t = *this;
  std::swap(t.shape[d0], t.shape[d1]);
  std::swap(t.stride[d0], t.stride[d1]);
  return t;
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << '[';
  for (int d = 0; d < ndim; ++d) os << (d ? ", " : "") << shape[d];
  os << "] " << dtype_name(dtype) << (location == Location::kDevice ? " device" : " host");
  if (!is_contiguous()) os << " strided";
  return os.str();
}

}  // namespace hipq::kernels
