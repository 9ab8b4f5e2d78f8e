#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "spec/generation_settings.h"

namespace hipq::engine {
namespace {

// torch.linspace(start, end, steps, dtype=float32) on the CPU as torch 2.x
// computes it: the first half counts up from start, the second half down from
// end, each element one fused multiply-add (torch's kernels are compiled with
// contraction). torch 1.x built 8-wide chunks from a chunk base instead, which
// differs in the last bit of some betas.
std::vector<float> torch_linspace_f32(double start_d, double end_d, int64_t steps) {
  std::vector<float> out(static_cast<size_t>(steps));
  if (steps == 1) {
    out[0] = static_cast<float>(start_d);
    return out;
  }
  const float start = static_cast<float>(start_d);
  const float end = static_cast<float>(end_d);
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t idx = 0; idx < steps; ++idx) {
    out[static_cast<size_t>(idx)] = idx < halfway ? std::fma(step, static_cast<float>(idx), start)
                                                  : std::fma(-step, static_cast<float>(steps - idx - 1), end);
  }
  return out;
}

// np.interp at x over xp = 0..n-1 (double math as numpy does).
double interp(double x, const std::vector<float>& fp) {
  const int64_t n = static_cast<int64_t>(fp.size());
  if (x <= 0) return fp.front();
  if (x >= static_cast<double>(n - 1)) return fp.back();
  const int64_t j = static_cast<int64_t>(std::floor(x));
  const double slope = (static_cast<double>(fp[j + 1]) - static_cast<double>(fp[j])) / 1.0;
  return slope * (x - static_cast<double>(j)) + static_cast<double>(fp[j]);
}

// numpy's linspace(start, stop, num) in float64 (endpoint included).
std::vector<double> np_linspace(double start, double stop, int64_t num) {
  std::vector<double> y(static_cast<size_t>(num));
  if (num == 1) {
    y[0] = start;
    return y;
  }
  const double step = (stop - start) / static_cast<double>(num - 1);
  for (int64_t i = 0; i < num; ++i) y[static_cast<size_t>(i)] = static_cast<double>(i) * step + start;
  y.back() = stop;
  return y;
}

// np.arange(start, 0, -step) in float64: ceil(start / step) values start - i * step.
std::vector<double> np_arange_down(double start, double step) {
  const auto count = static_cast<int64_t>(std::ceil((0.0 - start) / -step));
  std::vector<double> out;
  for (int64_t i = 0; i < count; ++i) out.push_back(start + static_cast<double>(i) * -step);
  return out;
}

// Karras et al. (2022) sigmas, rho = 7, from sigma_max down to sigma_min.
std::vector<double> karras_sigmas(double sigma_min, double sigma_max, int steps) {
  const double rho = 7.0;
  const double min_inv = std::pow(sigma_min, 1.0 / rho);
  const double max_inv = std::pow(sigma_max, 1.0 / rho);
  const auto ramp = np_linspace(0.0, 1.0, steps);
  std::vector<double> out(ramp.size());
  for (size_t i = 0; i < ramp.size(); ++i) out[i] = std::pow(max_inv + ramp[i] * (min_inv - max_inv), rho);
  return out;
}

// diffusers' _sigma_to_t: fractional timestep of `sigma` on the log-sigma table.
double sigma_to_t(double sigma, const std::vector<float>& log_sigmas) {
  const double log_sigma = std::log(std::max(sigma, 1e-10));
  const int64_t n = static_cast<int64_t>(log_sigmas.size());
  // low_idx = (number of entries with log_sigma - log_sigmas[i] >= 0) counted
  // cumulatively, argmax = the last index where the count peaks; clipped.
  int64_t count = 0, best = 0, low = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (log_sigma - static_cast<double>(log_sigmas[static_cast<size_t>(i)]) >= 0) ++count;
    if (count > best) {
      best = count;
      low = i;
    }
  }
  low = std::min(low, n - 2);
  const int64_t high = low + 1;
  const float lo = log_sigmas[static_cast<size_t>(low)];
  const float hi = log_sigmas[static_cast<size_t>(high)];
  double w = (static_cast<double>(lo) - log_sigma) / static_cast<double>(lo - hi);
  w = std::clamp(w, 0.0, 1.0);
  return (1.0 - w) * static_cast<double>(low) + w * static_cast<double>(high);
}

