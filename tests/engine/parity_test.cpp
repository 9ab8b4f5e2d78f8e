#include "engine/parity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "engine/golden.h"
#include "engine/pipeline.h"

namespace hipq::engine {
namespace {

std::unique_ptr<kernels::Backend> cpu() {
  auto b = kernels::make_backend("cpu");
  HIPQ_CHECK(b.ok());
  return std::move(b).value();
}

TEST(ParityTest, MetricsOfKnownVectors) {
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<float> b = {1, 2, 3, 5};
  auto m = compare_latents(a.data(), b.data(), 4);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const double dot = 1 + 4 + 9 + 20, na = std::sqrt(30.0), nb = std::sqrt(39.0);
  EXPECT_NEAR(m->cosine, dot / (na * nb), 1e-12);
  EXPECT_DOUBLE_EQ(m->max_abs, 1.0);
  EXPECT_NEAR(m->rel_l2, 1.0 / nb, 1e-12);
  EXPECT_TRUE(m->finite);
  EXPECT_EQ(m->count, 4);
  EXPECT_FALSE(m->has_psnr);
}

TEST(ParityTest, NanInOutputIsNonFiniteWhateverTheGate) {
  std::vector<float> a = {1, NAN, 3, INFINITY};
  std::vector<float> b = {1, 2, 3, 4};
  auto m = compare_latents(a.data(), b.data(), 4);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->finite);
  EXPECT_EQ(m->nonfinite_output, 2);
  spec::ParityGate lax;
  ASSERT_TRUE(lax.set("cosine_min", std::nullopt).ok());
  auto r = judge(*m, lax);
  EXPECT_EQ(r.verdict, Verdict::kNonFinite);
  EXPECT_NE(r.reason.find("2 NaN/Inf"), std::string::npos);
}

TEST(ParityTest, ImagePsnr) {
  std::vector<uint8_t> a(300, 100), b(300, 100);
  EXPECT_TRUE(std::isinf(image_psnr(a.data(), b.data(), a.size())));
  b[0] = 110;  // mse = 100 / 300
  EXPECT_NEAR(image_psnr(a.data(), b.data(), a.size()), 10 * std::log10(255.0 * 255.0 * 3.0), 1e-9);
}

TEST(ParityTest, GateCombinesBoundsAndNamesEveryFailure) {
  ParityMetrics m;
  m.cosine = 0.9995;
  m.max_abs = 0.2;
  m.rel_l2 = 0.01;
  m.psnr = 25;
  m.has_psnr = true;
  auto by_default = judge(m, spec::ParityGate{});
  EXPECT_EQ(by_default.verdict, Verdict::kFail) << "the default gate judges the image when there is one";
  EXPECT_NE(by_default.reason.find("psnr 25 dB < 40 dB (default for fp32)"), std::string::npos) << by_default.reason;
  auto gate = spec::ParityGate::from_json({{"cosine_min", 0.9999}, {"max_abs_max", 0.1}, {"psnr_min", 30}});
  ASSERT_TRUE(gate.ok());
  auto r = judge(m, *gate);
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_NE(r.reason.find("cosine"), std::string::npos);
  EXPECT_NE(r.reason.find("max_abs"), std::string::npos);
  EXPECT_NE(r.reason.find("psnr"), std::string::npos);
  m.has_psnr = false;  // psnr_min only applies when an image was compared
  m.cosine = 0.99995;
  m.max_abs = 0.05;
  EXPECT_EQ(judge(m, *gate).verdict, Verdict::kPass);
  m.cosine = NAN;
  m.finite = true;
  EXPECT_EQ(judge(m, *gate).verdict, Verdict::kFail) << "a NaN metric never passes";
}

// The verdict is graded on the host in fp64; the numbers are those the cpu
// kernels' parity_sums gave when the device graded itself.
TEST(ParityTest, HostGradingMatchesTheKernelSums) {
  const int64_t n = 100003;
  std::vector<float> a(n), b(n);
  uint32_t x = 12345;
  auto next = [&] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>(x >> 8) / 16777216.0f - 0.5f;
  };
  for (int64_t i = 0; i < n; ++i) {
    b[i] = next() * 3.0f;
    a[i] = b[i] + next() * 1e-3f;
  }
  a[17] = NAN;
  b[99] = INFINITY;
  auto m = compare_latents(a.data(), b.data(), n);
  ASSERT_TRUE(m.ok());
  auto backend = cpu();
  kernels::Tensor ta = kernels::Tensor::contiguous(a.data(), kernels::DType::kF32, {n});
  kernels::Tensor tb = kernels::Tensor::contiguous(b.data(), kernels::DType::kF32, {n});
  auto s = backend->parity_sums(ta, tb);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(m->count, s->count);
  EXPECT_EQ(m->nonfinite_output, s->nonfinite_a);
  EXPECT_EQ(m->nonfinite_golden, s->nonfinite_b);
  EXPECT_FALSE(m->finite);
  EXPECT_NEAR(m->cosine, s->dot / (std::sqrt(s->norm_a2) * std::sqrt(s->norm_b2)), 1e-14);
  EXPECT_DOUBLE_EQ(m->max_abs, s->max_abs_diff);
  EXPECT_NEAR(m->rel_l2, std::sqrt(s->sum_sq_diff) / std::sqrt(s->norm_b2), 1e-14 * m->rel_l2);
}

