#include "engine/phase_timer.h"

#include <gtest/gtest.h>

#include <thread>

namespace hipq::engine {
namespace {

TEST(PhaseTimerTest, NestedPhasesComeBackInBeginOrderWithHostTimes) {
  PhaseTimer t(nullptr);
  ASSERT_TRUE(t.begin("denoise").ok());
  ASSERT_TRUE(t.begin("step").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(t.end().ok());
  ASSERT_TRUE(t.end().ok());
  auto phases = t.finish();
  ASSERT_TRUE(phases.ok()) << phases.status().ToString();
  ASSERT_EQ(phases->size(), 2u);
  EXPECT_EQ((*phases)[0].phase, "denoise");
  EXPECT_EQ((*phases)[1].phase, "step");
  EXPECT_GE((*phases)[1].host_ms, 4.0);
  EXPECT_GE((*phases)[0].host_ms, (*phases)[1].host_ms);
  EXPECT_EQ((*phases)[0].gpu_ms, 0.0);
}

TEST(PhaseTimerTest, EndWithoutBeginIsAnError) {
  PhaseTimer t(nullptr);
  EXPECT_EQ(t.end().code(), StatusCode::kFailedPrecondition);
}

TEST(PhaseTimerTest, FinishWithAnOpenPhaseNamesIt) {
  PhaseTimer t(nullptr);
  ASSERT_TRUE(t.begin("decode").ok());
  auto r = t.finish();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("decode"), std::string::npos);
}

TEST(PhaseTimerTest, UsesBackendEventsWhenGiven) {
  auto backend = kernels::make_backend("cpu");
  if (!backend.ok()) GTEST_SKIP() << "no cpu backend in this build: " << backend.status().ToString();
  PhaseTimer t(backend->get());
  ASSERT_TRUE(t.begin("load").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  ASSERT_TRUE(t.end().ok());
  auto phases = t.finish();
  ASSERT_TRUE(phases.ok()) << phases.status().ToString();
  EXPECT_GE((*phases)[0].gpu_ms, 2.0);
}

}  // namespace
}  // namespace hipq::engine
