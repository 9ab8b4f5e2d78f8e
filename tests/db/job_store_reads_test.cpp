#include "db/job_store.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "base/fs.h"
#include "db/database.h"
#include "db/schema.h"
#include "db/statement.h"
#include "db/transaction.h"
#include "tests/base/test_strings.h"
#include "tests/db/test_util.h"
#include "tests/db/job_store_fixture.h"

namespace hipq::db {
namespace {

// ---- counts, listing ---------------------------------------------------------------

// Phase rows come back in the one phase order (spec/phases.h), whatever order
// they were reported in: the pipeline's phases first, anything else by name.
TEST_F(JobStoreTest, PhaseTimingsReadBackInPipelineOrder) {
  insert(make_batch(1));
  LeasedJob l = lease("w");
  NewResult r = result_for(l);
  r.phases = {{"parity", 1.0, std::nullopt}, {"zz_custom", 2.0, std::nullopt}, {"write", 3.0, std::nullopt},
              {"denoise", 4.0, 3.5},        {"load", 5.0, std::nullopt},      {"decode", 6.0, 5.5},
              {"text_encode", 7.0, 6.5},    {"aa_custom", 8.0, std::nullopt}};
  ASSERT_TRUE(store_->record_result(r, kT0 + 1).ok());
  auto res = store_->get_result(l.job.id);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  auto attempts = store_->list_attempts(l.job.id);
  ASSERT_TRUE(attempts.ok());
  ASSERT_EQ(attempts->size(), 1u);
  auto phases = store_->list_phase_timings(attempts->front().id);
  ASSERT_TRUE(phases.ok()) << phases.status().ToString();
  std::vector<std::string> names;
  for (const auto& p : *phases) names.push_back(p.phase);
  EXPECT_EQ(names, (std::vector<std::string>{"load", "text_encode", "denoise", "decode", "write", "parity",
                                             "aa_custom", "zz_custom"}));
  EXPECT_DOUBLE_EQ((*phases)[2].host_ms, 4.0);
}

TEST_F(JobStoreTest, BatchCountsByStateAndVerdict) {
  int64_t b = insert(make_batch(5, 0, 1));
  LeasedJob p = lease("w");
  LeasedJob f = lease("w");
  LeasedJob d = lease("w");
  lease("w");
  ASSERT_TRUE(store_->record_result(result_for(p, "PASS"), kT0).ok());
  ASSERT_TRUE(store_->record_result(result_for(f, "FAIL"), kT0).ok());
  ASSERT_TRUE(store_->record_failure(d.job.id, 1, "w", "boom", true, kT0).ok());
  auto c = store_->batch_counts(b);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->total, 5);
  EXPECT_EQ(c->state, BatchState::kActive);
  EXPECT_EQ(c->by_state.at("queued"), 1);
  EXPECT_EQ(c->by_state.at("leased"), 1);
  EXPECT_EQ(c->by_state.at("done"), 2);
  EXPECT_EQ(c->by_state.at("dead"), 1);  // max_attempts 1
  EXPECT_EQ(c->by_state.at("failed"), 0);
  EXPECT_EQ(c->by_state.at("cancelled"), 0);
  EXPECT_EQ(c->by_verdict, (std::map<std::string, int64_t>{{"FAIL", 1}, {"PASS", 1}}));
  EXPECT_EQ(store_->batch_counts(99).status().code(), StatusCode::kNotFound);
}

TEST_F(JobStoreTest, ListBatchesFiltersAndOrders) {
  int64_t a = insert(make_batch(1, 0, 3, "a"));
  int64_t b = insert(make_batch(1, 0, 3, "b"));
  int64_t c = insert(make_batch(1, 0, 3, "c"));
  ASSERT_TRUE(store_->cancel_batch(b, kT0).ok());
  auto all = store_->list_batches();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].id, a);
  EXPECT_EQ((*all)[2].id, c);
  auto active = store_->list_batches(BatchState::kActive);
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[1].name, "c");
  EXPECT_EQ(store_->list_batches(std::nullopt, 1)->size(), 1u);
  auto counts = store_->all_batch_counts(BatchState::kCancelled);
  ASSERT_EQ(counts->size(), 1u);
  EXPECT_EQ((*counts)[0].by_state.at("cancelled"), 1);
}

}  // namespace
}  // namespace hipq::db
