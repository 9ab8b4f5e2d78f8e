#include "engine/models/weight_binder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

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

TEST(WeightBinderTest, GegluProjectionIsBoundWithItsHalvesInterleaved) {
  // Stored as diffusers writes it: rows 0..2 the value rows, 3..5 the gate rows.
  const int64_t in = 2, inner = 3;
  Vec w(2 * inner * in), bias(2 * inner);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = 100.0f + static_cast<float>(i);
  InMemoryWeightSource src("test source");
  src.add("ff.proj.weight", HostTensor::from_f32(w, {2 * inner, in}));
  src.add("ff.proj.bias", HostTensor::from_f32(bias, {2 * inner}));
  auto be = cpu_backend();
  for (auto dt : {kernels::DType::kF32, kernels::DType::kBF16}) {
    WeightLoader loader(src, *be, dt);
    auto g = Geglu::bind(loader, "ff", in, inner);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    // Device rows: value 0, gate 0, value 1, gate 1, value 2, gate 2.
    EXPECT_EQ(download(*be, g->weight), (Vec{0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}));
    EXPECT_EQ(download(*be, g->bias), (Vec{100, 103, 101, 104, 102, 105}));
    EXPECT_TRUE(loader.unused_names().empty());
  }
  // The recorder (synthetic weights, exports) keeps the stored names and shapes.
  SpecRecorder rec;
  ASSERT_TRUE(Geglu::bind(rec, "ff", in, inner).ok());
  ASSERT_EQ(rec.specs().size(), 2u);
  EXPECT_EQ(rec.specs()[0].name, "ff.proj.weight");
  EXPECT_EQ(rec.specs()[0].shape, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(rec.specs()[1].name, "ff.proj.bias");
}

double cos_of(const Vec& a, const Vec& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double{a[i]} * b[i], aa += double{a[i]} * a[i], bb += double{b[i]} * b[i];
  return ab / std::sqrt(aa * bb);
}

// The precision fp8: Linear and GEGLU weights kept as e4m3 codes + one scale
// a row (the 16-bit weight not kept); the forward quantizes its input rows.
TEST(WeightBinderTest, Fp8LinearsKeepCodesAndRowScalesAndStayCloseToBf16) {
  const int64_t in = 32, out = 3, inner = 2;
  Vec w(static_cast<size_t>(out * in)), gw(static_cast<size_t>(2 * inner * in)), x(static_cast<size_t>(2 * in));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(0.3f * static_cast<float>(i)) * (i < 32 ? 1.0f : 0.01f);
  for (size_t i = 0; i < gw.size(); ++i) gw[i] = std::cos(0.7f * static_cast<float>(i));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(1.1f * static_cast<float>(i));
  InMemoryWeightSource src("test source");
  src.add("l.weight", HostTensor::from_f32(w, {out, in}));
  src.add("l.bias", HostTensor::from_f32(Vec(out, 0.5f), {out}));
  src.add("ff.proj.weight", HostTensor::from_f32(gw, {2 * inner, in}));
  src.add("ff.proj.bias", HostTensor::from_f32(Vec(2 * inner, 0.25f), {2 * inner}));
  auto be = cpu_backend();
  WeightLoader plain(src, *be, kernels::DType::kBF16);
  WeightLoader fp8(src, *be, kernels::DType::kBF16, {}, Fp8Weights{true, Fp8Convs::kOff});
  auto l16 = Linear::bind(plain, "l", in, out);
  auto l8 = Linear::bind(fp8, "l", in, out);
  auto g16 = Geglu::bind(plain, "ff", in, inner);
  auto g8 = Geglu::bind(fp8, "ff", in, inner);
  ASSERT_TRUE(l16.ok() && l8.ok() && g16.ok() && g8.ok()) << l8.status().ToString() << g8.status().ToString();
  EXPECT_FALSE(l16->fp8.set());
  ASSERT_TRUE(l8->fp8.set());
  EXPECT_EQ(l8->fp8.rows.codes.dtype, kernels::DType::kU8);
  EXPECT_EQ(l8->fp8.rows.codes.shape_vec(), (std::vector<int64_t>{out, in}));
  // Row 0 spans +-1, rows 1 and 2 +-0.01: a scale per output channel.
  const Vec scales = download(*be, l8->fp8.rows.scales);
  EXPECT_GT(scales[0], 50 * scales[1]);
  // Codes + scales + biases instead of bf16 weights + biases.
  EXPECT_EQ(fp8.bytes_loaded(), (out * in + out * 4 + out * 2) + (2 * inner * in + 2 * inner * 4 + 2 * inner * 2));
  EXPECT_TRUE(fp8.unused_names().empty());
  DeviceTensor xt = upload(*be, x, {2, in}, kernels::DType::kBF16);
  auto y16 = (*l16)(*be, xt.t), y8 = (*l8)(*be, xt.t);
  auto z16 = (*g16)(*be, xt.t), z8 = (*g8)(*be, xt.t);
  ASSERT_TRUE(y16.ok() && y8.ok() && z16.ok() && z8.ok()) << y8.status().ToString() << z8.status().ToString();
  EXPECT_GT(cos_of(download(*be, y8->t), download(*be, y16->t)), 0.995);
  // GEGLU: 4 outputs, some of them gelu near its kink (0.9905 measured); a
  // layout or scale mistake gives no correlation at all.
  EXPECT_GT(cos_of(download(*be, z8->t), download(*be, z16->t)), 0.98);
  EXPECT_NE(download(*be, y8->t), download(*be, y16->t));
}

// fp8 convolutions: the weight kept as taps-last e4m3 codes padded to whole
// blocks of 128 channels + one scale an output channel, the 16-bit weight not
// kept; which convs take it is the loader's Fp8Convs rule.
TEST(WeightBinderTest, Fp8ConvsKeepPaddedTapsLastCodesAndStayCloseToBf16) {
  const int64_t c = 40, o = 24, hw = 6;
  Vec w(static_cast<size_t>(o * c * 9)), x(static_cast<size_t>(2 * c * hw * hw));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (float& v : w) v = 0.1f * u(rng);
  for (size_t i = 0; i < x.size(); ++i) x[i] = u(rng) * (i < x.size() / 2 ? 1.0f : 30.0f);  // image 1: 30x
  InMemoryWeightSource src("test source");
  src.add("c.weight", HostTensor::from_f32(w, {o, c, 3, 3}));
  src.add("c.bias", HostTensor::from_f32(Vec(o, 0.5f), {o}));
  src.add("s.weight", HostTensor::from_f32(Vec(o * c, 0.02f), {o, c, 1, 1}));
  src.add("s.bias", HostTensor::from_f32(Vec(o, 0.0f), {o}));
  auto be = cpu_backend();
  WeightLoader plain(src, *be, kernels::DType::kBF16);
  WeightLoader fp8(src, *be, kernels::DType::kBF16, {}, Fp8Weights{true, Fp8Convs::kAll});
  auto c16 = Conv2d::bind(plain, "c", c, o, 3, 1, 1, true, /*fp8_form=*/true);
  auto c8 = Conv2d::bind(fp8, "c", c, o, 3, 1, 1, true, /*fp8_form=*/true);
  ASSERT_TRUE(c16.ok() && c8.ok()) << c8.status().ToString();
  EXPECT_EQ(c16->fp8.codes.data, nullptr);
  ASSERT_NE(c8->fp8.codes.data, nullptr);
  EXPECT_EQ(c8->weight.data, nullptr) << "the 16-bit weight is not kept";
  EXPECT_EQ(c8->fp8.codes.shape_vec(), (std::vector<int64_t>{o, 3, 3, 128}));
  EXPECT_EQ(fp8.bytes_loaded(), o * 9 * 128 + o * 4 + o * 2);
  DeviceTensor xt = upload(*be, x, {2, c, hw, hw}, kernels::DType::kBF16);
  auto y16 = (*c16)(*be, xt.t), y8 = (*c8)(*be, xt.t);
  ASSERT_TRUE(y16.ok() && y8.ok()) << y8.status().ToString();
  const Vec a = download(*be, y8->t), b = download(*be, y16->t);
  EXPECT_GT(cos_of(a, b), 0.998);
  EXPECT_NE(a, b);
  // A stride-2 conv, and a layer not asked to, keep their 16-bit weight.
  auto strided = Conv2d::bind(fp8, "c", c, o, 3, 2, 1, true, /*fp8_form=*/true);
  auto unasked = Conv2d::bind(fp8, "c", c, o, 3, 1, 1);
  ASSERT_TRUE(strided.ok() && unasked.ok());
  EXPECT_EQ(strided->fp8.codes.data, nullptr);
  EXPECT_EQ(unasked->fp8.codes.data, nullptr);
  // kAligned: 3x3 over a multiple of 128 channels only; kOff: none.
  WeightLoader aligned(src, *be, kernels::DType::kBF16, {}, Fp8Weights{true, Fp8Convs::kAligned});
  auto a40 = Conv2d::bind(aligned, "c", c, o, 3, 1, 1, true, true);
  auto s1x1 = Conv2d::bind(aligned, "s", c, o, 1, 1, 0, true, true);
  ASSERT_TRUE(a40.ok() && s1x1.ok());
  EXPECT_EQ(a40->fp8.codes.data, nullptr) << "40 channels: a padded k-tile";
  EXPECT_EQ(s1x1->fp8.codes.data, nullptr) << "1x1";
  WeightLoader off(src, *be, kernels::DType::kBF16, {}, Fp8Weights{true, Fp8Convs::kOff});
  auto o40 = Conv2d::bind(off, "c", c, o, 3, 1, 1, true, true);
  ASSERT_TRUE(o40.ok());
  EXPECT_EQ(o40->fp8.codes.data, nullptr);
}

TEST(WeightBinderTest, GegluMatchesValueTimesGeluOfGateOverTheStoredHalves) {
  std::mt19937 rng(7);
  const int64_t rows = 5, in = 12, inner = 9;
  const Vec w = random_vec(rng, static_cast<size_t>(2 * inner * in), 0.3f);
  const Vec bias = random_vec(rng, static_cast<size_t>(2 * inner), 0.3f);
  const Vec x = random_vec(rng, static_cast<size_t>(rows * in));
  InMemoryWeightSource src("test source");
  src.add("ff.proj.weight", HostTensor::from_f32(w, {2 * inner, in}));
  src.add("ff.proj.bias", HostTensor::from_f32(bias, {2 * inner}));
  auto be = cpu_backend();
  WeightLoader loader(src, *be, kernels::DType::kF32);
  auto g = Geglu::bind(loader, "ff", in, inner);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  DeviceTensor xd = upload(*be, x, {rows, in});
  auto y = (*g)(*be, xd.t);
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->t.shape_vec(), (std::vector<int64_t>{rows, inner}));
  const Vec proj = linear(x, rows, in, w, 2 * inner, &bias);  // [rows, value | gate]
  Vec want(static_cast<size_t>(rows * inner));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < inner; ++j)
      want[r * inner + j] = proj[r * 2 * inner + j] * gelu(proj[r * 2 * inner + inner + j]);
  EXPECT_LE(max_abs_diff(download(*be, y->t), want), 1e-5);
}