// ((1 - a) / a) ** 0.5 in fp32, as torch computes the sigma table.
std::vector<float> train_sigmas(const std::vector<float>& alphas_cumprod) {
  std::vector<float> s(alphas_cumprod.size());
  for (size_t i = 0; i < s.size(); ++i) s[i] = std::sqrt((1.0f - alphas_cumprod[i]) / alphas_cumprod[i]);
  return s;
}

// Integer timesteps for DDIM / DPM-Solver (int64 in diffusers).
Result<std::vector<int64_t>> integer_timesteps(const SchedulerConfig& cfg, int steps, bool dpm) {
  const int64_t n = cfg.num_train_timesteps;
  std::vector<int64_t> ts;
  if (cfg.timestep_spacing == "leading") {
    // DPM-Solver divides by steps + 1 and drops the last point.
    const int64_t count = dpm ? steps + 1 : steps;
    const int64_t ratio = n / count;
    for (int64_t i = count - 1; i >= (dpm ? 1 : 0); --i) ts.push_back(i * ratio + cfg.steps_offset);
  } else if (cfg.timestep_spacing == "trailing") {
    for (double v : np_arange_down(static_cast<double>(n), static_cast<double>(n) / steps))
      ts.push_back(static_cast<int64_t>(std::nearbyint(v)) - 1);
  } else if (cfg.timestep_spacing == "linspace") {
    const auto lin = np_linspace(0.0, static_cast<double>(n - 1), dpm ? steps + 1 : steps);
    for (int64_t i = static_cast<int64_t>(lin.size()) - 1; i >= (dpm ? 1 : 0); --i)
      ts.push_back(static_cast<int64_t>(std::nearbyint(lin[static_cast<size_t>(i)])));
  } else {
    return Status::InvalidArgument("scheduler config: timestep_spacing '" + cfg.timestep_spacing +
                                   "' is not one of leading, trailing, linspace");
  }
  return ts;
}

float max_of(const std::vector<float>& v) { return *std::max_element(v.begin(), v.end()); }

// The timesteps and sigmas of diffusers' k-diffusion style schedulers (Euler,
// Heun, LMS, KDPM2, their Karras variants) before the final sigma: timesteps
// by timestep_spacing, sigmas interpolated on the training sigmas, or Karras'
// sigmas with their fractional timesteps (rounded to integers where the
// scheduler rounds them: `round_karras_t`).
struct KTable {
  std::vector<double> ts;
  std::vector<double> sig;
  std::vector<float> full;  // the training sigmas
};

Result<KTable> k_table(const SchedulerConfig& cfg, int steps, bool karras, const std::vector<float>& ac,
                       bool round_karras_t = false) {
  const int64_t n = cfg.num_train_timesteps;
  KTable out;
  std::vector<double>& ts = out.ts;
  if (cfg.timestep_spacing == "linspace") {
    const auto lin = np_linspace(0.0, static_cast<double>(n - 1), steps);
    for (auto it = lin.rbegin(); it != lin.rend(); ++it) ts.push_back(static_cast<float>(*it));
  } else if (cfg.timestep_spacing == "leading") {
    const int64_t ratio = n / steps;
    for (int64_t i = steps - 1; i >= 0; --i) ts.push_back(static_cast<double>(i * ratio + cfg.steps_offset));
  } else if (cfg.timestep_spacing == "trailing") {
    for (double v : np_arange_down(static_cast<double>(n), static_cast<double>(n) / steps))
      ts.push_back(std::nearbyint(v) - 1.0);
  } else {
    return Status::InvalidArgument("scheduler config: timestep_spacing '" + cfg.timestep_spacing +
                                   "' is not one of leading, trailing, linspace");
  }
  out.full = train_sigmas(ac);
  for (double t : ts) out.sig.push_back(interp(t, out.full));
  if (karras) {
    std::vector<float> log_sigmas(out.full.size());
    for (size_t i = 0; i < out.full.size(); ++i) log_sigmas[i] = std::log(out.full[i]);
    out.sig = karras_sigmas(out.sig.back(), out.sig.front(), steps);
    ts.clear();
    for (double s : out.sig) {
      const double t = sigma_to_t(s, log_sigmas);
      ts.push_back(round_karras_t ? std::nearbyint(t) : t);
    }
  }
  return out;
}

