// Classifier-free guidance on the model's two predictions, as diffusers'
// pipelines combine them.
//
// combine_guidance: out = uncond + scale * (text - uncond), one backend op per
// PyTorch op (sub, scalar mul, add). rescale_guidance: diffusers'
// rescale_noise_cfg with guidance_rescale = phi:
//   out = phi * out * (std(text) / std(out)) + (1 - phi) * out
// with torch's unbiased std over the whole (batch-1) tensor. The two stds are
// computed on the host from copies of the tensors (double sums, each rounded
// to float, then the float ratio): one host round trip per step, the one a
// job with guidance_rescale pays. `tmp` is scratch shaped like `out`.
// Thread safety: the backend's thread.
#pragma once

#include <vector>

#include "base/status.h"
#include "kernels/backend.h"

namespace hipq::engine {

Status combine_guidance(kernels::Backend& be, const kernels::Tensor& uncond, const kernels::Tensor& text, float scale,
                        kernels::Tensor& out);

Status rescale_guidance(kernels::Backend& be, const kernels::Tensor& text, float phi, kernels::Tensor& out,
                        kernels::Tensor& tmp);

// torch.std (correction 1) of host values, accumulated in double and rounded
// to float; 0 for fewer than two values.
float unbiased_std(const std::vector<float>& v);

}  // namespace hipq::engine
