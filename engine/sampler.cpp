#include "engine/sampler.h"

namespace hipq::engine {

using kernels::Backend;
using kernels::Tensor;

bool draws_step_noise(SamplerKind kind) {
  switch (kind) {
    case SamplerKind::kEulerAncestral:
    case SamplerKind::kDpmpp2mSde:
    case SamplerKind::kDpmpp2mSdeKarras:
    case SamplerKind::kDpm2Ancestral:
    case SamplerKind::kDpm2AncestralKarras:
    case SamplerKind::kDdpm:
    case SamplerKind::kLcm:
    case SamplerKind::kDpmpp3mSde:
    case SamplerKind::kDpmpp3mSdeKarras: return true;
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
    case SamplerKind::kHeun:
    case SamplerKind::kHeunKarras: return sample_heun(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDpm2:
    case SamplerKind::kDpm2Karras: return sample_dpm2(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDpm2Ancestral:
    case SamplerKind::kDpm2AncestralKarras: return sample_dpm2(backend, schedule, cfg, x, denoise, &noise);
    case SamplerKind::kLms:
    case SamplerKind::kLmsKarras: return sample_lms(backend, schedule, cfg, x, denoise);
    case SamplerKind::kUnipc: return sample_unipc(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDeis: return sample_deis(backend, schedule, cfg, x, denoise);
    case SamplerKind::kDdpm: return sample_ddpm(backend, schedule, cfg, x, denoise, noise);
    case SamplerKind::kLcm: return sample_lcm(backend, schedule, cfg, x, denoise, noise);
    case SamplerKind::kDpmpp3mSde:
    case SamplerKind::kDpmpp3mSdeKarras: return sample_dpmpp_3m_sde(backend, schedule, cfg, x, denoise, noise);
  }
  return Status::Internal("sample: unknown sampler kind");
}

}  // namespace hipq::engine
