// The report's run table: every run up to its cap; past it the worst by
// parity and the slowest, with the counts of the rest.
#include "coordinator/query/run_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace hipq::coordinator::query {
namespace {

using nlohmann::json;

db::RunRow run(int64_t job, double cosine, double ms, const char* verdict = "PASS", const char* state = "done") {
  db::RunRow r;
  r.job_id = job;
  r.state = state;
  r.verdict = verdict;
  r.cosine = cosine;
  r.has_result = true;
  r.phases.push_back({"denoise", ms, std::nullopt});
  return r;
}

std::vector<int64_t> jobs(const json& runs) {
  std::vector<int64_t> out;
  for (const auto& r : runs) out.push_back(r["job"].get<int64_t>());
  return out;
}

TEST(RunTableTest, UpToTheCapEveryRunInJobOrder) {
  RunTable t(4, 1, 1);
  for (int64_t j = 1; j <= 4; ++j) t.add(run(j, 0.99, 10));
  EXPECT_FALSE(t.capped());
  EXPECT_EQ(jobs(t.runs()), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(t.summary()["not_shown"], 0);
}

TEST(RunTableTest, PastTheCapTheWorstByParityAndTheSlowestWithTheCountsOfTheRest) {
  RunTable t(4, 2, 2);
  // Job 3 fails parity, job 7 failed outright (no result), job 5 has the lowest
  // cosine of the passing ones; jobs 9 and 2 are the slowest.
  for (int64_t j = 1; j <= 10; ++j) {
    if (j == 3) t.add(run(j, 0.5, 10, "FAIL"));
    else if (j == 7) {
      db::RunRow r;
      r.job_id = j;
      r.state = "failed";
      r.error = "out of memory";
      t.add(r);
    } else {
      t.add(run(j, j == 5 ? 0.9 : 0.999, j == 9 ? 90 : j == 2 ? 80 : 10));
    }
  }
  ASSERT_TRUE(t.capped());
  EXPECT_EQ(jobs(t.runs()), (std::vector<int64_t>{2, 3, 7, 9})) << t.runs().dump();
  EXPECT_EQ(t.summary(), (json{{"total", 10}, {"shown", 4}, {"cap", 4}, {"worst_by_parity", 2}, {"slowest", 2},
                               {"not_shown", 6}}));
}

}  // namespace
}  // namespace hipq::coordinator::query
