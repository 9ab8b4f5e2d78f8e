#include "engine/guidance.h"

#include <cmath>
#include <vector>

#include "engine/models/device_tensor.h"

namespace hipq::engine {

using kernels::BinaryOp;
using kernels::Tensor;

Status combine_guidance(kernels::Backend& be, const Tensor& uncond, const Tensor& text, float scale, Tensor& out) {
  // diffusers: noise_pred_uncond + guidance_scale * (noise_pred_text - noise_pred_uncond)
  HIPQ_RETURN_IF_ERROR(be.binary(BinaryOp::kSub, text, uncond, out));
  HIPQ_RETURN_IF_ERROR(be.scale(out, out, scale, 0.0f));
  return be.binary(BinaryOp::kAdd, uncond, out, out);
}

float unbiased_std(const std::vector<float>& v) {
  if (v.size() < 2) return 0.0f;
  double sum = 0;
  for (float x : v) sum += x;
  const double mean = sum / static_cast<double>(v.size());
  double sq = 0;
  for (float x : v) sq += (x - mean) * (x - mean);
  return static_cast<float>(std::sqrt(sq / static_cast<double>(v.size() - 1)));
}

Status rescale_guidance(kernels::Backend& be, const Tensor& text, float phi, Tensor& out, Tensor& tmp) {
  HIPQ_ASSIGN_OR_RETURN(const std::vector<float> text_h, to_host_f32(be, text));
  HIPQ_ASSIGN_OR_RETURN(const std::vector<float> cfg_h, to_host_f32(be, out));
  const float std_text = unbiased_std(text_h);
  const float std_cfg = unbiased_std(cfg_h);
  if (!(std_cfg > 0.0f)) return Status::Ok();  // a constant prediction: torch would divide by 0; leave it
  const float ratio = std_text / std_cfg;
  // noise_pred_rescaled = noise_cfg * ratio;
  // noise_cfg = phi * noise_pred_rescaled + (1 - phi) * noise_cfg
  HIPQ_RETURN_IF_ERROR(be.scale(out, tmp, ratio, 0.0f));
  HIPQ_RETURN_IF_ERROR(be.scale(tmp, tmp, phi, 0.0f));
  HIPQ_RETURN_IF_ERROR(be.scale(out, out, static_cast<float>(1.0 - static_cast<double>(phi)), 0.0f));
  return be.binary(BinaryOp::kAdd, tmp, out, out);
}

}  // namespace hipq::engine
