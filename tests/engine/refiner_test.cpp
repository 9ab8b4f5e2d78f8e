// The base + refiner split (engine/refiner.h) against values worked out by
// hand from diffusers' formulas: the discrete timestep cutoff
// int(round(T - switch_at * T)) with Python's round (ties to even), the base's
// timesteps >= cutoff and the refiner's < cutoff of SDXL's leading Euler
// schedule (timesteps i * (1000 // steps) + 1), and the refiner's time ids.
#include <gtest/gtest.h>

#include "engine/refiner.h"
#include "engine/scheduler.h"

namespace hipq::engine {
namespace {

Schedule euler(int steps) {
  auto s = make_schedule(SchedulerConfig::defaults_for_family("sdxl"), steps, SamplerKind::kEuler);
  HIPQ_CHECK(s.ok());
  return *s;
}

TEST(RefinerSplitTest, CutoffIsDiffusersRoundOfTheRemainingTimesteps) {
  EXPECT_EQ(discrete_timestep_cutoff(1000, 0.8f), 200);  // 1000 - 800
  EXPECT_EQ(discrete_timestep_cutoff(1000, 0.7f), 300);  // 0.7 * 1000 is 700.0 in doubles
  EXPECT_EQ(discrete_timestep_cutoff(1000, 0.5f), 500);
  // Python's round() sends halves to the even neighbour: 187.5 -> 188, 62.5 -> 62.
  EXPECT_EQ(discrete_timestep_cutoff(1000, 0.8125f), 188);
  EXPECT_EQ(discrete_timestep_cutoff(1000, 0.9375f), 62);
  // The decimal the user wrote, not the float's tail: 0.3f is 0.30000001192...
  EXPECT_EQ(discrete_timestep_cutoff(1000, 0.3f), 700);
}

struct SplitCase {
  int steps;
  float switch_at;
  int base;     // timesteps >= cutoff, counted by hand
  int refiner;  // timesteps < cutoff
};

TEST(RefinerSplitTest, BaseAndRefinerShareTheLeadingEulerScheduleAsDiffusersDoes) {
  // steps 10: timesteps 901, 801, ..., 1; cutoff 200: 901..201 (8) | 101, 1 (2).
  // steps 30: 33 i + 1, i = 29..0; cutoff 200: i >= 7 (23) | i <= 6 (7).
  // steps 25: 40 i + 1; cutoff 300: i >= 8 (17) | i <= 7 (8).
  // steps 4:  250 i + 1 (751, 501, 251, 1); cutoff 500: 751, 501 (2) | 251, 1 (2).
  // steps 40: 25 i + 1; cutoff 188 (switch 0.8125): i >= 8 (32) | i <= 7 (8).
  for (const SplitCase& c : {SplitCase{10, 0.8f, 8, 2}, SplitCase{30, 0.8f, 23, 7}, SplitCase{25, 0.7f, 17, 8},
                             SplitCase{4, 0.5f, 2, 2}, SplitCase{40, 0.8125f, 32, 8}}) {
    SCOPED_TRACE("steps " + std::to_string(c.steps) + " switch_at " + std::to_string(c.switch_at));
    const Schedule full = euler(c.steps);
    const int cutoff = discrete_timestep_cutoff(1000, c.switch_at);
    EXPECT_EQ(base_steps(full, cutoff), c.base);
    EXPECT_EQ(refiner_start_index(full, cutoff), c.steps - c.refiner);
    auto head = schedule_head(full, cutoff, c.switch_at);
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    auto tail = schedule_tail(full, cutoff, c.switch_at);
    ASSERT_TRUE(tail.ok()) << tail.status().ToString();
    ASSERT_EQ(static_cast<int>(head->timesteps.size()), c.base);
    ASSERT_EQ(static_cast<int>(tail->timesteps.size()), c.refiner);
    // The head ends on the sigma the tail starts from: one latent hands over.
    EXPECT_EQ(head->sigmas.back(), tail->sigmas.front());
    EXPECT_EQ(head->timesteps.front(), full.timesteps.front());
    EXPECT_EQ(tail->timesteps.back(), full.timesteps.back());
    EXPECT_TRUE(head->truncated_end);
    EXPECT_FALSE(tail->truncated_end);
    EXPECT_EQ(head->num_inference_steps, c.steps);
    EXPECT_EQ(tail->num_inference_steps, c.steps);
    EXPECT_EQ(head->init_noise_sigma, full.init_noise_sigma);
    EXPECT_EQ(tail->init_noise_sigma, 1.0f);  // the latent is handed over, not noise
  }
}

TEST(RefinerSplitTest, ASplitThatLeavesAModelNoStepIsRefusedWithTheWayOut) {
  // steps 2: timesteps 501, 1. switch 0.1 -> cutoff 900: no base step.
  const Schedule two = euler(2);
  auto head = schedule_head(two, discrete_timestep_cutoff(1000, 0.1f), 0.1f);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("leaves the base no step"), std::string::npos) << head.status().message();
  EXPECT_NE(head.status().message().find("raise refiner_switch_at"), std::string::npos);
  // switch 0.999 -> cutoff 1: timestep 1 is not below it: no refiner step.
  auto tail = schedule_tail(two, discrete_timestep_cutoff(1000, 0.999f), 0.999f);
  ASSERT_FALSE(tail.ok());
  EXPECT_NE(tail.status().message().find("leaves the refiner no step"), std::string::npos) << tail.status().message();
  auto head2 = schedule_head(two, discrete_timestep_cutoff(1000, 0.999f), 0.999f);
  ASSERT_FALSE(head2.ok());
  EXPECT_NE(head2.status().message().find("leaves the refiner no step"), std::string::npos);
}

TEST(RefinerSplitTest, SecondOrderSchedulesAreNotCutBetweenTheTwoCallsOfAStep) {
  // Heun's calls: t0, t1, t1, t2, t2, ... (every timestep but the first twice).
  // diffusers adds one call when the count below the cutoff is even.
  auto heun = make_schedule(SchedulerConfig::defaults_for_family("sdxl"), 10, SamplerKind::kHeun);
  ASSERT_TRUE(heun.ok());
  const int cutoff = discrete_timestep_cutoff(1000, 0.8f);
  int below = 0;
  for (float t : heun->timesteps) below += t < static_cast<float>(cutoff) ? 1 : 0;
  const int expected = below % 2 == 0 ? below + 1 : below;
  EXPECT_EQ(refiner_start_index(*heun, cutoff), static_cast<int>(heun->timesteps.size()) - expected);
}

TEST(RefinerSplitTest, TimeIdsCarryTheAestheticScoreNegativeRowFirst) {
  spec::GenerationSettings s;
  s.width = 1024;
  s.height = 768;
  s.aesthetic_score = 6.0f;
  s.negative_aesthetic_score = 2.5f;
  EXPECT_EQ(refiner_time_ids(s, 2, kernels::DType::kF32),
            (std::vector<float>{768, 1024, 0, 0, 2.5f, 768, 1024, 0, 0, 6.0f}));
  EXPECT_EQ(refiner_time_ids(s, 1, kernels::DType::kF32), (std::vector<float>{768, 1024, 0, 0, 6.0f}));
  // In fp16 the score is the half nearest to it, as torch.tensor(..., dtype=float16) makes it.
  s.aesthetic_score = 6.3f;
  EXPECT_EQ(refiner_time_ids(s, 1, kernels::DType::kF16).back(), 6.30078125f);  // 1613 / 256
}

}  // namespace
}  // namespace hipq::engine
