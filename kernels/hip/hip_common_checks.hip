// Runtime error reporting and the shape/dtype checks every hip op shares.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/hip/hip_common.h"
#include "kernels/hip/hip_ops.h"

namespace hipq::kernels {

void hip_check_failed(hipError_t err, const char* expr, const char* func, const char* file, int line) {
  std::fprintf(stderr, "hipq: HIP call failed: %s -> %s (%s) in %s at %s:%d\n", expr, hipGetErrorName(err),
               hipGetErrorString(err), func, file, line);
  std::fflush(stderr);
  std::abort();
}

Status hip_error_status(hipError_t err, const char* expr, const char* func, const char* file, int line) {
  std::string msg = std::string(expr) + " -> " + hipGetErrorName(err) + " (" + hipGetErrorString(err) +
                    ") in " + func + " at " + file + ":" + std::to_string(line);
  if (err == hipErrorOutOfMemory) return Status::ResourceExhausted("device out of memory: " + msg);
  if (err == hipErrorNoDevice || err == hipErrorInsufficientDriver) return Status::Unavailable(msg);
  return Status::Internal(msg);
}

Status require_device_float(const Tensor& t, const char* op, const char* operand) {
  if (t.location != Location::kDevice)
    return Status::InvalidArgument(std::string(op) + ": " + operand + " " + t.describe() +
                                   " is not device memory (allocate it from the hip backend)");
  if (t.dtype != DType::kF32 && t.dtype != DType::kF16 && t.dtype != DType::kBF16)
    return Status::InvalidArgument(std::string(op) + ": " + operand + " " + t.describe() +
                                   " must be f32, f16 or bf16");
  return Status::Ok();
}

Status require_contiguous_out(const Tensor& t, const char* op, const char* operand) {
  if (!t.is_contiguous())
    return Status::InvalidArgument(std::string(op) + ": output " + operand + " " + t.describe() +
                                   " must be contiguous");
  return Status::Ok();
}

Status shape_mismatch(const char* op, const char* what, const Tensor& a, const Tensor& b) {
  return Status::InvalidArgument(std::string(op) + ": " + what + ": " + a.describe() + " vs " + b.describe());
}

Result<Tensor> contiguous_or_copy(HipContext& ctx, const Tensor& t, Buffer& hold) {
  if (t.is_contiguous()) return t;
  HIPQ_ASSIGN_OR_RETURN(hold, ctx.backend->allocate(t.nbytes()));
  Tensor c = Tensor::contiguous(hold.data(), t.dtype, t.shape_vec(), Location::kDevice);
  if (Status s = hip_copy(ctx, t, c); !s.ok()) return s;
  return c;
}

}  // namespace hipq::kernels
