#include "db/statement.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "db/database.h"

namespace hipq::db {
namespace {

class StatementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::open_in_memory();
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
    ASSERT_TRUE(db_->execute("CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, d REAL, s TEXT, b BLOB, "
                             "u TEXT UNIQUE, n TEXT NOT NULL DEFAULT 'x')")
                    .ok());
  }
  std::unique_ptr<Database> db_;
};

TEST_F(StatementTest, BindsAndColumnsAreZeroBased) {
  Statement ins(*db_, "INSERT INTO t (i, d, s, b) VALUES (?, ?, ?, ?)");
  ins.bind_int64(0, -42);
  ins.bind_double(1, 2.5);
  ins.bind_text(2, std::string_view("héllo\0x", 7));
  const uint8_t blob[] = {0, 1, 2, 255};
  ins.bind_blob(3, blob, sizeof blob);
  ASSERT_TRUE(ins.run().ok()) << ins.status().ToString();

  Statement sel(*db_, "SELECT i, d, s, b FROM t WHERE id = ?");
  sel.bind_int64(0, 1);
  auto row = sel.step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(sel.column_count(), 4);
  EXPECT_EQ(sel.column_int64(0), -42);
  EXPECT_DOUBLE_EQ(sel.column_double(1), 2.5);
  EXPECT_EQ(sel.column_text(2), std::string("héllo\0x", 7));
  EXPECT_EQ(sel.column_blob(3), (std::vector<uint8_t>{0, 1, 2, 255}));
  EXPECT_FALSE(*sel.step());
}

TEST_F(StatementTest, OptionalBindsWriteNull) {
  Statement ins(*db_, "INSERT INTO t (i, d, s) VALUES (?, ?, ?)");
  ins.bind_optional_int64(0, std::nullopt);
  ins.bind_optional_double(1, std::nullopt);
  ins.bind_optional_text(2, std::nullopt);
  ASSERT_TRUE(ins.run().ok());
  Statement sel(*db_, "SELECT i, d, s FROM t ORDER BY id");
  ASSERT_TRUE(*sel.step());
  EXPECT_TRUE(sel.column_is_null(0));
  EXPECT_FALSE(sel.column_optional_int64(0).has_value());
  EXPECT_FALSE(sel.column_optional_double(1).has_value());
  EXPECT_FALSE(sel.column_optional_text(2).has_value());
}

TEST_F(StatementTest, Int64ExtremesRoundTrip) {
  Statement ins(*db_, "INSERT INTO t (i) VALUES (?)");
  for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{0}, std::numeric_limits<int64_t>::max()}) {
    ins.reset();
    ins.bind_int64(0, v);
    ASSERT_TRUE(ins.run().ok());
  }
  Statement sel(*db_, "SELECT i FROM t ORDER BY id");
  std::vector<int64_t> got;
  while (*sel.step()) got.push_back(sel.column_int64(0));
  EXPECT_EQ(got, (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 0,
                                       std::numeric_limits<int64_t>::max()}));
}

TEST_F(StatementTest, PrepareErrorMakesStatementInertAndNamesSql) {
  Statement bad(*db_, "SELECT nope FROM t");
  EXPECT_FALSE(bad.is_valid());
  bad.bind_int64(0, 1);  // ignored, no crash
  auto row = bad.step();
  ASSERT_FALSE(row.ok());
  EXPECT_NE(row.status().message().find("SELECT nope FROM t"), std::string::npos) << row.status().ToString();
  EXPECT_NE(row.status().message().find("no such column"), std::string::npos);
  EXPECT_EQ(bad.column_int64(0), 0);
  EXPECT_FALSE(bad.run().ok());
}

TEST_F(StatementTest, BindOutOfRangeIsAnErrorThatSticks) {
  Statement s(*db_, "INSERT INTO t (i) VALUES (?)");
  s.bind_int64(5, 1);
  EXPECT_FALSE(s.is_valid());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  s.bind_int64(0, 1);  // too late: still inert
  EXPECT_FALSE(s.run().ok());
  Statement count(*db_, "SELECT COUNT(*) FROM t");
  ASSERT_TRUE(*count.step());
  EXPECT_EQ(count.column_int64(0), 0);
}

