// copy on the cpu: dst = src elementwise, both possibly strided, with dtype
// conversion (f32 <-> f16 <-> bf16 <-> f64, integers to float). The layout
// transforms (permute, NCHW <-> NHWC, making a view contiguous) are copies
// from a permuted view. Same dtype copies bytes exactly (integers included).
// dst may be a strided view too (e.g. a slice of a larger tensor).
#include <cstring>
#include <vector>

#include "kernels/cpu/op_checks.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/tensor_io.h"

namespace hipq::kernels::cpu {

Status copy(const Tensor& src, Tensor& dst) {
  constexpr std::string_view op = "copy";
  HIPQ_RETURN_IF_ERROR(check_host(op, "src", src));
  HIPQ_RETURN_IF_ERROR(check_host(op, "dst", dst));
  HIPQ_RETURN_IF_ERROR(check_shape(op, "dst", dst, src.shape_vec()));
  if (src.dtype != dst.dtype && !is_float(dst.dtype))
    return invalid(op, "cannot convert 'src' " + src.describe() + " to 'dst' " + dst.describe() +
                           " (casts go to a float dtype)");
  const int64_t n = src.numel();
  if (n == 0) return Status::Ok();
  const bool alias = overlaps(src, dst);
  if (src.dtype == dst.dtype) {
    const size_t es = dtype_size(src.dtype);
    if (src.is_contiguous() && dst.is_contiguous()) {
      std::memmove(dst.data, src.data, static_cast<size_t>(n) * es);
      return Status::Ok();
    }
    const char* s = static_cast<const char*>(src.data);
    std::vector<char> staged;
    if (alias) {
      // Stage a contiguous copy first so overlapping views read the old values.
      staged.resize(static_cast<size_t>(n) * es);
      for_each_offset(src.ndim, src.shape.data(), src.stride.data(), [&](int64_t i, int64_t off) {
        std::memcpy(staged.data() + static_cast<size_t>(i) * es, s + static_cast<size_t>(off) * es, es);
      });
      char* d = static_cast<char*>(dst.data);
      for_each_offset(dst.ndim, dst.shape.data(), dst.stride.data(), [&](int64_t i, int64_t off) {
        std::memcpy(d + static_cast<size_t>(off) * es, staged.data() + static_cast<size_t>(i) * es, es);
      });
      return Status::Ok();
    }
    char* d = static_cast<char*>(dst.data);
    for_each_offset2(src.ndim, src.shape.data(), src.stride.data(), dst.stride.data(),
                     [&](int64_t, int64_t so, int64_t dof) {
                       std::memcpy(d + static_cast<size_t>(dof) * es, s + static_cast<size_t>(so) * es, es);
                     });
    return Status::Ok();
  }
  if (!is_float(src.dtype) && src.dtype != DType::kI32 && src.dtype != DType::kI64 && src.dtype != DType::kU8)
    return invalid(op, "unsupported 'src' dtype in " + src.describe());
  std::vector<float> buf(static_cast<size_t>(n));
  gather_f32(src, buf.data());
  scatter_f32(buf.data(), dst);
  return Status::Ok();
}

}  // namespace hipq::kernels::cpu
