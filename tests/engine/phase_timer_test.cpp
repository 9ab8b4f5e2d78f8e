#include "engine/phase_timer.h"
#include "engine/phase_peaks.h"

#include <gtest/gtest.h>

#include <thread>

#include "kernels/backend.h"

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

// PhasePeaks (engine/phase_peaks.h) on the backend's one peak counter: each
// phase its own high-water mark, the job's peak the largest of them and of
// what happened between phases, a phase seen twice its larger peak.
TEST(PhasePeaksTest, EachPhaseItsOwnPeakAndTheJobTheLargest) {
  auto be = kernels::make_backend("cpu").value();
  be->reset_peak();
  PhasePeaks peaks(*be);
  auto kept = be->allocate(4096);  // held through every phase
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  const int64_t base = be->bytes_in_use();
  {
    auto between = be->allocate(1 << 20);  // before any phase: the job's peak, no phase's
    ASSERT_TRUE(between.ok());
  }
  peaks.begin();
  {
    auto a = be->allocate(64 << 10);
    ASSERT_TRUE(a.ok());
  }
  peaks.end("text_encode");
  peaks.begin();
  {
    auto a = be->allocate(256 << 10);
    ASSERT_TRUE(a.ok());
  }
  peaks.end("decode");
  peaks.begin();
  {
    auto a = be->allocate(16 << 10);
    ASSERT_TRUE(a.ok());
  }
  peaks.end("text_encode");
  ASSERT_EQ(peaks.phases().size(), 2u);
  EXPECT_EQ(peaks.phases()[0].phase, "text_encode");
  EXPECT_EQ(peaks.phases()[1].phase, "decode");
  const int64_t text = peaks.phases()[0].bytes, decode = peaks.phases()[1].bytes;
  EXPECT_GE(text, base + (64 << 10));
  EXPECT_LT(text, base + (256 << 10)) << "the decode's block leaked into the text encode's peak";
  EXPECT_GE(decode, base + (256 << 10));
  EXPECT_LT(decode, base + (1 << 20)) << "the block before the phases leaked into the decode's peak";
  EXPECT_GE(peaks.job_peak(), base + (1 << 20));
}

}  // namespace
}  // namespace hipq::engine
