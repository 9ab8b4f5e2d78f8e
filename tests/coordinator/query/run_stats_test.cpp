// The query layer's run statistics on their own (hipq_query, no sockets):
// argument parsing and the step timings read back from a real database.
#include "coordinator/query/run_stats.h"

#include <gtest/gtest.h>

#include "db/run_queries.h"
#include "tests/db/run_history_fixture.h"

namespace hipq::coordinator::query {
namespace {

using nlohmann::json;

TEST(RunStatsTest, TimesAreEpochSecondsUtcDatesOrAges) {
  const double now = 1790000000.0;
  EXPECT_EQ(*parse_time(json(1700000000.5), "since", now), 1700000000.5);
  EXPECT_EQ(*parse_time(json("2026-01-02"), "since", now), 1767312000.0);
  EXPECT_EQ(*parse_time(json("2026-01-02T03:04:05Z"), "since", now), 1767312000.0 + 3 * 3600 + 4 * 60 + 5);
  EXPECT_EQ(*parse_time(json("2h"), "since", now), now - 7200);
  EXPECT_EQ(*parse_time(json("7d"), "until", now), now - 7 * 86400);
  auto bad = parse_time(json("yesterday"), "since", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("since: \"yesterday\" is not a time"), std::string::npos)
      << bad.status().message();
}

TEST(RunStatsTest, AnUnknownPhaseIsRefusedListingTheKnownOnes) {
  EXPECT_TRUE(check_phase_name("step").ok());
  EXPECT_TRUE(check_phase_name("total").ok());
  auto s = check_phase_name("warmup");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown phase \"warmup\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("text_encode"), std::string::npos) << s.message();
}

TEST(RunStatsTest, AFilterArgOfTheWrongTypeIsInvalidArgument) {
  EXPECT_TRUE(parse_run_filter(json{{"seed", 3}, {"gpu", "H200"}}).ok());
  auto r = parse_run_filter(json{{"warm", "sometimes"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(RunStatsTest, SamplesCarryEveryStepTheDatabaseHolds) {
  db::testing::RunHistory h;
  db::testing::fill_run_history(h);
  db::RunFilter filter;
  filter.with_result_only = true;
  auto rows = db::query_runs(*h.db, filter);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_FALSE(rows->empty());
  auto samples = load_samples(*h.db, *rows, "host");
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), rows->size());
  size_t with_steps = 0;
  for (const RunSample& s : *samples) {
    if (s.steps.empty()) continue;
    ++with_steps;
    EXPECT_EQ(s.steps.size(), static_cast<size_t>(db::testing::RunHistory::kSteps));
    EXPECT_TRUE(s.phases.count("denoise"));
    EXPECT_TRUE(s.phases.count("total"));
  }
  EXPECT_EQ(with_steps, h.done_jobs.size());
  EXPECT_EQ(phase_values(*samples, "step").size(), with_steps * db::testing::RunHistory::kSteps);
}

}  // namespace
}  // namespace hipq::coordinator::query
