#include "base/fs.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

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

TEST_F(FsTest, UnwritableDirectoryIsReportedBeforeWork) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can write anywhere; permission check not observable";
  ASSERT_TRUE(ensure_directory(dir_ / "ro").ok());
  fs::permissions(dir_ / "ro", fs::perms::owner_read | fs::perms::owner_exec);
  Status s = check_writable_directory(dir_ / "ro");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied) << s.ToString();
  fs::permissions(dir_ / "ro", fs::perms::owner_all);
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
