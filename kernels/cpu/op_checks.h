// Argument checks shared by the cpu ops. Each returns InvalidArgument with a
// message that names the op, the operand and the shapes involved, so a caller
// sees e.g. "matmul: operand 'b' is [3, 4] f32 host, expected K = 5 rows".
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/tensor.h"

namespace hipq::kernels::cpu {

// "[2, 3]" for a shape list.
std::string shape_str(const std::vector<int64_t>& shape);

Status invalid(std::string_view op, std::string_view message);
// Memory must be host memory with a non-null pointer (unless empty).
Status check_host(std::string_view op, std::string_view name, const Tensor& t);
// A floating dtype (f32, f16, bf16, f64).
Status check_float(std::string_view op, std::string_view name, const Tensor& t);
// host + float + dtype equal to `ref`'s (which is named ref_name).
Status check_like(std::string_view op, std::string_view name, const Tensor& t,
                  std::string_view ref_name, const Tensor& ref);
Status check_contiguous(std::string_view op, std::string_view name, const Tensor& t);
Status check_ndim(std::string_view op, std::string_view name, const Tensor& t, int min_ndim,
                  int max_ndim);
// Exact shape match.
Status check_shape(std::string_view op, std::string_view name, const Tensor& t,
                   const std::vector<int64_t>& expected);
// A valid view: 0 < ndim <= kMaxDims (or 0 for a scalar), no negative sizes.
Status check_view(std::string_view op, std::string_view name, const Tensor& t);

}  // namespace hipq::kernels::cpu