// init_noise_sigma of the k-diffusion style schedulers: max sigma, or
// sqrt(max^2 + 1) for "leading" spacing.
float k_init_noise_sigma(const SchedulerConfig& cfg, const std::vector<float>& sigmas) {
  const float max_sigma = max_of(sigmas);
  return (cfg.timestep_spacing == "linspace" || cfg.timestep_spacing == "trailing")
             ? max_sigma
             : std::sqrt(max_sigma * max_sigma + 1.0f);
}

Result<Schedule> euler_schedule(const SchedulerConfig& cfg, int steps, bool karras, std::vector<float> ac) {
  if (cfg.interpolation_type != "linear")
    return Status::Unimplemented("scheduler config: interpolation_type '" + cfg.interpolation_type +
                                 "' (only \"linear\" is supported)");
  HIPQ_ASSIGN_OR_RETURN(KTable k, k_table(cfg, steps, karras, ac));
  Schedule out;
  out.kind = karras ? SamplerKind::kEulerKarras : SamplerKind::kEuler;
  for (double t : k.ts) out.timesteps.push_back(static_cast<float>(t));
  for (double s : k.sig) out.sigmas.push_back(static_cast<float>(s));
  out.sigmas.push_back(cfg.final_sigmas_type == "sigma_min" ? k.full.front() : 0.0f);
  out.init_noise_sigma = k_init_noise_sigma(cfg, out.sigmas);
  out.alphas_cumprod = std::move(ac);
  return out;
}

// HeunDiscreteScheduler: the Euler table with every sigma but the first and
// the last repeated (each step but the last calls the model twice), and every
// timestep but the first repeated. Always ends at sigma 0.
Result<Schedule> heun_schedule(const SchedulerConfig& cfg, int steps, bool karras, std::vector<float> ac) {
  HIPQ_ASSIGN_OR_RETURN(KTable k, k_table(cfg, steps, karras, ac));
  Schedule out;
  for (size_t i = 0; i < k.ts.size(); ++i) {
    const float t = static_cast<float>(k.ts[i]);
    const float s = static_cast<float>(k.sig[i]);
    out.timesteps.push_back(t);
    out.sigmas.push_back(s);
    if (i > 0) {
      out.timesteps.push_back(t);
      out.sigmas.push_back(s);
    }
  }
  out.sigmas.push_back(0.0f);
  out.init_noise_sigma = k_init_noise_sigma(cfg, out.sigmas);
  out.alphas_cumprod = std::move(ac);
  return out;
}

// LMSDiscreteScheduler: the Euler table ending at sigma 0.
Result<Schedule> lms_schedule(const SchedulerConfig& cfg, int steps, bool karras, std::vector<float> ac) {
  HIPQ_ASSIGN_OR_RETURN(KTable k, k_table(cfg, steps, karras, ac));
  Schedule out;
  for (double t : k.ts) out.timesteps.push_back(static_cast<float>(t));
  for (double s : k.sig) out.sigmas.push_back(static_cast<float>(s));
  out.sigmas.push_back(0.0f);
  out.init_noise_sigma = k_init_noise_sigma(cfg, out.sigmas);
  out.alphas_cumprod = std::move(ac);
  return out;
}

// diffusers' _sigma_to_t where KDPM2 calls it with an fp32 torch sigma and the
// fp32 torch log-sigma table: log in double, everything after in fp32.
float sigma_to_t_f32(float sigma, const std::vector<float>& log_sigmas) {
  const float log_sigma = static_cast<float>(std::log(std::max(static_cast<double>(sigma), 1e-10)));
  const int64_t n = static_cast<int64_t>(log_sigmas.size());
  int64_t count = 0, best = 0, low = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (log_sigma - log_sigmas[static_cast<size_t>(i)] >= 0.0f) ++count;
    if (count > best) {
      best = count;
      low = i;
    }
  }
  low = std::min(low, n - 2);
  const int64_t high = low + 1;
  const float lo = log_sigmas[static_cast<size_t>(low)];
  const float hi = log_sigmas[static_cast<size_t>(high)];
  float w = (lo - log_sigma) / (lo - hi);
  w = std::clamp(w, 0.0f, 1.0f);
  return (1.0f - w) * static_cast<float>(low) + w * static_cast<float>(high);
}

// torch.lerp(a, b, 0.5) in fp32 (weight >= 0.5: b - (b - a) * (1 - w)).
float lerp_half(float a, float b) { return b - (b - a) * 0.5f; }

