#include "db/run_queries.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <set>

#include "tests/db/run_history_fixture.h"

// Filters below are written as designated initializers naming only the
// fields a case sets; the rest keep their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace hipq::db {
namespace {

class RunQueriesTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::fill_run_history(h_); }
  std::vector<RunRow> runs(const RunFilter& f) {
    auto r = query_runs(*h_.db, f);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<RunRow>{};
  }
  testing::RunHistory h_;
};

TEST_F(RunQueriesTest, NoFilterListsEveryJobWithItsAttemptWorkerAndPhases) {
  auto all = runs({});
  ASSERT_EQ(all.size(), 14u);  // 12 done + 1 failed + 1 queued
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].job_id, all[i].job_id);
  const RunRow& first = all.front();
  EXPECT_TRUE(first.has_result);
  EXPECT_EQ(first.state, "done");
  EXPECT_EQ(first.gpu, "NVIDIA H200");
  EXPECT_EQ(first.host, "boxa");
  EXPECT_EQ(first.build_sha, "abc1234");
  EXPECT_FALSE(first.warm);  // the first job of worker a loads the model
  EXPECT_EQ(first.phases.size(), 6u);
  // The one phase order (spec/phases.h), as the job store reads them too.
  std::vector<std::string> order;
  for (const auto& p : first.phases) order.push_back(p.phase);
  EXPECT_EQ(order, (std::vector<std::string>{"load", "text_encode", "denoise", "decode", "write", "parity"}));
  EXPECT_EQ(first.tags, std::vector<std::string>{"animals"});
  EXPECT_EQ(first.manifest_path, "examples/history.yaml");
  ASSERT_TRUE(first.attempt_id.has_value());
  auto steps = query_step_timings(*h_.db, *first.attempt_id);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(steps->size(), static_cast<size_t>(testing::RunHistory::kSteps));
  double sum = 0;
  for (const auto& s : *steps) sum += s.host_ms;
  for (const auto& p : first.phases) {
    if (p.phase == "denoise") {
      EXPECT_NEAR(p.host_ms, sum, 1e-9);
    }
  }
}

TEST_F(RunQueriesTest, FailedAndQueuedJobsShowTheirState) {
  auto failed = runs({.state = "failed"});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].job_id, h_.failed_job);
  EXPECT_FALSE(failed[0].has_result);
  ASSERT_TRUE(failed[0].error.has_value());
  EXPECT_NE(failed[0].error->find("weights missing"), std::string::npos);
  auto queued = runs({.state = "queued"});
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_FALSE(queued[0].attempt_id.has_value());
  EXPECT_EQ(queued[0].gpu, "");
}

TEST_F(RunQueriesTest, EachFilterSelectsWhatItNames) {
  EXPECT_EQ(runs({.batch = h_.batch_id}).size(), 14u);
  EXPECT_EQ(runs({.batch = h_.batch_id + 1}).size(), 0u);
  const std::string sha = runs({}).front().manifest_sha256;
  EXPECT_EQ(runs({.manifest = sha.substr(0, 10)}).size(), 14u);
  EXPECT_EQ(runs({.manifest = "examples/history.yaml"}).size(), 14u);
  EXPECT_EQ(runs({.manifest = "ffffffff"}).size(), 0u);
  EXPECT_EQ(runs({.model = "tiny-sdxl"}).size(), 14u);
  EXPECT_EQ(runs({.model = "sd15"}).size(), 0u);
  EXPECT_EQ(runs({.prompt = "LIGHTHOUSE"}).size(), 6u);
  EXPECT_EQ(runs({.prompt = "animals"}).size(), 8u);  // tag: 6 + the failed and the queued copies
  EXPECT_EQ(runs({.seed = 1001}).size(), 4u);
  EXPECT_EQ(runs({.gpu = "h200"}).size(), 7u);         // 6 results + the failed attempt
  EXPECT_EQ(runs({.gpu = "gfx1030"}).size(), 6u);
  EXPECT_EQ(runs({.host = "boxb"}).size(), 6u);
  EXPECT_EQ(runs({.build = "abc"}).size(), 7u);
  EXPECT_EQ(runs({.verdict = "fail"}).size(), 2u);     // seed 1002 repeat 1, both prompts
  EXPECT_EQ(runs({.verdict = "PASS"}).size(), 10u);
  EXPECT_EQ(runs({.warm = false}).size(), 2u);
  EXPECT_EQ(runs({.warm = true}).size(), 10u);
  EXPECT_EQ(runs({.with_result_only = true}).size(), 12u);
  EXPECT_EQ(runs({.limit = 3}).size(), 3u);
  // Combined filters are ANDed.
  EXPECT_EQ(runs({.prompt = "fox", .host = "boxa"}).size(), 4u);  // 3 results + the failed one
}

TEST_F(RunQueriesTest, PagesAfterAJobListEveryRunOnceInOrder) {
  const auto all = runs({});
  ASSERT_EQ(all.size(), 14u);
  std::vector<int64_t> paged;
  RunFilter f{.limit = 4};
  for (int page = 0; page < 10; ++page) {
    const auto rows = runs(f);
    for (const auto& r : rows) paged.push_back(r.job_id);
    if (rows.size() < 4) break;
    f.after_job = rows.back().job_id;
  }
  std::vector<int64_t> expected;
  for (const auto& r : all) expected.push_back(r.job_id);
  EXPECT_EQ(paged, expected);
  EXPECT_EQ(runs({.prompt = "LIGHTHOUSE", .after_job = all[6].job_id}).size(),
            static_cast<size_t>(std::count_if(all.begin() + 7, all.end(), [](const RunRow& r) {
              return r.prompt.find("lighthouse") != std::string::npos;
            })));
}

TEST_F(RunQueriesTest, TimeWindowIsHalfOpen) {
  auto all = runs({.with_result_only = true});
  ASSERT_EQ(all.size(), 12u);
  const double t5 = all[5].time;
  auto since = runs({.since = t5, .with_result_only = true});
  auto until = runs({.until = t5, .with_result_only = true});
  EXPECT_EQ(since.size() + until.size(), 12u);
  EXPECT_EQ(since.front().job_id, all[5].job_id);
  EXPECT_EQ(runs({.since = testing::RunHistory::kStart + 1e6}).size(), 0u);
}

TEST_F(RunQueriesTest, SeedsAboveInt64MaxRoundTrip) {
  // seeds are stored bit-for-bit in SQLite's signed INTEGER (records.h)
  JobStore store(*h_.db);
  NewBatch b;
  b.name = "bigseed";
  b.output_root = (h_.dir / "out2").string();
  b.manifest_path = "m.yaml";
  b.manifest_text = "x";
  NewJob j;
  j.model = "m";
  j.prompt = "p";
  j.seed = 18446744073709551000ULL;
  j.width = j.height = 64;
  j.steps = 1;
  j.sampler = "euler";
  j.precision = "fp32";
  j.output_dir = "j";
  b.jobs.push_back(j);
  ASSERT_TRUE(store.insert_batch(b, testing::RunHistory::kStart).ok());
  auto r = runs({.seed = 18446744073709551000ULL});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].seed, 18446744073709551000ULL);
}

}  // namespace
}  // namespace hipq::db
