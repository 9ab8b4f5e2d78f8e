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

}  // namespace
}  // namespace hipq::db