TEST(WeightBinderTest, InterleavingAnOddFirstDimIsRefusedWithTheTensorsName) {
  InMemoryWeightSource src("test source");
  src.add("odd.weight", HostTensor::from_f32(Vec(6, 1.0f), {3, 2}));
  auto be = cpu_backend();
  WeightLoader loader(src, *be, kernels::DType::kF32);
  auto t = loader.bind("odd.weight", {3, 2}, ParamInit::zeros(), ParamLayout::kInterleavedHalves);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("odd.weight"), std::string::npos) << t.status().ToString();
}

TEST(WeightBinderTest, StackedLayersAreOneTensorOfTheirPartsInOrder) {
  // q, k and v stored apart, bound as one [3 * out, in] weight and [3 * out] bias.
  const int64_t in = 2, out = 2;
  InMemoryWeightSource src("test source");
  for (int part = 0; part < 3; ++part) {
    const std::string p = std::string("attn.to_") + "qkv"[part];
    Vec w(out * in), bias(out);
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(10 * part + i);
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(100 * part + i);
    src.add(p + ".weight", HostTensor::from_f32(w, {out, in}));
    src.add(p + ".bias", HostTensor::from_f32(bias, {out}));
  }
  auto be = cpu_backend();
  for (auto dt : {kernels::DType::kF32, kernels::DType::kBF16}) {
    WeightLoader loader(src, *be, dt);
    auto l = Linear::bind_stacked(loader, {"attn.to_q", "attn.to_k", "attn.to_v"}, in, out, true);
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    EXPECT_EQ(l->out, 3 * out);
    EXPECT_EQ(l->weight.shape_vec(), (std::vector<int64_t>{3 * out, in}));
    EXPECT_EQ(l->weight.dtype, dt);
    EXPECT_EQ(download(*be, l->weight), (Vec{0, 1, 2, 3, 10, 11, 12, 13, 20, 21, 22, 23}));
    EXPECT_EQ(download(*be, l->bias), (Vec{0, 1, 100, 101, 200, 201}));
    EXPECT_TRUE(loader.unused_names().empty());
    EXPECT_EQ(loader.bytes_loaded(), static_cast<int64_t>(3 * out * (in + 1) * kernels::dtype_size(dt)));
  }
  // The recorder (synthetic weights, exports) sees each part under its stored name.
  SpecRecorder rec;
  auto r = Linear::bind_stacked(rec, {"attn.to_q", "attn.to_k", "attn.to_v"}, in, out, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weight.shape_vec(), (std::vector<int64_t>{3 * out, in}));
  ASSERT_EQ(rec.specs().size(), 6u);
  EXPECT_EQ(rec.specs()[0].name, "attn.to_q.weight");
  EXPECT_EQ(rec.specs()[2].name, "attn.to_v.weight");
  EXPECT_EQ(rec.specs()[2].shape, (std::vector<int64_t>{out, in}));
  EXPECT_EQ(rec.specs()[3].name, "attn.to_q.bias");
  EXPECT_EQ(rec.specs()[3].init.fan_in, in);
}

TEST(WeightBinderTest, StackedPartOfAnotherShapeIsNamedAndNothingIsBound) {
  InMemoryWeightSource src("test source");
  src.add("a.weight", HostTensor::from_f32(Vec(4, 1.0f), {2, 2}));
  src.add("b.weight", HostTensor::from_f32(Vec(6, 1.0f), {3, 2}));
  auto be = cpu_backend();
  WeightLoader loader(src, *be, kernels::DType::kF32);
  auto l = Linear::bind_stacked(loader, {"a", "b"}, 2, 2, false);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(l.status().message().find("'b.weight' has shape [3, 2]"), std::string::npos) << l.status().ToString();
  EXPECT_EQ(loader.bytes_loaded(), 0);
  EXPECT_EQ(loader.unused_names().size(), 2u);  // neither part was taken
  auto missing = Linear::bind_stacked(loader, {"a", "c"}, 2, 2, false);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("c.weight"), std::string::npos) << missing.status().ToString();
}

}  // namespace
}  // namespace hipq::engine
