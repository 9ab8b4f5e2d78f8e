#include "engine/weight_source.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "base/fs.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;

class WeightSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hipq_weight_source_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(WeightSourceTest, ShardsFormOneNamespace) {
  ASSERT_TRUE(write_safetensors(dir_ / "a.safetensors", {{"x", HostTensor::from_f32({1, 2}, {2})}}).ok());
  ASSERT_TRUE(write_safetensors(dir_ / "b.safetensors", {{"y", HostTensor::from_f32({3}, {1, 1})}}).ok());
  auto src = open_safetensors_source({dir_ / "a.safetensors", dir_ / "b.safetensors"}, "unet");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE((*src)->contains("y"));
  EXPECT_EQ((*src)->meta("y")->shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ((*src)->get("y")->to_f32()[0], 3.0f);
  auto missing = (*src)->get("z");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("unet"), std::string::npos);
  EXPECT_NE(missing.status().message().find("'z'"), std::string::npos);
}

TEST_F(WeightSourceTest, DuplicateAcrossShardsIsCorruption) {
  ASSERT_TRUE(write_safetensors(dir_ / "a.safetensors", {{"x", HostTensor::from_f32({1}, {1})}}).ok());
  ASSERT_TRUE(write_safetensors(dir_ / "b.safetensors", {{"x", HostTensor::from_f32({2}, {1})}}).ok());
  auto src = open_safetensors_source({dir_ / "a.safetensors", dir_ / "b.safetensors"});
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), StatusCode::kCorruption);
  EXPECT_NE(src.status().message().find("a.safetensors"), std::string::npos);
  EXPECT_NE(src.status().message().find("b.safetensors"), std::string::npos);
}

TEST_F(WeightSourceTest, IndexJsonOpensItsShards) {
  ASSERT_TRUE(write_safetensors(dir_ / "m-1.safetensors", {{"x", HostTensor::from_f32({1}, {1})}}).ok());
  ASSERT_TRUE(write_safetensors(dir_ / "m-2.safetensors", {{"y", HostTensor::from_f32({2}, {1})}}).ok());
  ASSERT_TRUE(write_file_atomic(dir_ / "m.safetensors.index.json",
                                R"({"metadata":{},"weight_map":{"x":"m-1.safetensors","y":"m-2.safetensors"}})")
                  .ok());
  auto src = open_safetensors_index(dir_ / "m.safetensors.index.json");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_EQ((*src)->get("y")->to_f32()[0], 2.0f);

  ASSERT_TRUE(write_file_atomic(dir_ / "bad.index.json", R"({"weight_map":{"x":"m-2.safetensors"}})").ok());
  auto bad = open_safetensors_index(dir_ / "bad.index.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not hold it"), std::string::npos) << bad.status().ToString();
}

TEST_F(WeightSourceTest, InMemorySource) {
  InMemoryWeightSource src("synthetic unet");
  src.add("w", HostTensor::from_f32({1, 2, 3, 4}, {2, 2}));
  EXPECT_TRUE(src.contains("w"));
  EXPECT_EQ(src.meta("w")->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(src.get("w")->to_f32()[3], 4.0f);
  EXPECT_EQ(src.get("v").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hipq::engine
