#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "base/fs.h"
#include "engine/models/device_tensor.h"
#include "engine/rng.h"
#include "engine/samplers/step_noise.h"
#include "kernels/backend.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

// The model of these tests, on host vectors; run() hands it the sampler's
// device tensors (host memory on the cpu backend, copies on a GPU).
using HostDenoiser =
    std::function<Status(const std::vector<float>& in, const DenoiseStep& step, std::vector<float>& out)>;

kernels::Backend& cpu() {
  static std::unique_ptr<kernels::Backend> be = kernels::make_backend("cpu", 0).value();
  return *be;
}

// sample() on `be` from `noise`, the final latents back on the host.
Result<std::vector<float>> run(kernels::Backend& be, const Schedule& s, const SchedulerConfig& cfg,
                               const std::vector<float>& noise, const HostDenoiser& model,
                               const StepNoiseSource& step_noise = {}) {
  HIPQ_ASSIGN_OR_RETURN(DeviceTensor x, DeviceTensor::from_host(be, noise.data(),
                                                                {static_cast<int64_t>(noise.size())},
                                                                kernels::DType::kF32));
  Denoiser d = [&](const kernels::Tensor& in, const DenoiseStep& step, kernels::Tensor& out) -> Status {
    HIPQ_ASSIGN_OR_RETURN(std::vector<float> host_in, to_host_f32(be, in));
    std::vector<float> host_out(host_in.size());
    HIPQ_RETURN_IF_ERROR(model(host_in, step, host_out));
    return be.copy_to_device(host_out.data(), out.data, out.nbytes());
  };
  HIPQ_RETURN_IF_ERROR(sample(be, s, cfg, x.t, d, step_noise));
  return to_host_f32(be, x.t);
}

Result<std::vector<float>> run(const Schedule& s, const SchedulerConfig& cfg, const std::vector<float>& noise,
                               const HostDenoiser& model) {
  return run(cpu(), s, cfg, noise, model);
}

// The data distribution is a point mass at `c`, so the exact denoiser is known
// in closed form for every parameterisation; each sampler must then land on c
// (Euler, DPM++) or on DDIM's closed-form end point.
class PointMass {
 public:
  PointMass(std::vector<float> c, const Schedule& s, SamplerKind kind) : c_(std::move(c)), s_(s), kind_(kind) {}

  HostDenoiser denoiser() {
    return [this](const std::vector<float>& in, const DenoiseStep& step, std::vector<float>& out) {
      ++calls;
      for (size_t k = 0; k < in.size(); ++k) {
        if (kind_ == SamplerKind::kDdim) {
          const float a = s_.alphas_cumprod[static_cast<size_t>(step.timestep)];
          out[k] = (in[k] - std::sqrt(a) * c_[k]) / std::sqrt(1 - a);
        } else if (kind_ == SamplerKind::kDpmpp2m || kind_ == SamplerKind::kDpmpp2mKarras ||
                   kind_ == SamplerKind::kUnipc || kind_ == SamplerKind::kDeis) {
          const double alpha = 1 / std::sqrt(double(step.sigma) * step.sigma + 1);
          out[k] = static_cast<float>((in[k] - alpha * c_[k]) / (step.sigma * alpha));
        } else {
          const double x = in[k] * std::sqrt(double(step.sigma) * step.sigma + 1);  // undo scale_model_input
          out[k] = static_cast<float>((x - c_[k]) / step.sigma);
        }
      }
      return Status::Ok();
    };
  }
  int calls = 0;

 private:
  std::vector<float> c_;
  const Schedule& s_;
  SamplerKind kind_;
};

std::vector<float> target() { return {0.5f, -1.25f, 2.0f, 0.0f, -0.75f, 1.5f}; }

