// StepOps: the elementwise arithmetic of one sampler's step on the backend.
//
// Every arithmetic operation of a diffusers step() is one op here, in the
// same order, so each result is rounded where PyTorch rounds it: `scale` for
// a product with a per-step constant (computed on the host in fp32 as
// diffusers computes its 0-d CPU tensors), `add`/`sub` for tensor sums, and
// `div` for a division by a per-step constant, which must stay a division:
// the constants divided by go up once, before the first step, as a small
// device table (`divisors`, `per_step` of them per step).
//
// Also holds `temps` scratch tensors shaped like the latents. check_inputs is
// the one validation of a sampler's arguments.
// Thread safety: the backend's thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "engine/models/device_tensor.h"
#include "engine/scheduler.h"
#include "kernels/backend.h"

namespace hipq::engine::samplers {

// InvalidArgument for a schedule without steps (or with sigmas not one longer
// than its timesteps) and for latents that are not a contiguous f32 tensor.
Status check_inputs(const Schedule& s, const kernels::Tensor& x, std::string_view who);

// diffusers' _sigma_to_alpha_sigma_t and lambda = log(alpha) - log(sigma) of
// a sigma, each a 0-d fp32 tensor op: alpha = 1 / sqrt(s^2 + 1), sigma = s * alpha.
struct AlphaSigma {
  float alpha, sigma, lambda;
};
AlphaSigma alpha_sigma(float s);

class StepOps {
 public:
  static Result<StepOps> make(kernels::Backend& be, const kernels::Tensor& like, int temps,
                              const std::vector<float>& divisors, int per_step);

  kernels::Backend& backend() { return *be_; }
  kernels::Tensor& tmp(int i) { return temps_[static_cast<size_t>(i)].t; }

  Status scale(const kernels::Tensor& a, float factor, kernels::Tensor& y) { return be_->scale(a, y, factor, 0.0f); }
  Status add(const kernels::Tensor& a, const kernels::Tensor& b, kernels::Tensor& y) {
    return be_->binary(kernels::BinaryOp::kAdd, a, b, y);
  }
  Status sub(const kernels::Tensor& a, const kernels::Tensor& b, kernels::Tensor& y) {
    return be_->binary(kernels::BinaryOp::kSub, a, b, y);
  }
  Status mul(const kernels::Tensor& a, const kernels::Tensor& b, kernels::Tensor& y) {
    return be_->binary(kernels::BinaryOp::kMul, a, b, y);
  }
  // y = a / divisors[step * per_step + which].
  Status div(const kernels::Tensor& a, int step, int which, kernels::Tensor& y);
  Status copy(const kernels::Tensor& a, kernels::Tensor& y) { return be_->copy(a, y); }
  // The DPM-family convert_model_output (DPM++, UniPC, DEIS; DDPM and LCM with
  // alpha = sqrt(a_t), sigma = sqrt(1 - a_t)): x0 from the raw
  // output by cfg.prediction_type, (x - sigma_t * out) / alpha_t (alpha_t is
  // divisors[step * per_step + alpha_which]) | alpha_t * x - sigma_t * out |
  // out. t1, t2: scratch.
  Status dpm_x0(const std::string& prediction_type, const AlphaSigma& cur, int step, int alpha_which,
                const kernels::Tensor& x, const kernels::Tensor& out, kernels::Tensor& t1, kernels::Tensor& t2,
                kernels::Tensor& x0);

 private:
  kernels::Backend* be_ = nullptr;
  int per_step_ = 0;
  std::vector<DeviceTensor> temps_;
  DeviceTensor table_;
};

// pred_original_sample of the k-diffusion style schedulers (Euler, Heun, LMS,
// KDPM2) at `sigma`, in diffusers' operation order:
//   epsilon:      x - sigma * out
//   v_prediction: out * (-sigma / sqrt(sigma^2 + 1)) + x / (sigma^2 + 1), the
//                 divisor sigma^2 + 1 at divisors[step * per_step + which]
//   sample:       out
// Writes `pred` (and `tmp`) and returns the tensor that holds the result
// (`out` itself for "sample"). InvalidArgument naming `who` for another type.
Result<const kernels::Tensor*> k_pred_original(StepOps& ops, std::string_view who, const std::string& prediction,
                                               const kernels::Tensor& x, const kernels::Tensor& out, float sigma,
                                               int step, int which, kernels::Tensor& pred, kernels::Tensor& tmp);

// x0.clamp(-range, range) for a scheduler's clip_sample (DDIM, DDPM, LCM), on
// the host: the backend has no clamp, and no model family hipq knows turns
// clip_sample on, so this is the one host round trip a step may make.
Status clamp_on_host(kernels::Backend& be, kernels::Tensor& x0, float range);

}  // namespace hipq::engine::samplers