TEST_F(StatementTest, UniqueViolationIsAlreadyExists) {
  ASSERT_TRUE(db_->execute("INSERT INTO t (u) VALUES ('k')").ok());
  Statement s(*db_, "INSERT INTO t (u) VALUES (?)");
  s.bind_text(0, "k");
  Status st = s.run();
  EXPECT_EQ(st.code(), StatusCode::kAlreadyExists) << st.ToString();
  EXPECT_FALSE(s.is_valid());
}

TEST_F(StatementTest, NotNullViolationIsFailedPrecondition) {
  Statement s(*db_, "INSERT INTO t (n) VALUES (?)");
  s.bind_null(0);
  EXPECT_EQ(s.run().code(), StatusCode::kFailedPrecondition);
}

TEST_F(StatementTest, RunOfAQueryIsRefused) {
  ASSERT_TRUE(db_->execute("INSERT INTO t (i) VALUES (1)").ok());
  Statement s(*db_, "SELECT i FROM t ORDER BY id");
  EXPECT_EQ(s.run().code(), StatusCode::kFailedPrecondition);
}

TEST_F(StatementTest, ResetAllowsReuse) {
  Statement ins(*db_, "INSERT INTO t (i) VALUES (?)");
  for (int i = 0; i < 3; ++i) {
    ins.reset();
    ins.bind_int(0, i);
    ASSERT_TRUE(ins.run().ok());
  }
  Statement sum(*db_, "SELECT SUM(i) FROM t");
  ASSERT_TRUE(*sum.step());
  EXPECT_EQ(sum.column_int64(0), 3);
}

TEST_F(StatementTest, MovedFromStatementIsEmptyAndMovedToWorks) {
  Statement a(*db_, "SELECT 7");
  Statement b(std::move(a));
  ASSERT_TRUE(*b.step());
  EXPECT_EQ(b.column_int(0), 7);
}

TEST_F(StatementTest, CachedStatementsAreReusedCleanAndNeverShared) {
  ASSERT_TRUE(db_->execute("INSERT INTO t (i) VALUES (1), (2), (3)").ok());
  constexpr char kSql[] = "SELECT i FROM t WHERE i >= ? ORDER BY i";
  {
    Statement a = db_->prepare_cached(kSql);
    a.bind_int(0, 2);
    ASSERT_TRUE(*a.step());
    EXPECT_EQ(a.column_int(0), 2);
    // The same text while `a` is mid-read: a separate statement.
    Statement b = db_->prepare_cached(kSql);
    b.bind_int(0, 1);
    ASSERT_TRUE(*b.step());
    EXPECT_EQ(b.column_int(0), 1);
    ASSERT_TRUE(*a.step());
    EXPECT_EQ(a.column_int(0), 3);
  }
  // Reused after release: starts from the top with no binds left over (NULL
  // bind → no row matches).
  Statement c = db_->prepare_cached(kSql);
  EXPECT_FALSE(*c.step());
  c.reset();
  c.bind_int(0, 3);
  ASSERT_TRUE(*c.step());
  EXPECT_EQ(c.column_int(0), 3);
  // Errors are reported, not cached.
  Statement bad = db_->prepare_cached("SELECT nope FROM t");
  EXPECT_FALSE(bad.is_valid());
  Statement bad2 = db_->prepare_cached("SELECT nope FROM t");
  EXPECT_FALSE(bad2.is_valid());
}

TEST_F(StatementTest, ColumnsBeforeStepReadAsNull) {
  Statement s(*db_, "SELECT 1");
  EXPECT_TRUE(s.column_is_null(0));
  EXPECT_EQ(s.column_text(0), "");
}

}  // namespace
}  // namespace hipq::db