// KDPM2DiscreteScheduler / KDPM2AncestralDiscreteScheduler. Each step but the
// last calls the model at sigma s_k and at an interpolated sigma between s_k
// and the next (KDPM2: the geometric mean of s_k and s_{k+1}; ancestral: of
// s_k and sigma_down_k). Schedule.sigmas holds the sigma of each model call in
// call order, then 0: [s_0, i_0', s_1, i_1', ..., s_{n-1}, 0], where i_k' is
// the interpolated sigma of step k; the samplers read the step's sigmas from
// it (engine/samplers/dpm2.cpp). Timesteps likewise: t_k and the fractional
// timestep of i_k'.
Result<Schedule> kdpm2_schedule(const SchedulerConfig& cfg, int steps, bool karras, bool ancestral,
                                std::vector<float> ac) {
  HIPQ_ASSIGN_OR_RETURN(KTable k, k_table(cfg, steps, karras, ac, /*round_karras_t=*/true));
  const size_t n = k.sig.size();
  std::vector<float> log_sigmas(k.full.size());
  for (size_t i = 0; i < k.full.size(); ++i) log_sigmas[i] = static_cast<float>(std::log(k.full[i]));
  std::vector<float> s(n + 1, 0.0f);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<float>(k.sig[i]);
  // interpol[i] for the step from s[i] (ancestral) or into s[i] (KDPM2).
  std::vector<float> interpol(n + 1, 0.0f);
  if (ancestral) {
    for (size_t i = 0; i + 2 <= n; ++i) {
      const float sn2 = s[i + 1] * s[i + 1], s2 = s[i] * s[i];
      const float up = std::sqrt(sn2 * (s2 - sn2) / s2);
      const float down = std::sqrt(sn2 - up * up);
      interpol[i] = std::exp(lerp_half(std::log(s[i]), std::log(down)));
    }
  } else {
    for (size_t i = 1; i < n; ++i) interpol[i] = std::exp(lerp_half(std::log(s[i]), std::log(s[i - 1])));
  }
  Schedule out;
  for (size_t i = 0; i < n; ++i) {
    out.timesteps.push_back(static_cast<float>(k.ts[i]));
    out.sigmas.push_back(s[i]);
    if (i + 1 < n) {
      const float si = ancestral ? interpol[i] : interpol[i + 1];
      out.timesteps.push_back(sigma_to_t_f32(si, log_sigmas));
      out.sigmas.push_back(si);
    }
  }
  out.sigmas.push_back(0.0f);
  out.init_noise_sigma = k_init_noise_sigma(cfg, s);
  out.alphas_cumprod = std::move(ac);
  return out;
}

Result<Schedule> ddim_schedule(const SchedulerConfig& cfg, int steps, std::vector<float> ac) {
  HIPQ_ASSIGN_OR_RETURN(auto ts, integer_timesteps(cfg, steps, false));
  Schedule out;
  out.kind = SamplerKind::kDdim;
  const auto full = train_sigmas(ac);
  for (int64_t t : ts) {
    if (t < 0 || t >= cfg.num_train_timesteps)
      return Status::InvalidArgument("scheduler config: steps_offset " + std::to_string(cfg.steps_offset) +
                                     " puts timestep " + std::to_string(t) + " outside [0, " +
                                     std::to_string(cfg.num_train_timesteps) + ")");
    out.timesteps.push_back(static_cast<float>(t));
    out.sigmas.push_back(full[static_cast<size_t>(t)]);
  }
  out.sigmas.push_back(0.0f);
  out.final_alpha_cumprod = cfg.set_alpha_to_one ? 1.0f : ac.front();
  out.init_noise_sigma = 1.0f;
  out.alphas_cumprod = std::move(ac);
  return out;
}