TEST(Sampler, EulerLandsOnThePointMass) {
  for (auto kind : {SamplerKind::kEuler, SamplerKind::kEulerKarras}) {
    SchedulerConfig cfg;
    auto s = make_schedule(cfg, 25, kind);
    ASSERT_TRUE(s.ok());
    PointMass pm(target(), *s, kind);
    auto x = run(*s, cfg, torch_randn_cpu(3, 6), pm.denoiser());
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    EXPECT_EQ(pm.calls, 25);
    for (size_t k = 0; k < x->size(); ++k) EXPECT_NEAR((*x)[k], target()[k], 1e-4) << sampler_kind_name(kind);
  }
}

TEST(Sampler, DpmppLandsOnThePointMass) {
  for (auto kind : {SamplerKind::kDpmpp2m, SamplerKind::kDpmpp2mKarras}) {
    SchedulerConfig cfg;
    auto s = make_schedule(cfg, 20, kind);
    ASSERT_TRUE(s.ok());
    PointMass pm(target(), *s, kind);
    auto x = run(*s, cfg, torch_randn_cpu(4, 6), pm.denoiser());
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    for (size_t k = 0; k < x->size(); ++k) EXPECT_NEAR((*x)[k], target()[k], 1e-4) << sampler_kind_name(kind);
  }
}

// The k-diffusion samplers of diffusers' second wave (Heun, DPM2, LMS) and
// UniPC solve the probability-flow ODE to sigma 0: with the exact denoiser of a
// point mass they land on it.
TEST(Sampler, HeunDpm2LmsUnipcLandOnThePointMass) {
  for (auto kind : {SamplerKind::kHeun, SamplerKind::kHeunKarras, SamplerKind::kDpm2, SamplerKind::kDpm2Karras,
                    SamplerKind::kLms, SamplerKind::kLmsKarras, SamplerKind::kUnipc}) {
    for (int steps : {1, 2, 7, 20}) {
      SchedulerConfig cfg;
      auto s = make_schedule(cfg, steps, kind);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      PointMass pm(target(), *s, kind);
      auto x = run(*s, cfg, torch_randn_cpu(6, 6), pm.denoiser());
      ASSERT_TRUE(x.ok()) << sampler_kind_name(kind) << ": " << x.status().ToString();
      EXPECT_EQ(pm.calls, static_cast<int>(s->timesteps.size()));
      for (size_t k = 0; k < x->size(); ++k)
        EXPECT_NEAR((*x)[k], target()[k], 1e-4) << sampler_kind_name(kind) << " " << steps << " steps";
    }
  }
}

// DEIS ends at sigma_min, not 0: with the point mass's exact epsilon e (constant
// along the ODE's solution) it lands on alpha_f c + sigma_f e.
TEST(Sampler, DeisFollowsTheClosedFormToSigmaMin) {
  for (int steps : {1, 3, 20}) {
    SchedulerConfig cfg;
    auto s = make_schedule(cfg, steps, SamplerKind::kDeis);
    ASSERT_TRUE(s.ok());
    PointMass pm(target(), *s, SamplerKind::kDeis);
    const auto noise = torch_randn_cpu(7, 6);
    auto x = run(*s, cfg, noise, pm.denoiser());
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    auto alpha_sigma = [](double sig) { return std::pair{1 / std::sqrt(sig * sig + 1), sig / std::sqrt(sig * sig + 1)}; };
    const auto [a_T, s_T] = alpha_sigma(s->sigmas.front());
    const auto [a_f, s_f] = alpha_sigma(s->sigmas.back());
    EXPECT_GT(s->sigmas.back(), 0.01f);
    for (size_t k = 0; k < 6; ++k) {
      const double e = (noise[k] - a_T * target()[k]) / s_T;
      EXPECT_NEAR((*x)[k], a_f * target()[k] + s_f * e, 1e-4) << steps << " steps";
    }
  }
}

