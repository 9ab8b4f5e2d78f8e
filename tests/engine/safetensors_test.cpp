#include "engine/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "base/fs.h"

namespace hipq::engine {
namespace {

namespace fs = std::filesystem;
using kernels::DType;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("hipq_safetensors_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A raw file: 8-byte length `declared_len` + header + data.
  fs::path raw(const std::string& name, const std::string& header, const std::string& data,
               std::optional<uint64_t> declared_len = std::nullopt) {
    std::string bytes;
    uint64_t len = declared_len.value_or(header.size());
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    bytes += header + data;
    auto p = dir_ / name;
    EXPECT_TRUE(write_file_atomic(p, bytes).ok());
    return p;
  }

  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripAllDtypesAndMetadata) {
  std::vector<std::pair<std::string, HostTensor>> tensors;
  auto f32 = HostTensor::from_f32({1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f}, {2, 3});
  tensors.emplace_back("a.weight", f32);
  auto f16 = HostTensor::owned(DType::kF16, {4});
  auto bf16 = HostTensor::owned(DType::kBF16, {2, 2});
  auto i64 = HostTensor::owned(DType::kI64, {3});
  auto i32 = HostTensor::owned(DType::kI32, {1, 1, 2});
  for (int i = 0; i < 4; ++i) kernels::store_from_f32(f16.mutable_data(), DType::kF16, i, 0.5f * i - 1);
  for (int i = 0; i < 4; ++i) kernels::store_from_f32(bf16.mutable_data(), DType::kBF16, i, 2.0f * i);
  for (int i = 0; i < 3; ++i) static_cast<int64_t*>(i64.mutable_data())[i] = (int64_t{1} << 40) + i;
  static_cast<int32_t*>(i32.mutable_data())[0] = -7;
  static_cast<int32_t*>(i32.mutable_data())[1] = 9;
  tensors.emplace_back("b.f16", f16);
  tensors.emplace_back("c.bf16", bf16);
  tensors.emplace_back("d.ids", i64);
  tensors.emplace_back("e.i32", i32);
  tensors.emplace_back("f.empty", HostTensor::owned(DType::kF32, {0, 5}));
  const auto path = dir_ / "round.safetensors";
  ASSERT_TRUE(write_safetensors(path, tensors, {{"format", "pt"}, {"origin", "test"}}).ok());

  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->names(), (std::vector<std::string>{"a.weight", "b.f16", "c.bf16", "d.ids", "e.i32", "f.empty"}));
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  EXPECT_EQ((*file)->metadata().at("origin"), "test");
  for (const auto& [name, want] : tensors) {
    auto got = (*file)->get(name);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->dtype, want.dtype) << name;
    EXPECT_EQ(got->shape, want.shape) << name;
    ASSERT_EQ(got->nbytes, want.nbytes) << name;
    if (want.nbytes) {
      EXPECT_EQ(std::memcmp(got->data, want.data, want.nbytes), 0) << name;
    }
  }
  EXPECT_EQ((*file)->get("b.f16")->to_f32(), (std::vector<float>{-1.0f, -0.5f, 0.0f, 0.5f}));
  // Views outlive the file object (the mapping is kept alive by the tensor).
  HostTensor kept = *(*file)->get("a.weight");
  file = Status::NotFound("dropped");
  EXPECT_EQ(kept.to_f32()[2], 3.25f);
  EXPECT_EQ(kept.view().numel(), 6);
}

TEST_F(SafetensorsTest, DataSectionIsEightByteAligned) {
  auto bytes = serialize_safetensors({{"x", HostTensor::from_f32({1, 2, 3}, {3})}});
  ASSERT_TRUE(bytes.ok());
  uint64_t len = 0;
  std::memcpy(&len, bytes->data(), 8);
  EXPECT_EQ((8 + len) % 8, 0u);
}

TEST_F(SafetensorsTest, LargeRandomRoundTrip) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n;
  std::vector<float> v(1 << 16);
  for (auto& x : v) x = n(rng);
  const auto path = dir_ / "big.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"big", HostTensor::from_f32(v, {4, 128, 128})}}).ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->get("big")->to_f32(), v);
}

TEST_F(SafetensorsTest, FileShorterThanLengthFieldIsTruncated) {
  const auto p = dir_ / "tiny.safetensors";
  ASSERT_TRUE(write_file_atomic(p, "abc").ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f.status().message().find("tiny.safetensors"), std::string::npos);
  EXPECT_NE(f.status().message().find("truncated"), std::string::npos);
}

