#include "engine/weights_hash_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "base/fs.h"

namespace hipq::engine {
namespace {
namespace fs = std::filesystem;

class WeightsHashCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hipq-hash-cache-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    weights_ = dir_ / "unet.safetensors";
    cache_ = dir_ / "cache" / "weights-sha256.json";
    write(weights_, "first weights");
  }
  void TearDown() override { fs::remove_all(dir_); }
  static void write(const fs::path& p, const std::string& s) { ASSERT_TRUE(write_file_atomic(p, s).ok()); }
  nlohmann::json cache_json() const { return nlohmann::json::parse(read_file(cache_).value()); }
  fs::path dir_, weights_, cache_;
};

TEST_F(WeightsHashCacheTest, SecondLookupIsAnsweredFromTheCacheFile) {
  WeightsHashCache c(cache_);
  auto a = c.sha256(weights_);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, sha256_hex("first weights"));
  EXPECT_FALSE(c.last_was_hit());
  ASSERT_TRUE(fs::exists(cache_));
  WeightsHashCache again(cache_);  // another process would read the same file
  EXPECT_EQ(again.sha256(weights_).value(), *a);
  EXPECT_TRUE(again.last_was_hit());
}

TEST_F(WeightsHashCacheTest, TheStoredValueIsWhatALookupReturns) {
  WeightsHashCache c(cache_);
  ASSERT_TRUE(c.sha256(weights_).ok());
  // Plant another (well-formed) hash: a hit must return it, proving no re-read.
  nlohmann::json j = cache_json();
  const std::string planted(64, 'a');
  for (auto& [path, e] : j["entries"].items()) e["sha256"] = planted;
  write(cache_, j.dump());
  EXPECT_EQ(c.sha256(weights_).value(), planted);
}

TEST_F(WeightsHashCacheTest, AChangedFileIsHashedAgainEvenWithItsOldMtime) {
  WeightsHashCache c(cache_);
  ASSERT_TRUE(c.sha256(weights_).ok());
  struct stat before {};
  ASSERT_EQ(::stat(weights_.c_str(), &before), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  {
    std::ofstream f(weights_, std::ios::binary | std::ios::trunc);
    f << "other weights";  // same size
  }
  // Put the old mtime back, as a careless copy tool might: ctime still moves.
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, weights_.c_str(), times, 0), 0);
  EXPECT_EQ(c.sha256(weights_).value(), sha256_hex("other weights"));
  EXPECT_FALSE(c.last_was_hit());
}

TEST_F(WeightsHashCacheTest, AGarbledCacheFileIsIgnoredAndReplaced) {
  for (const std::string& junk : {std::string("{not json"), std::string("\xff\xfe\x00garbage", 11),
                                  std::string(R"({"version":1,"entries":{"x":{"sha256":"zz"}}})"),
                                  std::string(R"({"version":2,"entries":{}})"), std::string("[]")}) {
    write(cache_, junk);
    WeightsHashCache c(cache_);
    auto r = c.sha256(weights_);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, sha256_hex("first weights"));
    EXPECT_FALSE(c.last_was_hit());
    EXPECT_EQ(cache_json()["version"], 1);
  }
}

TEST_F(WeightsHashCacheTest, AnUnwritableCacheStillGivesTheHash) {
  fs::create_directories(cache_);  // a directory where the file should be
  WeightsHashCache c(cache_);
  EXPECT_EQ(c.sha256(weights_).value(), sha256_hex("first weights"));
}

TEST_F(WeightsHashCacheTest, AMissingWeightFileIsNotFound) {
  WeightsHashCache c(cache_);
  EXPECT_EQ(c.sha256(dir_ / "absent.safetensors").status().code(), StatusCode::kNotFound);
}

TEST(DefaultWeightsHashCacheTest, FollowsTheEnvironment) {
  ::setenv("HIPQ_CACHE_DIR", "/some/dir", 1);
  EXPECT_EQ(default_weights_hash_cache().value(), fs::path("/some/dir/weights-sha256.json"));
  ::setenv("HIPQ_CACHE_DIR", "", 1);
  EXPECT_FALSE(default_weights_hash_cache().has_value());
  ::unsetenv("HIPQ_CACHE_DIR");
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(default_weights_hash_cache().value(), fs::path("/xdg/hipq/weights-sha256.json"));
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace hipq::engine