// Heun and DPM2 call the model twice per step but the last: the denoiser sees
// one call per entry of schedule.timesteps, indexed in order, with the sigma
// the input was scaled by.
TEST(Sampler, TwoCallSamplersReportEveryModelCall) {
  for (auto kind : {SamplerKind::kHeun, SamplerKind::kDpm2, SamplerKind::kDpm2Ancestral}) {
    SchedulerConfig cfg;
    auto s = make_schedule(cfg, 5, kind);
    ASSERT_TRUE(s.ok());
    ASSERT_EQ(s->timesteps.size(), 9u) << sampler_kind_name(kind);
    ASSERT_EQ(s->sigmas.size(), 10u);
    std::vector<DenoiseStep> seen;
    HostDenoiser d = [&](const std::vector<float>& in, const DenoiseStep& st, std::vector<float>& out) {
      seen.push_back(st);
      for (size_t k = 0; k < in.size(); ++k) out[k] = 0.1f * in[k];
      return Status::Ok();
    };
    TorchGenerator gen(RngKind::kTorchCpu, 9);
    auto x = run(cpu(), *s, cfg, {1.0f, -2.0f}, d, {&gen});
    ASSERT_TRUE(x.ok()) << x.status().ToString();
    ASSERT_EQ(seen.size(), 9u);
    for (size_t j = 0; j < seen.size(); ++j) {
      EXPECT_EQ(seen[j].index, static_cast<int>(j));
      EXPECT_EQ(seen[j].count, 9);
      EXPECT_EQ(seen[j].timestep, s->timesteps[j]);
      EXPECT_EQ(seen[j].sigma, s->sigmas[j]);
    }
    // The second call of a step is at a lower noise level than the first.
    for (size_t j = 1; j < seen.size(); j += 2) EXPECT_LT(seen[j].sigma, seen[j - 1].sigma) << sampler_kind_name(kind);
  }
}

// LMS integrates the Lagrange basis polynomials of the last four sigmas over
// each step: a polynomial trajectory of degree <= 3 in sigma (x = p(sigma),
// derivative p'(sigma)) is followed exactly once four derivatives are known.
TEST(Sampler, LmsIsExactForCubicsInSigma) {
  SchedulerConfig cfg;
  cfg.prediction_type = "sample";
  auto s = make_schedule(cfg, 12, SamplerKind::kLms);
  ASSERT_TRUE(s.ok());
  // x(sigma) = 0.5 + 0.25 sigma - 0.02 sigma^2 + 0.001 sigma^3; the "sample"
  // model returns x0 = x - sigma * x'(sigma) so that (x - x0) / sigma = x'(sigma).
  auto p = [](double sg) { return 0.5 + 0.25 * sg - 0.02 * sg * sg + 0.001 * sg * sg * sg; };
  auto dp = [](double sg) { return 0.25 - 0.04 * sg + 0.003 * sg * sg; };
  std::vector<double> path;
  HostDenoiser d = [&](const std::vector<float>& in, const DenoiseStep& st, std::vector<float>& out) {
    const double x = in[0] * std::sqrt(double(st.sigma) * st.sigma + 1);  // undo scale_model_input
    path.push_back(x);
    out[0] = static_cast<float>(x - st.sigma * dp(st.sigma));
    return Status::Ok();
  };
  const float x_T = static_cast<float>(p(s->sigmas[0]) / s->init_noise_sigma);
  auto x = run(*s, cfg, {x_T}, d);
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  // The first three steps are lower order (not exact); the error they leave is carried, not grown.
  const double carried = path[3] - p(s->sigmas[3]);
  EXPECT_NEAR((*x)[0] - p(0.0), carried, 2e-4);
  EXPECT_GT(std::abs(path[1] - p(s->sigmas[1])), 1e-4);  // the first-order step alone is not exact
}

