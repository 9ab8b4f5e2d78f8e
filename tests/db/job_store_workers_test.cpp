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

// A worker id belongs to the first CURVE key that registered it; a hello
// without CURVE (no key) updates the row and keeps the binding; forgetting
// the binding lets the next key take the id.
TEST_F(JobStoreTest, AWorkerIdStaysBoundToItsFirstKeyUntilForgotten) {
  const std::string a(40, 'a'), b(40, 'b');
  WorkerRecord w;
  w.id = "box/cpu0";
  w.state = "idle";
  w.curve_key = a;
  ASSERT_TRUE(store_->upsert_worker(w, kT0).ok());
  w.curve_key = a;
  w.state = "busy";
  ASSERT_TRUE(store_->upsert_worker(w, kT0 + 1).ok()) << "the same key again";
  w.curve_key = b;
  w.state = "gone";
  Status refused = store_->upsert_worker(w, kT0 + 2);
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.ToString();
  EXPECT_NE(refused.message().find("box/cpu0"), std::string::npos) << refused.ToString();
  EXPECT_EQ(store_->list_workers()->at(0).state, "busy");
  w.curve_key.reset();
  w.state = "idle";
  ASSERT_TRUE(store_->upsert_worker(w, kT0 + 3).ok()) << "without CURVE there is no key to compare";
  EXPECT_EQ(store_->worker_curve_key("box/cpu0")->value_or(""), a) << "and the binding stays";

  EXPECT_EQ(store_->forget_worker_key("nobody").code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->forget_worker_key("box/cpu0").ok());
  EXPECT_FALSE(store_->worker_curve_key("box/cpu0")->has_value());
  w.curve_key = b;
  ASSERT_TRUE(store_->upsert_worker(w, kT0 + 4).ok());
  EXPECT_EQ(store_->worker_curve_key("box/cpu0")->value_or(""), b);
  EXPECT_DOUBLE_EQ(store_->list_workers()->at(0).first_seen, kT0) << "re-keying keeps the history";
  EXPECT_FALSE(store_->worker_curve_key("nobody")->has_value());
}

}  // namespace
}  // namespace hipq::db