Result<Schedule> dpm_schedule(const SchedulerConfig& cfg, int steps, bool karras, std::vector<float> ac) {
  const auto full = train_sigmas(ac);
  std::vector<double> ts;
  std::vector<double> sig;
  if (karras) {
    std::vector<float> log_sigmas(full.size());
    for (size_t i = 0; i < full.size(); ++i) log_sigmas[i] = std::log(full[i]);
    sig = karras_sigmas(full.front(), full.back(), steps);
    for (double s : sig) ts.push_back(std::nearbyint(sigma_to_t(s, log_sigmas)));
  } else {
    HIPQ_ASSIGN_OR_RETURN(auto its, integer_timesteps(cfg, steps, true));
    for (int64_t t : its) {
      ts.push_back(static_cast<double>(t));
      sig.push_back(interp(static_cast<double>(t), full));
    }
  }
  Schedule out;
  out.kind = karras ? SamplerKind::kDpmpp2mKarras : SamplerKind::kDpmpp2m;
  for (double t : ts) out.timesteps.push_back(static_cast<float>(static_cast<int64_t>(t)));
  for (double s : sig) out.sigmas.push_back(static_cast<float>(s));
  out.sigmas.push_back(cfg.final_sigmas_type == "sigma_min" ? full.front() : 0.0f);
  out.init_noise_sigma = 1.0f;
  out.alphas_cumprod = std::move(ac);
  return out;
}

// LCMScheduler: `steps` timesteps picked evenly (floor of linspace, no
// endpoint) from the distillation's grid k-1, 2k-1, ..., N-1 (k = N //
// original_inference_steps), counted down. Sigmas are the equivalent sigmas
// of the timesteps (informational).
Result<Schedule> lcm_schedule(const SchedulerConfig& cfg, int steps, std::vector<float> ac) {
  const int64_t original = cfg.original_inference_steps;
  const int64_t k = cfg.num_train_timesteps / original;
  std::vector<int64_t> origin;  // descending
  for (int64_t i = original; i >= 1; --i) origin.push_back(i * k - 1);
  if (steps > original)
    return Status::InvalidArgument("lcm: steps " + std::to_string(steps) +
                                   " is more than the scheduler's original_inference_steps " +
                                   std::to_string(original));
  const auto full = train_sigmas(ac);
  Schedule out;
  const double count = static_cast<double>(origin.size());
  for (int i = 0; i < steps; ++i) {
    // np.linspace(0, len, num=steps, endpoint=False) then floor
    const double v = static_cast<double>(i) * (count / static_cast<double>(steps));
    const int64_t t = origin[static_cast<size_t>(std::floor(v))];
    out.timesteps.push_back(static_cast<float>(t));
    out.sigmas.push_back(full[static_cast<size_t>(t)]);
  }
  out.sigmas.push_back(0.0f);
  out.init_noise_sigma = 1.0f;
  out.alphas_cumprod = std::move(ac);
  return out;
}

}  // namespace

Result<SamplerKind> parse_sampler_kind(std::string_view name) {
  if (const spec::SamplerName* s = spec::find_sampler(name)) return s->kind;
  return Status::InvalidArgument("unknown sampler '" + std::string(name) + "' (expected " +
                                 spec::join_names(spec::known_samplers()) + ")");
}

std::string_view sampler_kind_name(SamplerKind kind) {
  for (const spec::SamplerName& s : spec::sampler_names())
    if (s.kind == kind) return s.name;
  return "?";
}

SchedulerConfig SchedulerConfig::defaults_for_family(std::string_view family) {
  SchedulerConfig c;  // SDXL's published scheduler/config.json
  if (family == "sd1" || family == "sd2") {
    // SD 1.x / 2.x base ship a PNDM config with the same betas; only what the
    // samplers here read differs: no timestep_spacing (diffusers' default for
    // the scheduler class applies, "leading" for PNDM-derived configs).
    c.steps_offset = 1;
    c.timestep_spacing = "leading";
  }
  return c;
}

Result<SchedulerConfig> SchedulerConfig::from_json(const nlohmann::json& j) {
  return from_json(j, SchedulerConfig{});
}

