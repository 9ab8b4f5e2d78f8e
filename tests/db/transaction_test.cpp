#include "db/transaction.h"

#include <gtest/gtest.h>

#include "db/database.h"
#include "db/statement.h"
#include "tests/db/test_util.h"

namespace hipq::db {
namespace {

using testing::TempDir;

int64_t count_rows(Database& db) {
  Statement s(db, "SELECT COUNT(*) FROM t");
  auto row = s.step();
  return row.ok() && *row ? s.column_int64(0) : -1;
}

class TransactionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::open_in_memory();
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
    ASSERT_TRUE(db_->execute("CREATE TABLE t (v INTEGER NOT NULL)").ok());
  }
  std::unique_ptr<Database> db_;
};

TEST_F(TransactionTest, CommitKeepsWrites) {
  auto txn = Transaction::begin_immediate(*db_);
  ASSERT_TRUE(txn.ok());
  EXPECT_TRUE(db_->in_transaction());
  ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (1)").ok());
  ASSERT_TRUE(txn->commit().ok());
  EXPECT_FALSE(txn->is_open());
  EXPECT_FALSE(db_->in_transaction());
  EXPECT_EQ(count_rows(*db_), 1);
}

TEST_F(TransactionTest, DestructorRollsBackUncommitted) {
  {
    auto txn = Transaction::begin_immediate(*db_);
    ASSERT_TRUE(txn.ok());
    ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (1)").ok());
  }
  EXPECT_FALSE(db_->in_transaction());
  EXPECT_EQ(count_rows(*db_), 0);
}

TEST_F(TransactionTest, ExplicitRollback) {
  auto txn = Transaction::begin_deferred(*db_);
  ASSERT_TRUE(txn.ok());
  ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (1)").ok());
  ASSERT_TRUE(txn->rollback().ok());
  EXPECT_EQ(count_rows(*db_), 0);
  EXPECT_EQ(txn->commit().code(), StatusCode::kFailedPrecondition);
}

TEST_F(TransactionTest, NestingIsRefused) {
  auto outer = Transaction::begin_immediate(*db_);
  ASSERT_TRUE(outer.ok());
  auto inner = Transaction::begin_immediate(*db_);
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(outer->is_open());
}

TEST_F(TransactionTest, MovedTransactionRollsBackOnce) {
  {
    auto txn = Transaction::begin_immediate(*db_);
    ASSERT_TRUE(txn.ok());
    Transaction moved(std::move(*txn));
    EXPECT_FALSE(txn->is_open());
    EXPECT_TRUE(moved.is_open());
    ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (1)").ok());
  }
  EXPECT_EQ(count_rows(*db_), 0);
}

TEST_F(TransactionTest, BeginWriteIsImmediateAlone) {
  auto txn = Transaction::begin_write(*db_);
  ASSERT_TRUE(txn.ok());
  EXPECT_FALSE(txn->is_savepoint());
  ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (1)").ok());
  ASSERT_TRUE(txn->commit().ok());
  EXPECT_FALSE(db_->in_transaction());
  EXPECT_EQ(count_rows(*db_), 1);
}

TEST_F(TransactionTest, BeginWriteNestsAsSavepointThatRollsBackAlone) {
  auto outer = Transaction::begin_immediate(*db_);
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (1)").ok());
  {
    auto inner = Transaction::begin_write(*db_);
    ASSERT_TRUE(inner.ok());
    EXPECT_TRUE(inner->is_savepoint());
    ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (2)").ok());
    // destroyed uncommitted: only its own row goes
  }
  EXPECT_TRUE(db_->in_transaction());
  EXPECT_EQ(count_rows(*db_), 1);
  {
    auto inner = Transaction::begin_write(*db_);
    ASSERT_TRUE(inner.ok());
    ASSERT_TRUE(db_->execute("INSERT INTO t (v) VALUES (3)").ok());
    ASSERT_TRUE(inner->commit().ok());
  }
  EXPECT_TRUE(db_->in_transaction());  // released, not committed
  EXPECT_EQ(count_rows(*db_), 2);
  ASSERT_TRUE(outer->rollback().ok());
  EXPECT_EQ(count_rows(*db_), 0);  // the outer rollback takes the released savepoint too
}

TEST(TransactionFileTest, ImmediateWriterBlocksSecondWriterUntilTimeout) {
  TempDir dir;
  auto a = Database::open(dir.path() / "x.db");
  Database::Options quick;
  quick.busy_timeout = std::chrono::milliseconds(50);
  auto b = Database::open(dir.path() / "x.db", quick);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->execute("CREATE TABLE t (v INTEGER NOT NULL)").ok());
  auto ta = Transaction::begin_immediate(**a);
  ASSERT_TRUE(ta.ok());
  auto tb = Transaction::begin_immediate(**b);
  ASSERT_FALSE(tb.ok());
  EXPECT_EQ(tb.status().code(), StatusCode::kUnavailable) << tb.status().ToString();
  // Readers are not blocked by the writer (WAL).
  EXPECT_EQ(count_rows(**b), 0);
  ASSERT_TRUE((*a)->execute("INSERT INTO t (v) VALUES (1)").ok());
  ASSERT_TRUE(ta->commit().ok());
  auto tb2 = Transaction::begin_immediate(**b);
  ASSERT_TRUE(tb2.ok());
  EXPECT_EQ(count_rows(**b), 1);
}

}  // namespace
}  // namespace hipq::db
