#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/fs.h"
#include "spec/generation_settings.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

nlohmann::json load(const char* name) {
  const char* src = std::getenv("HIPQ_SOURCE_DIR");
  auto text = read_file(fs::path(src ? src : ".") / "tests/data/scheduler" / name);
  return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
}

// diffusers on torch 2.x (the reference goldens are made with).
const nlohmann::json& tables() {
  static const nlohmann::json j = load("diffusers_tables.json");
  return j;
}

int ulp_distance(float a, float b) {
  if (a == b) return 0;
  const auto ia = std::bit_cast<int32_t>(a), ib = std::bit_cast<int32_t>(b);
  return (ia < 0) != (ib < 0) ? 1 << 30 : std::abs(ia - ib);
}


TEST(Scheduler, AlphasCumprodEqualsDiffusers) {
  ASSERT_FALSE(tables().is_null()) << "tests/data/scheduler/diffusers_tables.json missing";
  auto ac = make_alphas_cumprod(SchedulerConfig{});
  ASSERT_TRUE(ac.ok());
  const auto& want = tables()["sdxl_alphas_cumprod"];
  ASSERT_EQ(ac->size(), want.size());
  // betas (torch.linspace with fused multiply-adds) and cumprod (double accumulation) bit-equal.
  for (size_t i = 0; i < ac->size(); ++i)
    ASSERT_EQ((*ac)[i], static_cast<float>(want[i].get<double>())) << "t=" << i;
}

struct TableStats {
  int cases = 0, values = 0, exact = 0, worst_ulp = 0;
};

// Compares every case of a reference file; sigmas may differ by `max_ulp`.
TableStats compare_tables(const nlohmann::json& ref, int max_ulp) {
  TableStats st;
  auto base = SchedulerConfig::from_json(ref["sdxl_config"]);
  EXPECT_TRUE(base.ok());
  for (const auto& c : ref["cases"]) {
    const std::string sampler = c["sampler"];
    const int steps = c["steps"];
    const std::string label = sampler + "/" + c["variant"].get<std::string>() + "/" + std::to_string(steps);
    auto cfg = SchedulerConfig::from_json(c["config"], *base);
    EXPECT_TRUE(cfg.ok()) << label;
    auto kind = parse_sampler_kind(sampler);
    EXPECT_TRUE(kind.ok());
    auto s = make_schedule(*cfg, steps, *kind);
    EXPECT_TRUE(s.ok()) << label << ": " << s.status().ToString();
    if (!s.ok()) continue;
    const auto& ts = c["timesteps"];
    EXPECT_EQ(s->timesteps.size(), ts.size()) << label;
    if (s->timesteps.size() != ts.size()) continue;
    // Karras timesteps of Euler come from numpy's fp32 log and fractional
    // interpolation; a last-bit difference in log moves them slightly.
    const bool fractional = sampler == "euler_karras";
    for (size_t i = 0; i < ts.size(); ++i) {
      const float want = static_cast<float>(ts[i].get<double>());
      if (fractional) {
        EXPECT_NEAR(s->timesteps[i], want, 2e-3f) << label << " timestep " << i;
      } else {
        EXPECT_EQ(s->timesteps[i], want) << label << " timestep " << i;
      }
    }
    if (c.contains("sigmas")) {
      const auto& sg = c["sigmas"];
      EXPECT_EQ(s->sigmas.size(), sg.size()) << label;
      for (size_t i = 0; i < std::min(sg.size(), s->sigmas.size()); ++i) {
        const int u = ulp_distance(s->sigmas[i], static_cast<float>(sg[i].get<double>()));
        EXPECT_LE(u, max_ulp) << label << " sigma " << i << ": " << s->sigmas[i] << " vs " << sg[i];
        ++st.values;
        st.exact += u == 0;
        st.worst_ulp = std::max(st.worst_ulp, u);
      }
    }
    EXPECT_LE(ulp_distance(s->init_noise_sigma, static_cast<float>(c["init_noise_sigma"].get<double>())), max_ulp)
        << label;
    ++st.cases;
  }
  return st;
}

