#include "db/database.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "db/statement.h"
#include "db/transaction.h"
#include "tests/db/test_util.h"

namespace hipq::db {
namespace {

using testing::TempDir;

TEST(DatabaseTest, OpenFileAppliesPragmas) {
  TempDir dir;
  auto db = Database::open(dir.path() / "a.db");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto pragma = [&](const char* sql) {
    Statement s = (*db)->prepare(sql);
    auto row = s.step();
    EXPECT_TRUE(row.ok() && *row) << sql << ": " << s.status().ToString();
    return s.column_text(0);
  };
  EXPECT_EQ(pragma("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(pragma("PRAGMA synchronous"), "2");  // FULL
  EXPECT_EQ(pragma("PRAGMA foreign_keys"), "1");
  EXPECT_EQ(pragma("PRAGMA busy_timeout"), "10000");
  EXPECT_EQ(pragma("PRAGMA temp_store"), "0");  // the default: large sorts may spill to files
}

TEST(DatabaseTest, TheCoordinatorsConnectionKeepsSavepointJournalsInMemoryAndRollsThemBack) {
  TempDir dir;
  Database::Options o;
  o.memory_temp_store = true;
  auto db = Database::open_and_migrate(dir.path() / "a.db", o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Statement t = (*db)->prepare("PRAGMA temp_store");
  ASSERT_TRUE(t.step().ok());
  EXPECT_EQ(t.column_text(0), "2");  // MEMORY
  // A savepoint rolled back inside an open transaction undoes only its own
  // writes (its journal in memory), and the transaction commits the rest.
  ASSERT_TRUE((*db)->execute("CREATE TABLE t (x INTEGER)").ok());
  auto outer = Transaction::begin_immediate(**db);
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE((*db)->execute("INSERT INTO t (x) VALUES (1)").ok());
  {
    auto inner = Transaction::begin_write(**db);
    ASSERT_TRUE(inner.ok() && inner->is_savepoint());
    for (int i = 0; i < 200; ++i) ASSERT_TRUE((*db)->execute("INSERT INTO t (x) VALUES (2)").ok());
    ASSERT_TRUE((*db)->execute("UPDATE t SET x = 3 WHERE x = 1").ok());
  }  // rolled back
  {
    auto inner = Transaction::begin_write(**db);
    ASSERT_TRUE(inner.ok());
    ASSERT_TRUE((*db)->execute("INSERT INTO t (x) VALUES (4)").ok());
    ASSERT_TRUE(inner->commit().ok());
  }
  ASSERT_TRUE(outer->commit().ok());
  Statement rows = (*db)->prepare("SELECT group_concat(x) FROM (SELECT x FROM t ORDER BY x)");
  ASSERT_TRUE(rows.step().ok());
  EXPECT_EQ(rows.column_text(0), "1,4");
}

// The coordinator's connection, owned by its poll loop alone, skips SQLite's
// per-connection mutex; every other connection keeps it (a Database may be
// opened on one thread and handed to another).
TEST(DatabaseTest, OnlyASingleThreadConnectionGoesWithoutItsMutex) {
  TempDir dir;
  Database::Options o;
  o.single_thread = true;
  auto lone = Database::open_and_migrate(dir.path() / "a.db", o);
  ASSERT_TRUE(lone.ok()) << lone.status().ToString();
  EXPECT_EQ(sqlite3_db_mutex((*lone)->handle()), nullptr);
  auto shared = Database::open(dir.path() / "a.db");
  ASSERT_TRUE(shared.ok());
  EXPECT_NE(sqlite3_db_mutex((*shared)->handle()), nullptr);
  // It works as any other: a transaction begun and committed twice (the
  // BEGIN and COMMIT statements are prepared once and reused).
  ASSERT_TRUE((*lone)->execute("CREATE TABLE t (x INTEGER)").ok());
  for (int i = 0; i < 2; ++i) {
    auto t = Transaction::begin_immediate(**lone);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ASSERT_TRUE((*lone)->execute("INSERT INTO t (x) VALUES (1)").ok());
    ASSERT_TRUE(t->commit().ok());
  }
  Statement n = (*shared)->prepare("SELECT COUNT(*) FROM t");
  ASSERT_TRUE(n.step().ok());
  EXPECT_EQ(n.column_int64(0), 2);
}

// The database and its -wal/-shm hold every prompt and path: owner only,
// whatever the umask, and an older world-readable file is tightened.
TEST(DatabaseTest, FileAndItsWalAndShmAreCreatedOwnerOnly) {
  TempDir dir;
  mode_t old = ::umask(022);
  {
    auto db = Database::open_and_migrate(dir.path() / "a.db");
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    for (const char* name : {"a.db", "a.db-wal", "a.db-shm"}) {
      auto p = dir.path() / name;
      ASSERT_TRUE(std::filesystem::exists(p)) << name;
      EXPECT_EQ(std::filesystem::status(p).permissions() & std::filesystem::perms::all,
                std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
          << name;
    }
  }
  std::filesystem::path legacy = dir.path() / "legacy.db";
  { std::ofstream(legacy) << ""; }
  std::filesystem::permissions(legacy, std::filesystem::perms(0666));
  ASSERT_TRUE(Database::open(legacy).ok());
  EXPECT_EQ(std::filesystem::status(legacy).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write | std::filesystem::perms::group_read);
  ::umask(old);
}

TEST(DatabaseTest, OpenInMemoryHasForeignKeys) {
  auto db = Database::open_in_memory();
  ASSERT_TRUE(db.ok());
  Statement s = (*db)->prepare("PRAGMA foreign_keys");
  ASSERT_TRUE(*s.step());
  EXPECT_EQ(s.column_int(0), 1);
  EXPECT_EQ((*db)->describe(), ":memory:");
}

TEST(DatabaseTest, MustExistReportsNotFound) {
  TempDir dir;
  Database::Options opts;
  opts.must_exist = true;
  auto db = Database::open(dir.path() / "missing.db", opts);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kNotFound);
  EXPECT_NE(db.status().message().find("missing.db"), std::string::npos);
}

TEST(DatabaseTest, OpenInMissingDirectoryIsIOErrorNamingPath) {
  TempDir dir;
  auto db = Database::open(dir.path() / "no" / "such" / "dir" / "a.db");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kIOError);
  EXPECT_NE(db.status().message().find("a.db"), std::string::npos);
}

TEST(DatabaseTest, NotADatabaseIsReported) {
  TempDir dir;
  auto path = dir.path() / "garbage.db";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::string junk(4096, 'x');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  auto db = Database::open(path);
  // SQLite notices on the first read (the WAL switch).
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), StatusCode::kCorruption) << db.status().ToString();
}

TEST(DatabaseTest, ExecuteErrorNamesSql) {
  auto db = Database::open_in_memory();
  ASSERT_TRUE(db.ok());
  Status s = (*db)->execute("CREATE TABLE t (a INTEGER); CREATE TABLE t (a INTEGER);");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("already exists"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("CREATE TABLE"), std::string::npos) << s.ToString();
}

TEST(DatabaseTest, LastInsertRowidAndChanges) {
  auto db = Database::open_in_memory();
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)").ok());
  ASSERT_TRUE((*db)->execute("INSERT INTO t (v) VALUES ('a'), ('b')").ok());
  EXPECT_EQ((*db)->last_insert_rowid(), 2);
  ASSERT_TRUE((*db)->execute("UPDATE t SET v = 'c'").ok());
  EXPECT_EQ((*db)->changes(), 2);
}

TEST(DatabaseTest, WallClockIsEpochSeconds) {
  double t = wall_clock_seconds();
  EXPECT_GT(t, 1.6e9);   // after 2020
  EXPECT_LT(t, 4.2e9);   // before 2103
}

}  // namespace
}  // namespace hipq::db
