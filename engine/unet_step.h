// UNetStep: the UNet evaluation of one denoising step on fixed device
// buffers, run eagerly on its first call and, on a backend with graphs,
// captured on the second and replayed from then on.
//
// Every step of a generation has the same shapes, so after the first (eager)
// step warms the memory pool, the second is recorded as a graph (the cast of
// the latents to the model precision, the whole forward and the cast of its
// output to fp32) and replayed; the host then enqueues one launch per step
// instead of a thousand. Everything stays on the device: the latents come in
// as a device tensor and are copied into the fixed input buffer, the step's
// timestep comes from a table uploaded once by make(), and the output is an
// fp32 device tensor. run() neither copies to or from the host nor waits.
// The cross attentions' k | v projections of the text context, the same in
// every step, are made once by make() (UNet::project_context) and read by
// every forward.
// Replays run the same kernels on the same addresses as the eager forward, so
// the results are identical.
//
// Backends without graphs (cpu), or HIPQ_STEP_GRAPHS=0 in the environment,
// run every step eagerly. A failed capture is reported, never retried.
// Ownership: the UNet and the conditioning tensors must outlive the UNetStep;
// its graph is destroyed with it. Thread safety: none (the backend's thread).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/result.h"
#include "engine/models/device_tensor.h"
#include "engine/models/unet.h"
#include "kernels/backend.h"

namespace hipq::engine {

class UNetStep {
 public:
  // hidden: [batch, S, D]; pooled: [batch, P] (SDXL, else null); time_ids:
  // K * batch values (SDXL: base K = 6, refiner 5; else empty); latents of lc x lh x lw each;
  // timesteps: what the UNet receives at each step (uploaded once).
  static Result<UNetStep> make(kernels::Backend& backend, const UNet& unet, const kernels::Tensor& hidden,
                               const kernels::Tensor* pooled, const std::vector<float>& time_ids, int batch,
                               int64_t lh, int64_t lw, const std::vector<float>& timesteps);

  // The raw UNet output, fp32 [batch, lc, lh, lw] on the device (valid until
  // the next call), for `latents` at timesteps[step]. latents: a contiguous
  // fp32 device tensor of k latents of lc * lh * lw values, k dividing the
  // batch, each the input of batch / k entries in a row: k = batch (one
  // latent an entry), k = 1 (the same latents for every entry, as
  // classifier-free guidance runs one job), or k jobs of a batch with
  // guidance (job j in entries 2j and 2j + 1). InvalidArgument for other
  // sizes or a step outside the table.
  Result<const kernels::Tensor*> run(const kernels::Tensor& latents, int step);

  // How many calls were replays of the captured graph.
  int replays() const { return replays_; }

  UNetStep(UNetStep&&) noexcept;
  UNetStep& operator=(UNetStep&&) noexcept;
  ~UNetStep();

 private:
  UNetStep() = default;
  Status forward_into_out();

  kernels::Backend* be_ = nullptr;
  const UNet* unet_ = nullptr;
  const kernels::Tensor* hidden_ = nullptr;
  const kernels::Tensor* pooled_ = nullptr;
  int batch_ = 1;
  DeviceTensor input_f32_;  // [batch, lc, lh, lw] f32, written before each call
  DeviceTensor input_;      // the same in the model precision (an alias of input_f32_ at fp32)
  DeviceTensor timesteps_;  // [batch] f32, the UNet's timestep input
  DeviceTensor timestep_table_;  // [steps, batch] f32
  int steps_ = 0;
  DeviceTensor time_ids_;   // [batch, K] f32 (SDXL: base 6, refiner 5)
  std::optional<ContextKV> context_kv_;  // the cross attentions' projections of hidden_
  std::optional<DeviceTensor> out_;  // the forward's output (model precision)
  DeviceTensor out_f32_;             // ... cast to fp32 (not allocated when the model runs in fp32)
  bool use_graph_ = true;
  int graph_ = -1;
  int calls_ = 0;
  int replays_ = 0;
};

}  // namespace hipq::engine
