// The fixture of the job store's tests (tests/db/job_store_*_test.cpp): a
// migrated in-memory database and its JobStore.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "db/database.h"
#include "db/job_store.h"
#include "db/schema.h"
#include "db/statement.h"
#include "tests/base/test_strings.h"
#include "tests/db/test_util.h"

namespace hipq::db {

using hipq::testing::numbered;
using testing::make_batch;
using testing::make_job;
using testing::TempDir;

inline constexpr double kT0 = 1'800'000'000.0;  // a fixed "now"
inline constexpr double kLease = 30.0;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::open_in_memory();
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
    ASSERT_TRUE(migrate(*db_).ok());
    store_ = std::make_unique<JobStore>(*db_);
  }

  int64_t insert(const NewBatch& b, double now = kT0) {
    auto id = store_->insert_batch(b, now);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    return id.ok() ? *id : -1;
  }

  LeasedJob lease(const std::string& worker, double now = kT0, std::vector<std::string> models = {}) {
    auto l = store_->lease_next(worker, models, now, kLease);
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_TRUE(l.ok() && l->has_value()) << "nothing to lease";
    return l.ok() && l->has_value() ? **l : LeasedJob{};
  }

  NewResult result_for(const LeasedJob& l, std::string verdict = "PASS") {
    NewResult r;
    r.job_id = l.job.id;
    r.attempt = l.attempt;
    r.worker_id = *l.job.lease_worker;
    r.verdict = std::move(verdict);
    r.cosine = 0.99995;
    r.max_abs = 0.01;
    r.rel_l2 = 0.002;
    r.golden_key = "key-" + std::to_string(l.job.id);
    r.outputs = {{"latent", l.job.output_dir + "/latent.safetensors", std::string(64, 'a'), 65536},
                 {"png", l.job.output_dir + "/image.png", std::string(64, 'b'), 1234}};
    r.peak_memory_bytes = int64_t{1} << 30;
    r.warm = true;
    r.phases = {{"load", 100.0, std::nullopt}, {"text_encode", 5.0, 4.5}, {"denoise", 50.0, 49.0},
                {"decode", 10.0, 9.0}};
    r.steps = {{0, 12.0, 11.5}, {1, 12.5, 12.0}, {2, 12.0, 11.0}, {3, 13.0, 12.5}};
    return r;
  }

  int64_t count(const std::string& sql) {
    Statement s(*db_, sql);
    auto row = s.step();
    return row.ok() && *row ? s.column_int64(0) : -1;
  }

  std::unique_ptr<Database> db_;
  std::unique_ptr<JobStore> store_;
};

}  // namespace hipq::db
