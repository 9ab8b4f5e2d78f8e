// SDXL base + refiner (diffusers' "ensemble of expert denoisers"): the pure
// pieces of splitting one schedule between two models, as diffusers'
// StableDiffusionXLPipeline (denoising_end) and
// StableDiffusionXLImg2ImgPipeline (denoising_start) compute them
// (docs/pipeline.md, "Refiner"):
//
//   discrete_timestep_cutoff  int(round(T - switch_at * T)), T the scheduler's
//                             num_train_timesteps, Python's round (half to
//                             even) of the double switch_at the user wrote
//   base_steps                the base runs the timesteps >= cutoff (its
//                             loop's first steps; the scheduler keeps the
//                             whole schedule, so no step is its "last")
//   refiner_start_index       the refiner runs the timesteps < cutoff of its
//                             own schedule: t_start = len - count(t < cutoff)
//   schedule_head / _tail     those two shares as Schedules the samplers run
//   refiner_time_ids          the refiner's micro-conditioning: original size,
//                             crop top-left and the aesthetic score
//                             (requires_aesthetics_score), the negative row
//                             with negative_aesthetic_score
//
// Errors: InvalidArgument naming what does not fit (a share without steps
// names the switch point, the steps and the way out).
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "base/result.h"
#include "engine/scheduler.h"
#include "kernels/dtype.h"
#include "spec/generation_settings.h"

namespace hipq::engine {

// diffusers: int(round(num_train_timesteps - denoising * num_train_timesteps)),
// with `switch_at` read as its "%.6g" decimal (what the user wrote).
int discrete_timestep_cutoff(int num_train_timesteps, float switch_at);

// How many model calls of `full` the base runs: len(filter(t >= cutoff)).
int base_steps(const Schedule& full, int cutoff);

// Where the refiner starts in its own `full` schedule: len - count(t < cutoff)
// (+1 more call for a second-order sampler whose count is even, as diffusers'
// get_timesteps does, so a step is never cut between its two calls).
int refiner_start_index(const Schedule& full, int cutoff);

// The base's share: the first base_steps(full, cutoff) model calls with their
// sigmas and the one after (where the refiner picks up), the whole schedule's
// step count kept (DDIM's stride, DPM++'s lower_order_final read it) and
// truncated_end set. InvalidArgument when the base gets no step or every step.
Result<Schedule> schedule_head(const Schedule& full, int cutoff, float switch_at);

// The refiner's share of its own schedule (engine/img2img.h cut_schedule from
// refiner_start_index): the latent is handed over as it is, no noise added.
// InvalidArgument when the refiner gets no step.
Result<Schedule> schedule_tail(const Schedule& full, int cutoff, float switch_at);

// The refiner UNet's time ids for a batch of `batch` rows (2: negative then
// positive; 1: positive): (height, width, 0, 0, aesthetic score) per row, each
// rounded to `dtype` (diffusers builds add_time_ids in the pipeline's dtype).
std::vector<float> refiner_time_ids(const spec::GenerationSettings& s, int batch, kernels::DType dtype);

}  // namespace hipq::engine
