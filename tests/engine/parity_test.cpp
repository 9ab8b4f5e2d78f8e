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
  auto backend = cpu();
  std::vector<float> a = {1, 2, 3, 4};
  std::vector<float> b = {1, 2, 3, 5};
  auto m = compare_latents(*backend, a.data(), b.data(), 4);
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
  auto backend = cpu();
  std::vector<float> a = {1, NAN, 3, INFINITY};
  std::vector<float> b = {1, 2, 3, 4};
  auto m = compare_latents(*backend, a.data(), b.data(), 4);
  ASSERT_TRUE(m.ok());
  EXPECT_FALSE(m->finite);
  EXPECT_EQ(m->nonfinite_output, 2);
  ParityGate lax;
  lax.cosine_min.reset();
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
  EXPECT_EQ(judge(m, ParityGate{}).verdict, Verdict::kPass);
  auto gate = ParityGate::from_json({{"cosine_min", 0.9999}, {"max_abs_max", 0.1}, {"psnr_min", 30}});
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

TEST(ParityTest, GateJson) {
  auto d = ParityGate::from_json(nullptr);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d->cosine_min, 0.999);
  auto only_abs = ParityGate::from_json({{"max_abs_max", 0.5}});
  ASSERT_TRUE(only_abs.ok());
  EXPECT_EQ(*only_abs->cosine_min, 0.999) << "the default cosine bound stays unless set to null";
  auto off = ParityGate::from_json({{"cosine_min", nullptr}, {"rel_l2_max", 0.1}});
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->cosine_min.has_value());
  auto back = ParityGate::from_json(off->to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->cosine_min.has_value());
  EXPECT_EQ(*back->rel_l2_max, 0.1);
  auto bad = ParityGate::from_json({{"cosine", 0.9}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown key \"cosine\""), std::string::npos);
  EXPECT_FALSE(ParityGate::from_json({{"psnr_min", "high"}}).ok());
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
  auto backend = cpu();
  GenerationOutput out;
  out.latent = {1, 2};
  out.latent_shape = {1, 1, 1, 2};
  auto r = check_parity(*backend, out, nullptr, ParityGate{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->verdict, Verdict::kNoGolden);
  EXPECT_FALSE(r->metrics.has_value());
  Golden g;
  g.latent = {1, 2, 3};
  g.latent_shape = {1, 1, 1, 3};
  auto mismatch = check_parity(*backend, out, &g, ParityGate{});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("[1, 1, 1, 3]"), std::string::npos);
}

}  // namespace
}  // namespace hipq::engine
