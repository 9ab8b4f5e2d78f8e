#include "engine/sampler.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;

bool draws_step_noise(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::kEulerAncestral:
    case SamplerKind::kDpmpp2mSde:
    case SamplerKind::kDpmpp2mSdeKarras: return true;
    default: return false;
  }
}

Status sample(Backend& backend, const Schedule& schedule, const SchedulerConfig& cfg, Tensor& x,
              const Denoiser& denoise, const StepNoiseSource& noise) {
  switch (schedule.kind) {
    case SamplerKind::kEuler:
    case SamplerKind::kEulerKarras: return sample_euler(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDdim: return sample_ddim(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDpmpp2m:
    case SamplerKind::kDpmpp2mKarras: return sample_dpmpp_2m(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDpmpp2mSde:
    case SamplerKind::kDpmpp2mSdeKarras: return sample_dpmpp_2m(backend, schedule, cfg, x, denoise, &noise);
    case SamplerKind::kEulerAncestral: return sample_euler_ancestral(backend, schedule, cfg, x, denoise, noise);
  }
  return Status::Internal("sample: unknown sampler kind");
}

}  // namespace hipq::engine