TEST(ParityTest, DefaultImageBoundFollowsThePrecision) {
  ParityMetrics m;
  m.cosine = 0.99999;
  m.psnr = 37;
  m.has_psnr = true;
  EXPECT_EQ(judge(m, spec::ParityGate{}, "fp32").verdict, Verdict::kFail);
  EXPECT_EQ(judge(m, spec::ParityGate{}, "fp16").verdict, Verdict::kPass);
  EXPECT_EQ(judge(m, spec::ParityGate{}, "bf16").verdict, Verdict::kPass);
  m.psnr = 31.3;  // SDXL decoded with SD 1's scaling factor
  for (const char* p : {"fp32", "fp16", "bf16"})
    EXPECT_EQ(judge(m, spec::ParityGate{}, p).verdict, Verdict::kFail) << p;
  EXPECT_DOUBLE_EQ(spec::default_psnr_min("fp32"), spec::kDefaultPsnrMinFp32);
  m.psnr = 45;
  EXPECT_EQ(judge(m, spec::ParityGate{}, "fp32").verdict, Verdict::kPass);
  m.psnr = 37;
  m.has_psnr = false;  // a golden without an image: the latent alone decides
  EXPECT_EQ(judge(m, spec::ParityGate{}, "fp32").verdict, Verdict::kPass);
  m.has_psnr = true;
  m.psnr = 31.3;
  auto off = spec::ParityGate::from_json({{"psnr_min", nullptr}});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(judge(m, *off, "fp32").verdict, Verdict::kPass) << "psnr_min null switches the image bound off";
  auto back = spec::ParityGate::from_json(off->to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->psnr_min_set);
  EXPECT_FALSE(back->psnr_bound("fp32").has_value());
  EXPECT_FALSE(spec::ParityGate{}.to_json().contains("psnr_min"))
      << "the default is not frozen into stored gates";
  auto low = spec::ParityGate::from_json({{"psnr_min", 30}});
  EXPECT_EQ(judge(m, *low, "fp32").verdict, Verdict::kPass);
}

TEST(ParityTest, VerdictNames) {
  for (Verdict v : {Verdict::kPass, Verdict::kFail, Verdict::kNoGolden, Verdict::kNonFinite}) {
    auto back = parse_verdict(verdict_name(v));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, v);
  }
  EXPECT_FALSE(parse_verdict("OK").ok());
}

TEST(ParityTest, CheckParityWithoutGoldenIsNoGolden) {
  GenerationOutput out;
  out.latent = {1, 2};
  out.latent_shape = {1, 1, 1, 2};
  auto r = check_parity(out, nullptr, spec::ParityGate{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, Verdict::kNoGolden);
  EXPECT_FALSE(r->metrics.has_value());
  Golden g;
  g.latent = {1, 2, 3};
  g.latent_shape = {1, 1, 1, 3};
  auto mismatch = check_parity(out, &g, spec::ParityGate{});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("[1, 1, 1, 3]"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
