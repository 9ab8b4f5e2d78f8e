// StepNoise: the per-step noise of a stochastic sampler, drawn from the job's
// generator in diffusers' order and kept on the device.
//
// diffusers' ancestral and SDE steps call randn_tensor(model_output.shape,
// generator=g, dtype=...) once per step, continuing the generator that made the
// initial latent. StepNoise draws those values on the host, in order, for a
// chunk of steps at a time (every step of a usual job: up to kChunkBytes of
// noise), uploads the chunk once, and hands out one step's slice: the step
// loop itself neither draws nor copies, except once per chunk for very long
// jobs. `next()` must be called once per step, in step order.
// Thread safety: the backend's thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "engine/rng.h"
#include "kernels/backend.h"

namespace hipq::engine::samplers {

class StepNoise {
 public:
  static constexpr int64_t kChunkBytes = 64 << 20;

  // `generators`: who draws each step's noise, in order of the latents'
  // values: one for the whole of `like`, or one per latent of a batch (like's
  // first dimension a multiple of their count: each draws its equal share,
  // the draw its job makes alone). `like`: the latents (shape of each
  // draw); `dtype`: the dtype diffusers draws in (the values are widened to
  // f32 on the device); `steps`: how many draws the loop will make;
  // `chunk_bytes`: how much noise goes up at once. InvalidArgument without a
  // generator (or with a null one) or with a count that does not divide the latents.
  static Result<StepNoise> make(kernels::Backend& be, const std::vector<TorchGenerator*>& generators,
                                kernels::DType dtype, const kernels::Tensor& like, int steps,
                                int64_t chunk_bytes = kChunkBytes);

  // The noise of the next step, an f32 tensor shaped like the latents, valid
  // until the next call.
  Result<kernels::Tensor> next();

 private:
  Status fill();

  kernels::Backend* be_ = nullptr;
  std::vector<TorchGenerator*> gens_;
  kernels::DType dtype_ = kernels::DType::kF32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  int steps_left_ = 0;  // draws not yet made
  int chunk_steps_ = 0;
  int in_chunk_ = 0;    // draws in the current chunk
  int used_ = 0;        // of them handed out
  DeviceTensor chunk_;
};

}  // namespace hipq::engine::samplers