TEST_F(SafetensorsTest, TruncatedHeaderIsRejectedBeforeParsing) {
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  auto p = raw("trunc.safetensors", header.substr(0, 20), "");
  // Declared length is that of the full header; only 20 bytes follow.
  p = raw("trunc.safetensors", header.substr(0, 20), "", header.size());
  auto f = SafetensorsFile::open(p);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f.status().message().find("runs past the end of the file"), std::string::npos) << f.status().ToString();
}

TEST_F(SafetensorsTest, LyingHeaderLengthIsRejected) {
  auto p = raw("lying.safetensors", "{}", "", uint64_t{1} << 62);
  auto f = SafetensorsFile::open(p);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("header length 4611686018427387904"), std::string::npos)
      << f.status().ToString();
  EXPECT_NE(f.status().message().find("lying.safetensors"), std::string::npos);
}

TEST_F(SafetensorsTest, BadJsonIsRejected) {
  auto f = SafetensorsFile::open(raw("badjson.safetensors", R"({"x": {"dtype": )", ""));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f.status().message().find("not valid JSON"), std::string::npos);
  EXPECT_NE(f.status().message().find("badjson.safetensors"), std::string::npos);

  auto g = SafetensorsFile::open(raw("array.safetensors", "[1,2]", ""));
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("not a JSON object"), std::string::npos);
}

TEST_F(SafetensorsTest, OffsetsPastTheEndNameTheTensor) {
  auto f = SafetensorsFile::open(
      raw("past.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0')));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f.status().message().find("tensor 'w'"), std::string::npos);
  EXPECT_NE(f.status().message().find("past the end"), std::string::npos) << f.status().ToString();
}

TEST_F(SafetensorsTest, UnknownDtypeNamesTensorAndDtype) {
  auto f = SafetensorsFile::open(
      raw("dtype.safetensors", R"({"q":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "ab"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(f.status().message().find("tensor 'q'"), std::string::npos);
  EXPECT_NE(f.status().message().find("F8_E4M3"), std::string::npos);
}

TEST_F(SafetensorsTest, SizeMismatchIsRejected) {
  auto f = SafetensorsFile::open(
      raw("size.safetensors", R"({"w":{"dtype":"F16","shape":[3],"data_offsets":[0,4]}})", "abcd"));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kCorruption);
  EXPECT_NE(f.status().message().find("4 bytes for shape [3] F16 (expected 6)"), std::string::npos)
      << f.status().ToString();
}

TEST_F(SafetensorsTest, OverlappingTensorsAreRejected) {
  auto f = SafetensorsFile::open(raw("overlap.safetensors",
                                     R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                     std::string(12, '\0')));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("overlaps"), std::string::npos) << f.status().ToString();
}

TEST_F(SafetensorsTest, MalformedEntriesAreRejected) {
  const char* bad[] = {
      R"({"w":{"dtype":"F32","shape":[1]}})",                                   // no offsets
      R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})",             // negative dim
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",              // begin > end
      R"({"w":{"dtype":"F32","shape":"1","data_offsets":[0,4]}})",              // shape not array
      R"({"__metadata__":{"k":1}})",                                            // metadata not string
      R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})",                   // dtype not string
  };
  int i = 0;
  for (const char* h : bad) {
    auto f = SafetensorsFile::open(raw("bad" + std::to_string(i++) + ".safetensors", h, "abcd"));
    EXPECT_FALSE(f.ok()) << h;
    EXPECT_EQ(f.status().code(), StatusCode::kCorruption) << h << " " << f.status().ToString();
  }
}

TEST_F(SafetensorsTest, MissingFileAndMissingTensor) {
  auto f = SafetensorsFile::open(dir_ / "nope.safetensors");
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
  const auto path = dir_ / "one.safetensors";
  ASSERT_TRUE(write_safetensors(path, {{"x", HostTensor::from_f32({1}, {1})}}).ok());
  auto g = SafetensorsFile::open(path);
  ASSERT_TRUE(g.ok());
  auto t = (*g)->get("y");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("one.safetensors"), std::string::npos);
  EXPECT_NE(t.status().message().find("'y'"), std::string::npos);
}

TEST_F(SafetensorsTest, WriterRejectsDuplicatesAndBadSizes) {
  auto t = HostTensor::from_f32({1, 2}, {2});
  EXPECT_EQ(write_safetensors(dir_ / "d.safetensors", {{"x", t}, {"x", t}}).code(), StatusCode::kInvalidArgument);
  HostTensor lie = t;
  lie.shape = {3};
  EXPECT_EQ(write_safetensors(dir_ / "e.safetensors", {{"x", lie}}).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "e.safetensors"));
}

}  // namespace
}  // namespace hipq::engine