Result<SchedulerConfig> SchedulerConfig::from_json(const nlohmann::json& j, const SchedulerConfig& defaults) {
  SchedulerConfig c = defaults;
  if (!j.is_object()) return Status::InvalidArgument("scheduler config: not a JSON object");
  auto bad = [](const char* field, const nlohmann::json& v, const char* want) {
    return Status::InvalidArgument(std::string("scheduler config: field \"") + field + "\" is " + v.dump() +
                                   ", expected " + want);
  };
  auto read_int = [&](const char* f, int& out) -> Status {
    if (!j.contains(f) || j[f].is_null()) return Status::Ok();
    if (!j[f].is_number_integer()) return bad(f, j[f], "an integer");
    out = j[f].get<int>();
    return Status::Ok();
  };
  auto read_double = [&](const char* f, double& out) -> Status {
    if (!j.contains(f) || j[f].is_null()) return Status::Ok();
    if (!j[f].is_number()) return bad(f, j[f], "a number");
    out = j[f].get<double>();
    return Status::Ok();
  };
  auto read_bool = [&](const char* f, bool& out) -> Status {
    if (!j.contains(f) || j[f].is_null()) return Status::Ok();
    if (!j[f].is_boolean()) return bad(f, j[f], "true or false");
    out = j[f].get<bool>();
    return Status::Ok();
  };
  auto read_string = [&](const char* f, std::string& out, std::initializer_list<const char*> allowed) -> Status {
    if (!j.contains(f) || j[f].is_null()) return Status::Ok();
    if (!j[f].is_string()) return bad(f, j[f], "a string");
    const std::string v = j[f].get<std::string>();
    std::string list;
    for (const char* a : allowed) {
      if (v == a) {
        out = v;
        return Status::Ok();
      }
      list += (list.empty() ? "" : ", ") + std::string(a);
    }
    return bad(f, j[f], ("one of " + list).c_str());
  };
  HIPQ_RETURN_IF_ERROR(read_int("num_train_timesteps", c.num_train_timesteps));
  HIPQ_RETURN_IF_ERROR(read_double("beta_start", c.beta_start));
  HIPQ_RETURN_IF_ERROR(read_double("beta_end", c.beta_end));
  HIPQ_RETURN_IF_ERROR(read_string("beta_schedule", c.beta_schedule, {"linear", "scaled_linear"}));
  HIPQ_RETURN_IF_ERROR(read_string("prediction_type", c.prediction_type, {"epsilon", "v_prediction", "sample"}));
  HIPQ_RETURN_IF_ERROR(read_string("timestep_spacing", c.timestep_spacing, {"leading", "trailing", "linspace"}));
  HIPQ_RETURN_IF_ERROR(read_int("steps_offset", c.steps_offset));
  HIPQ_RETURN_IF_ERROR(read_bool("use_karras_sigmas", c.use_karras_sigmas));
  HIPQ_RETURN_IF_ERROR(read_bool("set_alpha_to_one", c.set_alpha_to_one));
  HIPQ_RETURN_IF_ERROR(read_bool("clip_sample", c.clip_sample));
  HIPQ_RETURN_IF_ERROR(read_double("clip_sample_range", c.clip_sample_range));
  HIPQ_RETURN_IF_ERROR(read_string("interpolation_type", c.interpolation_type, {"linear", "log_linear"}));
  HIPQ_RETURN_IF_ERROR(read_bool("lower_order_final", c.lower_order_final));
  HIPQ_RETURN_IF_ERROR(read_bool("euler_at_final", c.euler_at_final));
  HIPQ_RETURN_IF_ERROR(read_string("final_sigmas_type", c.final_sigmas_type, {"zero", "sigma_min"}));
  HIPQ_RETURN_IF_ERROR(read_string("variance_type", c.variance_type,
                                   {"fixed_small", "fixed_small_log", "fixed_large", "fixed_large_log", "learned",
                                    "learned_range"}));
  HIPQ_RETURN_IF_ERROR(read_int("original_inference_steps", c.original_inference_steps));
  HIPQ_RETURN_IF_ERROR(read_double("timestep_scaling", c.timestep_scaling));
  if (c.original_inference_steps < 1 || c.original_inference_steps > c.num_train_timesteps)
    return bad("original_inference_steps", j.value("original_inference_steps", nlohmann::json()),
               "1..num_train_timesteps");
  if (j.contains("trained_betas") && !j["trained_betas"].is_null())
    return Status::Unimplemented("scheduler config: \"trained_betas\" is not supported");
  if (c.num_train_timesteps < 2 || c.num_train_timesteps > 100000)
    return bad("num_train_timesteps", j.value("num_train_timesteps", nlohmann::json()), "2..100000");
  if (!(c.beta_start > 0) || !(c.beta_end > c.beta_start) || !(c.beta_end < 1))
    return Status::InvalidArgument("scheduler config: need 0 < beta_start < beta_end < 1 (got " +
                                   std::to_string(c.beta_start) + ", " + std::to_string(c.beta_end) + ")");
  return c;
}

