#include "base/fs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace hipq {
namespace {
namespace fs = std::filesystem;

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hipq_fs_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(FsTest, AtomicWriteCreatesMissingParents) {
  fs::path p = dir_ / "a" / "b" / "latent.bin";
  ASSERT_TRUE(write_file_atomic(p, "hello").ok());
  auto r = read_file(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "hello");
  // No temporary files left beside it.
  int n = 0;
  for (auto& e : fs::directory_iterator(p.parent_path())) { (void)e; ++n; }
  EXPECT_EQ(n, 1);
}

TEST_F(FsTest, AtomicWriteReplacesWholeFile) {
  fs::path p = dir_ / "x.txt";
  ASSERT_TRUE(write_file_atomic(p, "first version, long").ok());
  ASSERT_TRUE(write_file_atomic(p, "second").ok());
  EXPECT_EQ(*read_file(p), "second");
}

TEST_F(FsTest, ParentIsAFileGivesClearError) {
  ASSERT_TRUE(write_file_atomic(dir_ / "f", "x").ok());
  Status s = write_file_atomic(dir_ / "f" / "y.txt", "x");
  EXPECT_EQ(s.code(), StatusCode::kIOError);
  EXPECT_NE(s.message().find("exists and is not a directory"), std::string::npos) << s.ToString();
}

// Workers sharing an output tree (one box or several on one filesystem)
// create the same parents at once: a parent another process makes between
// this one's look and its mkdir is a directory like any other, never "exists
// and is not a directory". Eight threads, each a leaf of its own under
// parents they all create, 300 times.
TEST_F(FsTest, ParentsCreatedByOthersAtTheSameMomentAreTakenAsTheyAre) {
  for (int round = 0; round < 300; ++round) {
    // Names built by append: GCC 12 at -O3 warns (-Wrestrict, a known false
    // positive) on a literal + std::to_string(...) temporary.
    std::string round_name = "r";
    round_name.append(std::to_string(round));
    const fs::path shared = dir_ / round_name / "batch-1";
    std::vector<Status> got(8);
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        ready.fetch_add(1);
        while (ready.load() < 8) std::this_thread::yield();
        std::string leaf = "job-";
        leaf.append(std::to_string(t));
        got[static_cast<size_t>(t)] = ensure_directory(shared / leaf);
      });
    }
    for (std::thread& th : threads) th.join();
    for (const Status& s : got) ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.ToString();
  }
}

TEST_F(FsTest, UnwritableDirectoryIsReportedBeforeWork) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write anywhere; permission check not observable";
  ASSERT_TRUE(ensure_directory(dir_ / "ro").ok());
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  Status s = check_writable_directory(dir_ / "ro");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
}

// Someone deleting the tree (rm -rf, over and over) while hipq checks and
// writes in it: the check is never a refusal (PermissionDenied or IOError
// would stop a whole batch as a configuration error); a write either lands
// whole or says it was an I/O error or that the directory kept vanishing,
// and leaves no temporary.
TEST_F(FsTest, ATreeDeletedOverAndOverIsNeverARefusalAndLeavesNoTemporary) {
  std::atomic<bool> stop{false};
  std::thread deleter([&] {
    while (!stop.load()) {
      std::error_code ec;
      fs::remove_all(dir_ / "root", ec);
      // A shell's rm -rf loop leaves a few hundred microseconds between two
      // deletions (fork, exec); a thread that leaves none wins every round.
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  int refused = 0, written = 0;
  std::string first_refusal;
  // 300 rounds, and on until one write has landed (the deleter, spinning on a
  // loaded 2-core machine, can win every round of the 300): at most 20 s.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int i = 0; i < 300 || (written == 0 && std::chrono::steady_clock::now() < deadline); ++i) {
    const fs::path job = dir_ / "root" / "batch" / ("job" + std::to_string(i % 7));
    Status checked = check_writable_directory(job);
    Status wrote = write_file_atomic(job / "latent.bin", std::string(4096, 'x'));
    // The check's errors other than Unavailable stop a batch (engine/job.cpp);
    // a write's I/O error is retried.
    const bool check_ok = checked.ok() || checked.code() == StatusCode::kUnavailable;
    const bool write_ok = wrote.ok() || wrote.code() == StatusCode::kUnavailable || wrote.code() == StatusCode::kIOError;
    if (!check_ok && refused++ == 0) first_refusal = "check: " + checked.ToString();
    if (!write_ok && refused++ == 0) first_refusal = "write: " + wrote.ToString();
    written += wrote.ok();
  }
  stop.store(true);
  deleter.join();
  EXPECT_EQ(refused, 0) << "first: " << first_refusal;
  EXPECT_GT(written, 0);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    EXPECT_EQ(it->path().filename().string().find(".tmp."), std::string::npos) << it->path();
  }
}

TEST_F(FsTest, MissingFileIsNotFoundWithPath) {
  auto r = read_file(dir_ / "nope");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace hipq