TEST(Sampler, DdimFollowsItsClosedForm) {
  SchedulerConfig cfg;
  auto s = make_schedule(cfg, 10, SamplerKind::kDdim);
  ASSERT_TRUE(s.ok());
  PointMass pm(target(), *s, SamplerKind::kDdim);
  const auto noise = torch_randn_cpu(5, 6);
  auto x = run(*s, cfg, noise, pm.denoiser());
  ASSERT_TRUE(x.ok());
  // Deterministic DDIM with the exact epsilon keeps e = (x_T - sqrt(a_T) c) / sqrt(1 - a_T):
  // the end point is sqrt(a_final) c + sqrt(1 - a_final) e.
  const double a_T = s->alphas_cumprod[static_cast<size_t>(s->timesteps[0])];
  const double a_f = s->final_alpha_cumprod;
  for (size_t k = 0; k < 6; ++k) {
    const double e = (noise[k] - std::sqrt(a_T) * target()[k]) / std::sqrt(1 - a_T);
    EXPECT_NEAR((*x)[k], std::sqrt(a_f) * target()[k] + std::sqrt(1 - a_f) * e, 1e-4);
  }
}

TEST(Sampler, EulerScalesInputAndShrinksNoiseGeometrically) {
  SchedulerConfig cfg;
  auto s = make_schedule(cfg, 8, SamplerKind::kEuler);
  ASSERT_TRUE(s.ok());
  std::vector<float> seen_sigmas;
  // eps = x / sigma (point mass at 0): each step multiplies x by sigma_next / sigma.
  HostDenoiser d = [&](const std::vector<float>& in, const DenoiseStep& st, std::vector<float>& out) {
    seen_sigmas.push_back(st.sigma);
    for (size_t k = 0; k < in.size(); ++k) out[k] = in[k] * std::sqrt(st.sigma * st.sigma + 1) / st.sigma;
    return Status::Ok();
  };
  cfg.final_sigmas_type = "sigma_min";
  auto s2 = make_schedule(cfg, 8, SamplerKind::kEuler);
  auto x = run(*s2, cfg, {1.0f}, d);
  ASSERT_TRUE(x.ok());
  EXPECT_NEAR((*x)[0], s2->init_noise_sigma * s2->sigmas.back() / s2->sigmas.front(), 1e-5);
  EXPECT_EQ(seen_sigmas.size(), 8u);
}

TEST(Sampler, CallbackErrorStopsTheLoop) {
  auto s = make_schedule(SchedulerConfig{}, 10, SamplerKind::kEuler);
  int calls = 0;
  HostDenoiser d = [&](const std::vector<float>&, const DenoiseStep& st, std::vector<float>&) {
    ++calls;
    return st.index == 3 ? Status::Cancelled("job cancelled") : Status::Ok();
  };
  auto x = run(*s, SchedulerConfig{}, {0.f, 1.f}, d);
  ASSERT_FALSE(x.ok());
  EXPECT_EQ(x.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 4);
}