TEST(Scheduler, TablesEqualDiffusers) {
  ASSERT_FALSE(tables().is_null());
  // A few entries of diffusers' fp32 sigma table come out one ulp apart
  // between torch builds (SIMD width); everything else is bit-equal.
  const auto st = compare_tables(tables(), 1);
  EXPECT_GE(st.cases, 100);
  EXPECT_GE(st.exact, st.values * 97 / 100) << st.exact << " of " << st.values << " sigmas bit-equal";
  std::printf("%d cases, %d of %d sigmas bit-equal, worst %d ulp\n", st.cases, st.exact, st.values, st.worst_ulp);
}

TEST(Scheduler, TablesCloseToDiffusersOnTorch1) {
  const auto ref = load("diffusers_tables_torch1.json");
  ASSERT_FALSE(ref.is_null());
  const auto st = compare_tables(ref, 4);
  EXPECT_GE(st.cases, 100);
  std::printf("%d cases, %d of %d sigmas bit-equal, worst %d ulp\n", st.cases, st.exact, st.values, st.worst_ulp);
}

TEST(Scheduler, SdxlEulerThirtyStepsLeading) {
  auto s = make_schedule(SchedulerConfig::defaults_for_family("sdxl"), 30, SamplerKind::kEuler);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->timesteps.size(), 30u);
  EXPECT_EQ(s->timesteps.front(), 958.0f);  // 29 * (1000 // 30) + 1
  EXPECT_EQ(s->timesteps.back(), 1.0f);
  EXPECT_EQ(s->sigmas.back(), 0.0f);
  EXPECT_NEAR(s->init_noise_sigma, std::sqrt(s->sigmas[0] * s->sigmas[0] + 1), 1e-4);
}

TEST(SchedulerConfig, FromJsonReadsFieldsAndRejectsBadOnes) {
  auto c = SchedulerConfig::from_json(nlohmann::json::parse(
      R"({"_class_name":"EulerDiscreteScheduler","beta_start":0.001,"timestep_spacing":"trailing",
          "use_karras_sigmas":true,"steps_offset":0,"unknown_field":3})"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->beta_start, 0.001);
  EXPECT_EQ(c->timestep_spacing, "trailing");
  EXPECT_TRUE(c->use_karras_sigmas);
  EXPECT_EQ(c->steps_offset, 0);

  auto bad = SchedulerConfig::from_json(nlohmann::json::parse(R"({"timestep_spacing":"sideways"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("timestep_spacing"), std::string::npos);
  EXPECT_NE(bad.status().message().find("sideways"), std::string::npos);
  auto bad2 = SchedulerConfig::from_json(nlohmann::json::parse(R"({"steps_offset":"one"})"));
  ASSERT_FALSE(bad2.ok());
  EXPECT_NE(bad2.status().message().find("steps_offset"), std::string::npos);
  auto bad3 = SchedulerConfig::from_json(nlohmann::json::parse(R"({"beta_start":0.5,"beta_end":0.1})"));
  EXPECT_FALSE(bad3.ok());
}

// spec/generation_settings.h is the one list of samplers (hipq submit checks
// manifests against it): the engine implements every one of them.
TEST(Scheduler, EverySamplerOfTheSharedListIsImplemented) {
  for (const spec::SamplerName& s : spec::sampler_names()) {
    auto kind = parse_sampler_kind(s.name);
    ASSERT_TRUE(kind.ok()) << s.name << ": " << kind.status().ToString();
    EXPECT_EQ(*kind, s.kind);
    EXPECT_EQ(sampler_kind_name(*kind), s.name);
    auto schedule = make_schedule(SchedulerConfig{}, 4, *kind);
    EXPECT_TRUE(schedule.ok()) << s.name << ": " << schedule.status().ToString();
  }
  auto unknown = parse_sampler_kind("dpmpp_sde");
  EXPECT_NE(unknown.status().message().find(spec::join_names(spec::known_samplers())), std::string::npos)
      << unknown.status().message();
}

TEST(Scheduler, RejectsBadStepCounts) {
  EXPECT_EQ(make_schedule(SchedulerConfig{}, 0, SamplerKind::kEuler).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make_schedule(SchedulerConfig{}, 1001, SamplerKind::kDdim).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_sampler_kind("dpmpp_sde").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sampler_kind_name(*parse_sampler_kind("dpmpp_2m_karras")), "dpmpp_2m_karras");
}

}  // namespace
}  // namespace hipq::engine
