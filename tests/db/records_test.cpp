#include "db/records.h"

#include <gtest/gtest.h>

#include "tests/spec/sample_settings.h"

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
  const spec::GenerationSettings want = spec::testing::every_field_set();
  JobRecord j;
  j.prompt = want.prompt;
  j.negative_prompt = want.negative_prompt;
  j.seed = want.seed;
  j.width = want.width;
  j.height = want.height;
  j.steps = want.steps;
  j.guidance = want.guidance;
  j.sampler = want.sampler;
  j.precision = want.precision;
  j.rng = want.rng;
  j.timestep_spacing = want.timestep_spacing;
  j.guidance_rescale = want.guidance_rescale;
  j.loras = want.loras;
  j.init_image = want.init_image;
  j.strength = want.strength;
  j.refiner = want.refiner;
  j.refiner_switch_at = want.refiner_switch_at;
  j.aesthetic_score = want.aesthetic_score;
  j.negative_aesthetic_score = want.negative_aesthetic_score;
  j.vae_precision = want.vae_precision;
  // every_field_set() sets fields no single job combines (a refiner and an
  // init image: GenerationSettings::validate refuses that), so only the
  // value's round trip through the row is checked here.
  EXPECT_EQ(j.generation_settings(), want);
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
