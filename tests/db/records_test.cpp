#include "db/records.h"

#include <gtest/gtest.h>

namespace hipq::db {
namespace {

TEST(RecordsTest, StateNamesRoundTrip) {
  for (JobState s : {JobState::kQueued, JobState::kLeased, JobState::kDone, JobState::kFailed, JobState::kDead,
                     JobState::kCancelled}) {
    auto back = parse_job_state(job_state_name(s));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, s);
  }
  for (BatchState s : {BatchState::kActive, BatchState::kDone, BatchState::kCancelled})
    EXPECT_EQ(*parse_batch_state(batch_state_name(s)), s);
  for (AttemptState s : {AttemptState::kRunning, AttemptState::kDone, AttemptState::kFailed, AttemptState::kExpired,
                         AttemptState::kCancelled})
    EXPECT_EQ(*parse_attempt_state(attempt_state_name(s)), s);
}

TEST(RecordsTest, UnknownStateNamesKnownOnes) {
  auto s = parse_job_state("running");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("queued"), std::string::npos);
}

TEST(RecordsTest, TerminalStates) {
  EXPECT_FALSE(is_terminal(JobState::kQueued));
  EXPECT_FALSE(is_terminal(JobState::kLeased));
  EXPECT_TRUE(is_terminal(JobState::kDone));
  EXPECT_TRUE(is_terminal(JobState::kDead));
  EXPECT_TRUE(is_terminal(JobState::kFailed));
  EXPECT_TRUE(is_terminal(JobState::kCancelled));
}

TEST(RecordsTest, AJobsColumnsAreItsGenerationSettings) {
  JobRecord j;
  j.prompt = "a cat";
  j.negative_prompt = "blurry";
  j.seed = 18446744073709551615ull;
  j.width = 512;
  j.height = 768;
  j.steps = 20;
  j.guidance = 7.1;
  j.sampler = "dpmpp_2m";
  j.precision = "fp16";
  j.rng = "torch-cuda";
  spec::GenerationSettings s = j.generation_settings();
  EXPECT_EQ(s.prompt, "a cat");
  EXPECT_EQ(s.negative_prompt, "blurry");
  EXPECT_EQ(s.seed, 18446744073709551615ull);
  EXPECT_EQ(s.width, 512);
  EXPECT_EQ(s.height, 768);
  EXPECT_EQ(s.steps, 20);
  EXPECT_FLOAT_EQ(s.guidance, 7.1f);
  EXPECT_EQ(s.sampler, "dpmpp_2m");
  EXPECT_EQ(s.precision, "fp16");
  EXPECT_EQ(s.rng, "torch-cuda");
  EXPECT_TRUE(s.validate().ok());
}

TEST(RecordsTest, PhaseTimingsSortIntoPipelineOrder) {
  std::vector<PhaseTimingRecord> p{{"write", 1, {}}, {"other", 2, {}}, {"load", 3, {}}, {"denoise", 4, {}}};
  sort_phase_timings(p);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].phase, "load");
  EXPECT_EQ(p[1].phase, "denoise");
  EXPECT_EQ(p[2].phase, "write");
  EXPECT_EQ(p[3].phase, "other");
}

}  // namespace
}  // namespace hipq::db