// Trajectories of diffusers' own step() with a fake model (tests/data/scheduler).
TEST(Sampler, TrajectoriesMatchDiffusers) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  auto text = read_file(fs::path(src ? src : ".") / "tests/data/scheduler/diffusers_tables.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto j = nlohmann::json::parse(*text);
  auto base = SchedulerConfig::from_json(j["sdxl_config"]);
  ASSERT_TRUE(base.ok());
  int checked = 0;
  double worst = 0;
  for (const auto& c : j["cases"]) {
    if (!c.contains("final")) continue;
    auto cfg = SchedulerConfig::from_json(c["config"], *base);
    ASSERT_TRUE(cfg.ok());
    const std::string sampler = c["sampler"];
    auto s = make_schedule(*cfg, c["steps"].get<int>(), *parse_sampler_kind(sampler));
    ASSERT_TRUE(s.ok());
    HostDenoiser fake = [](const std::vector<float>& in, const DenoiseStep& st, std::vector<float>& out) {
      for (size_t k = 0; k < in.size(); ++k)
        out[k] = 0.3f * in[k] + 0.2f * std::sin(in[k] * 1.7f + static_cast<float>(st.timestep / 250.0));
      return Status::Ok();
    };
    auto x = run(*s, *cfg, c["noise"].get<std::vector<float>>(), fake);
    ASSERT_TRUE(x.ok());
    const auto want = c["final"].get<std::vector<float>>();
    ASSERT_EQ(x->size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      const double err = std::abs((*x)[k] - want[k]);
      worst = std::max(worst, err);
      EXPECT_LE(err, 2e-5 * (1 + std::abs(want[k])))
          << sampler << "/" << c["variant"].get<std::string>() << "/" << c["steps"] << " index " << k;
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
  RecordProperty("max_abs_error", std::to_string(worst));
  std::printf("trajectories checked: %d, max abs error vs diffusers: %.3g\n", checked, worst);
}

// The samplers beyond the first five against diffusers' own scheduler modules
// (tools/reference/make_sampler_trajectories.py): the timestep and sigma
// tables, the number of model calls and the final latents of a trajectory
// whose stochastic steps draw from the generator that made the initial noise.
TEST(Sampler, NewSamplersMatchDiffusersTablesAndTrajectories) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  auto text = read_file(fs::path(src ? src : ".") / "tests/data/scheduler/diffusers_trajectories.json");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto j = nlohmann::json::parse(*text);
  auto base = SchedulerConfig::from_json(j["sdxl_config"]);
  ASSERT_TRUE(base.ok());
  int checked = 0;
  double worst = 0;
  std::map<std::string, int> per_sampler;
  std::map<std::string, double> worst_of;
  for (const auto& c : j["cases"]) {
    const std::string sampler = c["sampler"];
    const std::string where = sampler + "/" + c["variant"].get<std::string>() + "/" + std::to_string(c["steps"].get<int>());
    auto cfg = SchedulerConfig::from_json(c["config"], *base);
    ASSERT_TRUE(cfg.ok()) << where;
    auto kind = parse_sampler_kind(sampler);
    ASSERT_TRUE(kind.ok()) << kind.status().ToString();
    auto s = make_schedule(*cfg, c["steps"].get<int>(), *kind);
    if (c.contains("refused")) {
      EXPECT_FALSE(s.ok()) << where << ": diffusers refuses it (" << c["refused"].get<std::string>() << ")";
      continue;
    }
    ASSERT_TRUE(s.ok()) << where << ": " << s.status().ToString();
    const auto want_t = c["timesteps"].get<std::vector<double>>();
    ASSERT_EQ(s->timesteps.size(), want_t.size()) << where;
    // Timesteps of sigmas mapped back by _sigma_to_t (Karras sigmas, KDPM2's
    // interpolated ones) go through numpy's fp32 log table, which is not
    // correctly rounded (hipq's is): as in scheduler_test, they may differ in
    // the last bits. Every other timestep is exact.
    const bool via_sigma_to_t = spec::find_sampler(sampler)->karras || sampler.rfind("dpm2", 0) == 0;
    for (size_t k = 0; k < want_t.size(); ++k) {
      if (!via_sigma_to_t) {
        EXPECT_EQ(s->timesteps[k], static_cast<float>(want_t[k])) << where << " timestep " << k;
      } else {
        EXPECT_NEAR(s->timesteps[k], want_t[k], 2e-3) << where << " timestep " << k;
      }
    }
    if (c.contains("sigmas")) {
      const auto want_s = c["sigmas"].get<std::vector<double>>();
      ASSERT_EQ(s->sigmas.size(), want_s.size()) << where;
      for (size_t k = 0; k < want_s.size(); ++k)
        EXPECT_NEAR(s->sigmas[k], want_s[k], 4e-7 * std::abs(want_s[k])) << where << " sigma " << k;
    }
    EXPECT_NEAR(s->init_noise_sigma, c["init_noise_sigma"].get<double>(), 1e-6 * c["init_noise_sigma"].get<double>())
        << where;
    TorchGenerator gen(RngKind::kTorchCpu, c["seed"].get<uint64_t>());
    const std::vector<float> noise = gen.randn(24);
    ASSERT_EQ(noise, c["noise"].get<std::vector<float>>()) << where;
    int calls = 0;
    HostDenoiser fake = [&](const std::vector<float>& in, const DenoiseStep& st, std::vector<float>& out) {
      ++calls;
      for (size_t k = 0; k < in.size(); ++k)
        out[k] = 0.3f * in[k] + 0.2f * std::sin(in[k] * 1.7f + static_cast<float>(st.timestep / 250.0));
      return Status::Ok();
    };
    auto x = run(cpu(), *s, *cfg, noise, fake, StepNoiseSource{&gen, kernels::DType::kF32, {}});
    ASSERT_TRUE(x.ok()) << where << ": " << x.status().ToString();
    EXPECT_EQ(calls, c["model_calls"].get<int>()) << where;
    const auto want = c["final"].get<std::vector<float>>();
    ASSERT_EQ(x->size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      const double err = std::abs((*x)[k] - want[k]);
      worst = std::max(worst, err);
      worst_of[sampler] = std::max(worst_of[sampler], err);
      EXPECT_LE(err, 2e-5 * (1 + std::abs(want[k]))) << where << " index " << k;
    }
    ++checked;
    ++per_sampler[sampler];
  }
  // Every sampler of the table that is not in make_scheduler_tables.py's file is here.
  for (const spec::SamplerName& n : spec::sampler_names()) {
    static const std::set<std::string> first_five = {"euler", "euler_karras", "ddim", "dpmpp_2m", "dpmpp_2m_karras"};
    if (!first_five.count(n.name)) {
      EXPECT_GT(per_sampler[n.name], 0) << n.name << " has no diffusers trajectory";
    }
  }
  EXPECT_GE(checked, 40);
  std::printf("new-sampler trajectories checked: %d, max abs error vs diffusers: %.3g\n", checked, worst);
  for (const auto& [name, err] : worst_of)
    std::printf("  %-22s %2d trajectories, max abs error %.3g\n", name.c_str(), per_sampler[name], err);
}

// A stochastic sampler's noise is part of the result: another seed for the
// step noise gives other latents, the same seed the same ones.
TEST(Sampler, StochasticSamplersDrawFromTheJobsGenerator) {
  for (auto kind : {SamplerKind::kEulerAncestral, SamplerKind::kDpmpp2mSde, SamplerKind::kDpm2Ancestral,
                    SamplerKind::kDdpm, SamplerKind::kLcm, SamplerKind::kDpmpp3mSde}) {
    SchedulerConfig cfg;
    auto s = make_schedule(cfg, 6, kind);
    ASSERT_TRUE(s.ok());
    HostDenoiser zero = [](const std::vector<float>& in, const DenoiseStep&, std::vector<float>& out) {
      std::fill(out.begin(), out.end(), 0.0f);
      (void)in;
      return Status::Ok();
    };
    const auto noise = torch_randn_cpu(1, 64);
    TorchGenerator a(RngKind::kTorchCpu, 1), b(RngKind::kTorchCpu, 1), c(RngKind::kTorchCpu, 2);
    auto xa = run(cpu(), *s, cfg, noise, zero, {&a});
    auto xb = run(cpu(), *s, cfg, noise, zero, {&b});
    auto xc = run(cpu(), *s, cfg, noise, zero, {&c});
    ASSERT_TRUE(xa.ok() && xb.ok() && xc.ok()) << sampler_kind_name(kind);
    EXPECT_EQ(*xa, *xb) << sampler_kind_name(kind);
    EXPECT_NE(*xa, *xc) << sampler_kind_name(kind);
    EXPECT_TRUE(draws_step_noise(kind));
    // Without the generator the sampler refuses before running the model.
    auto none = run(cpu(), *s, cfg, noise, zero, {});
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument) << none.status().ToString();
  }
  EXPECT_FALSE(draws_step_noise(SamplerKind::kEuler));
}

