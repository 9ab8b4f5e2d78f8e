#include "engine/models/weight_binder.h"

#include <gtest/gtest.h>

#include "engine/models/layers.h"
#include "naive_ops.h"

namespace hipq::engine {
namespace {

using namespace testing;  // NOLINT

TEST(WeightBinderTest, RecorderListsNamesShapesAndDefaultInit) {
  SpecRecorder rec;
  ASSERT_TRUE(Linear::bind(rec, "proj", 6, 4).ok());
  ASSERT_TRUE(Conv2d::bind(rec, "conv", 3, 5, 3, 1, 1).ok());
  ASSERT_TRUE(GroupNorm::bind(rec, "norm", 4, 2, 1e-5f).ok());
  const auto& s = rec.specs();
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s[0].name, "proj.weight");
  EXPECT_EQ(s[0].shape, (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(s[0].init.kind, ParamInit::Kind::kUniformFanIn);
  EXPECT_EQ(s[0].init.fan_in, 6);
  EXPECT_EQ(s[1].init.fan_in, 6);  // Linear bias: the same bound as the weight
  EXPECT_EQ(s[2].shape, (std::vector<int64_t>{5, 3, 3, 3}));
  EXPECT_EQ(s[2].init.fan_in, 27);
  EXPECT_EQ(s[4].init.kind, ParamInit::Kind::kOnes);
  EXPECT_EQ(s[5].init.kind, ParamInit::Kind::kZeros);
}

TEST(WeightBinderTest, MissingTensorNamesSourceAndTensor) {
  InMemoryWeightSource src("unet weights in x.safetensors");
  auto be = cpu_backend();
  WeightLoader loader(src, *be, kernels::DType::kF32);
  auto l = Linear::bind(loader, "proj", 6, 4);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kNotFound);
  EXPECT_NE(l.status().message().find("proj.weight"), std::string::npos) << l.status().ToString();
}

TEST(WeightBinderTest, WrongShapeNamesBothShapes) {
  InMemoryWeightSource src("test source");
  src.add("proj.weight", HostTensor::from_f32(Vec(12, 0.5f), {3, 4}));
  auto be = cpu_backend();
  WeightLoader loader(src, *be, kernels::DType::kF32);
  auto l = Linear::bind(loader, "proj", 6, 4, false);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("[3, 4]"), std::string::npos) << l.status().ToString();
  EXPECT_NE(l.status().message().find("[4, 6]"), std::string::npos);
  EXPECT_NE(l.status().message().find("test source"), std::string::npos);
}

TEST(WeightBinderTest, ConvertsToRequestedPrecisionAndReportsUnused) {
  InMemoryWeightSource src("test source");
  Vec w = {0.1f, -0.2f, 0.3f, 1.0f / 3.0f, 5.0f, -7.25f};
  src.add("proj.weight", HostTensor::from_f32(w, {2, 3}));
  src.add("extra.weight", HostTensor::from_f32(Vec(2, 1.0f), {2}));
  src.add("text_model.embeddings.position_ids", HostTensor::from_f32(Vec(2, 0.0f), {1, 2}));
  auto be = cpu_backend();
  for (auto dt : {kernels::DType::kF32, kernels::DType::kF16, kernels::DType::kBF16}) {
    WeightLoader loader(src, *be, dt);
    auto l = Linear::bind(loader, "proj", 3, 2, false);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->weight.dtype, dt);
    Vec got = download(*be, l->weight);
    const double tol = dt == kernels::DType::kF32 ? 0 : (dt == kernels::DType::kF16 ? 4e-3 : 3e-2);
    EXPECT_LE(max_abs_diff(got, w), tol * 8);
    EXPECT_EQ(loader.unused_names(), std::vector<std::string>{"extra.weight"});
  }
}

}  // namespace
}  // namespace hipq::engine
