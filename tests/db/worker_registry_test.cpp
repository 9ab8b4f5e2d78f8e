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

// ---- workers ----------------------------------------------------------------------

TEST_F(JobStoreTest, UpsertWorkerKeepsFirstSeen) {
  WorkerRecord w;
  w.id = "host-a/0";
  w.host = "host-a";
  w.device_name = "Radeon";
  w.arch = "gfx1100";
  w.memory_bytes = int64_t{24} << 30;
  w.backend = "hip";
  w.state = "idle";
  ASSERT_TRUE(store_->upsert_worker(w, kT0).ok());
  w.state = "busy";
  w.driver_version = "6.3";
  ASSERT_TRUE(store_->upsert_worker(w, kT0 + 60).ok());
  ASSERT_TRUE(store_->set_worker_state("host-a/0", "draining", kT0 + 61).ok());
  EXPECT_EQ(store_->set_worker_state("nobody", "x", kT0).code(), StatusCode::kNotFound);
  auto ws = store_->list_workers();
  ASSERT_EQ(ws->size(), 1u);
  EXPECT_DOUBLE_EQ((*ws)[0].first_seen, kT0);
  EXPECT_DOUBLE_EQ((*ws)[0].last_seen, kT0 + 61);
  EXPECT_EQ((*ws)[0].state, "draining");
  EXPECT_EQ((*ws)[0].driver_version, "6.3");
  EXPECT_EQ((*ws)[0].memory_bytes, int64_t{24} << 30);
}

}  // namespace
}  // namespace hipq::db