// StepNoise hands out its draws chunk by chunk: a job whose noise exceeds one
// chunk gets exactly the generator's sequence.
TEST(Sampler, StepNoiseRefillsChunksInOrder) {
  const int64_t numel = 1000;
  const int64_t chunk_bytes = numel * 4 * 2 - 4;  // two steps do not fit one chunk
  const std::vector<float> like_v(static_cast<size_t>(numel), 0.0f);
  auto like = DeviceTensor::from_host(cpu(), like_v.data(), {numel}, kernels::DType::kF32);
  ASSERT_TRUE(like.ok());
  TorchGenerator gen(RngKind::kTorchCpu, 5), ref(RngKind::kTorchCpu, 5);
  auto sn = samplers::StepNoise::make(cpu(), {&gen}, kernels::DType::kF32, like->t, 3, chunk_bytes);
  ASSERT_TRUE(sn.ok());
  for (int step = 0; step < 3; ++step) {
    auto t = sn->next();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto got = to_host_f32(cpu(), *t);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(*got, ref.randn(numel)) << "step " << step;
  }
  EXPECT_EQ(sn->next().status().code(), StatusCode::kInternal);
}

// The loop runs on the backend's elementwise ops, so a GPU must land on the
// cpu's latents bit for bit: every op is one IEEE operation rounded to
// nearest on both (the fake model sees the same inputs on both sides).
TEST(Sampler, OnTheGpuTheLoopMatchesTheCpuBitForBit) {
  if (kernels::gpu_device_count() == 0) GTEST_SKIP() << "no device";
  auto gpu = kernels::make_backend("hip", 0);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  HostDenoiser fake = [](const std::vector<float>& in, const DenoiseStep& st, std::vector<float>& out) {
    for (size_t k = 0; k < in.size(); ++k)
      out[k] = 0.3f * in[k] + 0.2f * std::sin(in[k] * 1.7f + static_cast<float>(st.timestep / 250.0));
    return Status::Ok();
  };
  const std::vector<float> noise = torch_randn_cpu(11, 4096);
  int compared = 0;
  for (const spec::SamplerName& name : spec::sampler_names()) {
    const SamplerKind kind = name.kind;
    for (const char* prediction : {"epsilon", "v_prediction", "sample"}) {
      SchedulerConfig cfg;
      cfg.prediction_type = prediction;
      auto s = make_schedule(cfg, 12, kind);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      TorchGenerator cpu_gen(RngKind::kTorchCpu, 3), gpu_gen(RngKind::kTorchCpu, 3);
      auto want = run(cpu(), *s, cfg, noise, fake, {&cpu_gen});
      // Euler a and DPM2 refuse "sample" as diffusers does.
      if (!want.ok() && want.status().code() == StatusCode::kUnimplemented && std::string(prediction) == "sample")
        continue;
      auto got = run(**gpu, *s, cfg, noise, fake, {&gpu_gen});
      ASSERT_TRUE(want.ok() && got.ok()) << sampler_kind_name(kind) << " " << prediction;
      int differ = 0;
      for (size_t k = 0; k < want->size(); ++k) differ += (*want)[k] != (*got)[k];
      EXPECT_EQ(differ, 0) << sampler_kind_name(kind) << " " << prediction << ": " << differ << " of "
                           << want->size() << " latents differ";
      ++compared;
    }
  }
  EXPECT_GE(compared, 15);
}

TEST(Sampler, LatentsThatAreNotContiguousF32AreRefused) {
  auto s = make_schedule(SchedulerConfig{}, 4, SamplerKind::kEuler);
  ASSERT_TRUE(s.ok());
  const std::vector<float> v(8, 1.0f);
  auto x = DeviceTensor::from_host(cpu(), v.data(), {8}, kernels::DType::kF16);
  ASSERT_TRUE(x.ok());
  Denoiser never = [](const kernels::Tensor&, const DenoiseStep&, kernels::Tensor&) {
    ADD_FAILURE() << "the model ran";
    return Status::Ok();
  };
  const Status st = sample(cpu(), *s, SchedulerConfig{}, x->t, never);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("contiguous f32"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace hipq::engine
