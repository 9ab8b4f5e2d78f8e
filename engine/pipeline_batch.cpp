// Pipeline::generate_batch and what decides a batch (docs/batching.md).
#include <optional>

#include "engine/decoded_image.h"
#include "engine/pipeline.h"
#include "engine/pipeline_impl.h"
#include "engine/unet_step.h"
#include "spec/phases.h"

namespace hipq::engine {

using kernels::DType;

std::string batch_key(const spec::GenerationSettings& settings) {
  if (!settings.init_image.empty() || !settings.refiner.empty()) return {};
  nlohmann::json j = settings.to_json();
  j.erase("prompt");
  j.erase("negative_prompt");
  j.erase("seed");
  return j.dump();
}

Result<int> Pipeline::batch_capacity(const spec::GenerationSettings& settings, int limit) {
  HIPQ_RETURN_IF_ERROR(settings.validate());
  Impl& im = *impl_;
  if (limit <= 1 || batch_key(settings).empty()) return 1;
  HIPQ_ASSIGN_OR_RETURN(MemoryPlan alone,
                        choose_placement(im.shapes, settings, im.options.placement, *im.backend));
  if (alone.placement == Placement::kLow) return 1;
  int fits = 1;
  for (int n = 2; n <= limit; ++n) {
    auto plan = choose_placement(im.shapes, settings, Placement::kStandard, *im.backend, nullptr, n);
    if (!plan.ok()) break;
    fits = n;
  }
  return fits;
}

Result<std::vector<Result<GenerationOutput>>> Pipeline::generate_batch(
    const std::vector<spec::GenerationSettings>& jobs, const std::vector<ProgressFn>& progress,
    const std::vector<const std::atomic<bool>*>& cancel, const DecodedFn& decoded_fn) {
  const size_t n = jobs.size();
  if (n == 0) return Status::InvalidArgument("generate_batch: no jobs");
  if ((!progress.empty() && progress.size() != n) || (!cancel.empty() && cancel.size() != n))
    return Status::InvalidArgument("generate_batch: " + std::to_string(n) + " jobs but " +
                                   std::to_string(progress.size()) + " progress callbacks and " +
                                   std::to_string(cancel.size()) + " cancel flags");
  static const ProgressFn kNoProgress;
  auto progress_of = [&](size_t i) -> const ProgressFn& {
    return progress.empty() ? kNoProgress : progress[i];
  };
  auto cancel_of = [&](size_t i) -> const std::atomic<bool>* { return cancel.empty() ? nullptr : cancel[i]; };
  if (n == 1) {
    std::vector<Result<GenerationOutput>> one;
    one.push_back(generate(jobs[0], progress_of(0), cancel_of(0)));
    if (one.front().ok() && decoded_fn) decoded_fn(0, *one.front());
    return one;
  }
  for (size_t i = 0; i < n; ++i)
    HIPQ_RETURN_IF_ERROR(jobs[i].validate().WithContext("job " + std::to_string(i + 1)));
  const std::string key = batch_key(jobs[0]);
  if (key.empty())
    return Status::InvalidArgument("generate_batch: img2img and base + refiner jobs run alone (generate())");
  for (size_t i = 1; i < n; ++i)
    if (batch_key(jobs[i]) != key)
      return Status::InvalidArgument("generate_batch: job " + std::to_string(i + 1) +
                                     " differs from job 1 in a setting other than the prompts and the seed");
  const spec::GenerationSettings& s = jobs[0];
  Impl& im = *impl_;
  if (im.refiner_model)
    return Status::InvalidArgument(im.components.spec +
                                   " is an SDXL refiner: it runs img2img or after a base, alone");
  kernels::Backend& be = *im.backend;
  HIPQ_ASSIGN_OR_RETURN(SamplerKind kind, parse_sampler_kind(s.sampler));
  HIPQ_ASSIGN_OR_RETURN(RngKind rng_kind, parse_rng_kind(s.rng));
  // A batch is never img2img: a VAE encoder an earlier img2img job loaded
  // goes back first, as generate() lets it go for a text-to-image job (the
  // plan, and batch_capacity, count it for img2img jobs only).
  im.vae_encoder.reset();

  // What every job of the batch starts with: job 1's record, made once and
  // copied (warm, plan, the load row with the VAE's dtype switch added as
  // generate() adds it).
  GenerationOutput common;
  be.reset_peak();
  PhasePeaks peaks(be);
  HIPQ_RETURN_IF_ERROR(pipeline_detail::begin_generation(im, nullptr, s, static_cast<int>(n), be, common));
  if (common.memory_plan.placement == Placement::kLow)
    return Status::FailedPrecondition("a batch of " + std::to_string(n) + " " + std::to_string(s.width) + "x" +
                                      std::to_string(s.height) + " jobs needs " + common.memory_plan.describe() +
                                      " in the standard placement; run fewer at once (batch_capacity)");
  common.batch_jobs = static_cast<int>(n);
  HIPQ_RETURN_IF_ERROR(pipeline_detail::load_decoder_in_plan_dtype(im, false, be, common));
  std::vector<GenerationOutput> outs(n, common);
  const SchedulerConfig scheduler_cfg = pipeline_detail::job_scheduler(im, s);
  HIPQ_ASSIGN_OR_RETURN(Schedule schedule, make_schedule(scheduler_cfg, s.steps, kind));

  const bool cfg = s.guidance > 1.0f;
  const int64_t lh = s.height / 8, lw = s.width / 8;
  const int64_t lc = im.unet->config().in_channels;
  const int64_t latent_numel = lc * lh * lw;
  HIPQ_ASSIGN_OR_RETURN(DType noise_dtype, precision_dtype(s.precision));

  // Each job's prompts encoded alone (its own text_encode row), its rows
  // then copied side by side for the UNet; each job's generator draws its
  // initial noise, as generate() draws it.
  std::vector<TorchGenerator> generators;
  generators.reserve(n);
  std::vector<float> start;
  start.reserve(static_cast<size_t>(latent_numel) * n);
  std::optional<DeviceTensor> hidden, pooled;
  std::vector<float> time_ids;
  int rows_per_job = 0;
  peaks.begin();
  for (size_t i = 0; i < n; ++i) {
    PhaseTimer timer(&be);
    HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseTextEncode)));
    HIPQ_ASSIGN_OR_RETURN(Impl::TextConditioning text, im.encode_text(jobs[i], cfg));
    if (!hidden) {
      rows_per_job = text.batch;
      std::vector<int64_t> hs = text.hidden.t.shape_vec();
      hs[0] *= static_cast<int64_t>(n);
      HIPQ_ASSIGN_OR_RETURN(DeviceTensor h, DeviceTensor::make(be, text.hidden.t.dtype, hs));
      hidden.emplace(std::move(h));
      if (im.family == "sdxl") {
        std::vector<int64_t> ps = text.pooled.t.shape_vec();
        ps[0] *= static_cast<int64_t>(n);
        HIPQ_ASSIGN_OR_RETURN(DeviceTensor p, DeviceTensor::make(be, text.pooled.t.dtype, ps));
        pooled.emplace(std::move(p));
      }
    }
    const int64_t at = static_cast<int64_t>(i) * rows_per_job;
    kernels::Tensor hidden_rows = hidden->t.slice(0, at, rows_per_job);
    HIPQ_RETURN_IF_ERROR(be.copy(text.hidden.t, hidden_rows));
    if (pooled) {
      kernels::Tensor pooled_rows = pooled->t.slice(0, at, rows_per_job);
      HIPQ_RETURN_IF_ERROR(be.copy(text.pooled.t, pooled_rows));
    }
    const std::vector<float> ids = im.time_ids(jobs[i], rows_per_job);
    time_ids.insert(time_ids.end(), ids.begin(), ids.end());
    HIPQ_RETURN_IF_ERROR(timer.end());
    HIPQ_ASSIGN_OR_RETURN(auto phases, timer.finish());
    outs[i].phases.insert(outs[i].phases.end(), phases.begin(), phases.end());
    generators.emplace_back(rng_kind, jobs[i].seed);
    const std::vector<float> noise = generators.back().randn(latent_numel, noise_dtype);
    start.insert(start.end(), noise.begin(), noise.end());
  }
  peaks.end(std::string(spec::kPhaseTextEncode));
  HIPQ_ASSIGN_OR_RETURN(
      DeviceTensor latents,
      DeviceTensor::from_host(be, start.data(), {static_cast<int64_t>(n), lc, lh, lw}, DType::kF32));

  const int batch = rows_per_job * static_cast<int>(n);
  StepNoiseSource noise{nullptr, noise_dtype, {}};
  for (TorchGenerator& g : generators) noise.per_latent.push_back(&g);
  pipeline_detail::LoopRun run;
  for (size_t i = 0; i < n; ++i) {
    outs[i].unet_batch = batch;
    outs[i].model_calls = static_cast<int>(schedule.timesteps.size());
    run.jobs.push_back(pipeline_detail::LoopJob{&jobs[i], &progress_of(i), cancel_of(i), &outs[i], false, 0});
  }
  run.total_steps = static_cast<int>(schedule.timesteps.size());
  PhaseTimer denoise_timer(&be);
  HIPQ_RETURN_IF_ERROR(denoise_timer.begin(std::string(spec::kPhaseDenoise)));
  peaks.begin();
  HIPQ_RETURN_IF_ERROR(pipeline_detail::denoise_loop(im, hidden->t, pooled ? &pooled->t : nullptr, time_ids,
                                                     batch, schedule, scheduler_cfg, latents.t, noise, run));
  HIPQ_RETURN_IF_ERROR(denoise_timer.end());
  peaks.end(std::string(spec::kPhaseDenoise));
  HIPQ_ASSIGN_OR_RETURN(auto denoise_phases, denoise_timer.finish());
  be.drop_constant_forms();
  HIPQ_RETURN_IF_ERROR(be.trim_cache());
  HIPQ_ASSIGN_OR_RETURN(std::vector<float> all, to_host_f32(be, latents.t));
  latents = DeviceTensor{};
  hidden.reset();
  pooled.reset();

  std::vector<Result<GenerationOutput>> results;
  results.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    GenerationOutput& out = outs[i];
    const pipeline_detail::LoopJob& lj = run.jobs[i];
    if (lj.stopped) {
      results.push_back(Status::Cancelled("generation cancelled at step " + std::to_string(lj.stopped_at) +
                                          " of " + std::to_string(run.total_steps) + " (its batch ran on)"));
      continue;
    }
    out.phases.insert(out.phases.end(), denoise_phases.begin(), denoise_phases.end());
    out.latent.assign(all.begin() + static_cast<std::ptrdiff_t>(i) * latent_numel,
                      all.begin() + static_cast<std::ptrdiff_t>(i + 1) * latent_numel);
    out.latent_shape = {1, lc, lh, lw};
    if (cancel_of(i) != nullptr && cancel_of(i)->load()) {
      results.push_back(Status::Cancelled("generation cancelled before decoding"));
      continue;
    }
    PhaseTimer timer(&be);
    HIPQ_RETURN_IF_ERROR(timer.begin(std::string(spec::kPhaseDecode)));
    Status decoded = pipeline_detail::decode_latent(im, be, jobs[i], peaks, out);
    if (!decoded.ok()) {
      // A job's decode is its own: the others decode on.
      results.push_back(decoded);
      continue;
    }
    HIPQ_RETURN_IF_ERROR(timer.end());
    HIPQ_ASSIGN_OR_RETURN(auto phases, timer.finish());
    out.phases.insert(out.phases.end(), phases.begin(), phases.end());
    out.peak_memory_bytes = peaks.job_peak();
    out.phase_peaks = peaks.phases();
    if (decoded_fn) decoded_fn(i, out);
    results.push_back(std::move(out));
  }
  const int64_t job_peak = peaks.job_peak();
  for (auto& r : results) {
    if (!r.ok()) continue;
    r->peak_memory_bytes = job_peak;
    r->phase_peaks = peaks.phases();
  }
  return results;
}

}  // namespace hipq::engine