Result<std::vector<float>> make_alphas_cumprod(const SchedulerConfig& cfg) {
  std::vector<float> betas;
  if (cfg.beta_schedule == "linear") {
    betas = torch_linspace_f32(cfg.beta_start, cfg.beta_end, cfg.num_train_timesteps);
  } else if (cfg.beta_schedule == "scaled_linear") {
    betas = torch_linspace_f32(std::sqrt(cfg.beta_start), std::sqrt(cfg.beta_end), cfg.num_train_timesteps);
    for (auto& b : betas) b = b * b;
  } else {
    return Status::Unimplemented("scheduler config: beta_schedule '" + cfg.beta_schedule + "'");
  }
  // torch.cumprod on the CPU accumulates fp32 in double and rounds each output.
  std::vector<float> ac(betas.size());
  double acc = 1.0;
  for (size_t i = 0; i < betas.size(); ++i) {
    acc *= static_cast<double>(1.0f - betas[i]);
    ac[i] = static_cast<float>(acc);
  }
  return ac;
}

Result<Schedule> make_schedule(const SchedulerConfig& cfg, int steps, SamplerKind kind) {
  if (steps < 1 || steps > cfg.num_train_timesteps)
    return Status::InvalidArgument("steps must be in 1.." + std::to_string(cfg.num_train_timesteps) + " (got " +
                                   std::to_string(steps) + ")");
  HIPQ_ASSIGN_OR_RETURN(auto ac, make_alphas_cumprod(cfg));
  // Karras sigmas: the sampler's name says so (spec::sampler_names()), or the
  // model's scheduler config does.
  bool karras = cfg.use_karras_sigmas;
  for (const spec::SamplerName& n : spec::sampler_names())
    if (n.kind == kind && n.karras) karras = true;
  Result<Schedule> made = Status::Internal("make_schedule: unknown sampler kind");
  switch (kind) {
    case SamplerKind::kEuler:
    case SamplerKind::kEulerKarras: made = euler_schedule(cfg, steps, karras, std::move(ac)); break;
    // the Euler table (EulerAncestral has no Karras option)
    case SamplerKind::kEulerAncestral: made = euler_schedule(cfg, steps, false, std::move(ac)); break;
    // DDIM's table (DDPMScheduler.set_timesteps is the same)
    case SamplerKind::kDdim:
    case SamplerKind::kDdpm: made = ddim_schedule(cfg, steps, std::move(ac)); break;
    // DPM-Solver's table (UniPCMultistepScheduler.set_timesteps is the same)
    case SamplerKind::kDpmpp2m:
    case SamplerKind::kDpmpp2mKarras:
    case SamplerKind::kDpmpp2mSde:
    case SamplerKind::kDpmpp2mSdeKarras:
    case SamplerKind::kDpmpp3mSde:
    case SamplerKind::kDpmpp3mSdeKarras:
    case SamplerKind::kUnipc: made = dpm_schedule(cfg, steps, karras, std::move(ac)); break;
    case SamplerKind::kDeis:
      // DPM-Solver's table ending at sigma_min (the first training sigma), or
      // at the last Karras sigma repeated.
      made = dpm_schedule(cfg, steps, karras, std::move(ac));
      if (made.ok()) {
        Schedule& d = *made;
        d.sigmas.back() = karras ? d.sigmas[d.sigmas.size() - 2] : train_sigmas(d.alphas_cumprod).front();
      }
      break;
    case SamplerKind::kHeun:
    case SamplerKind::kHeunKarras: made = heun_schedule(cfg, steps, karras, std::move(ac)); break;
    case SamplerKind::kDpm2:
    case SamplerKind::kDpm2Karras:
    case SamplerKind::kDpm2Ancestral:
    case SamplerKind::kDpm2AncestralKarras: {
      const bool ancestral = kind == SamplerKind::kDpm2Ancestral || kind == SamplerKind::kDpm2AncestralKarras;
      made = kdpm2_schedule(cfg, steps, karras, ancestral, std::move(ac));
      break;
    }
    case SamplerKind::kLcm: made = lcm_schedule(cfg, steps, std::move(ac)); break;
    case SamplerKind::kLms:
    case SamplerKind::kLmsKarras: made = lms_schedule(cfg, steps, karras, std::move(ac)); break;
  }
  if (made.ok()) made->kind = kind;
  return made;
}

}  // namespace hipq::engine
