#include <cmath>
#include <cstring>

#include "cpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/fp8_conv_weight.h"
#include "kernels/fp8_e4m3.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::Owned;
using testing::zeros;

// The fp8 form of a conv weight w [O, C, kh, kw], made as the engine makes it.
struct Fp8Weight {
  Owned codes, scales;
  Fp8ConvWeight view() const { return {codes.t, scales.t}; }
};

Fp8Weight fp8_weight(const Owned& w) {
  const int64_t O = w.t.shape[0], C = w.t.shape[1], KH = w.t.shape[2], KW = w.t.shape[3];
  Fp8Weight f{zeros({O, KH, KW, fp8_conv_channels(C)}, DType::kU8), zeros({O})};
  auto be = testing::cpu();
  const Status s = make_fp8_conv_weight(*be, w.t, f.view());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return f;
}

// Values whose products and short sums are exact in fp32 and f16: multiples
// of 1/4 up to 3.5 for x, of 1/4 up to 0.875 for w. Each of them times a
// power of two is an e4m3 value, and the largest magnitudes (3.5 = 7 / 2,
// 0.875 = 7 / 8) make 448 / amax a power of two: the codes hold the values
// exactly and the dequantization scales are exact too.
std::vector<float> exact_values(int64_t n, const std::vector<float>& set) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = set[static_cast<size_t>(i * 5) % set.size()];
  return v;
}

std::vector<float> wavy(int64_t n, float freq, float amplitude) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = amplitude * std::sin(freq * static_cast<float>(i) + 0.3f);
  return v;
}

TEST(CpuConv2dFp8, ExactValuesGiveTheConvolutionByHand) {
  // x channels [7, 1] and [-2, 0.5]: amax 7, s = 64, codes 448, 64, -128, 32.
  // w rows [0.875, 0.25] (s = 512) and [-0.4375, 0.125] (s = 1024).
  // y[0] = 0.875 x0 + 0.25 x1 + 0.25 = [5.875, 1.25]; y[1] = -0.4375 x0 + 0.125 x1 - 1 = [-4.3125, -1.375].
  auto x = make({1, 2, 1, 2}, {7, 1, -2, 0.5f}, DType::kBF16);
  auto w = make({2, 2, 1, 1}, {0.875f, 0.25f, -0.4375f, 0.125f}, DType::kBF16);
  auto bias = make({2}, {0.25f, -1}, DType::kBF16);
  auto y = zeros({1, 2, 1, 2}, DType::kBF16);
  Fp8Weight fw = fp8_weight(w);
  EXPECT_EQ(fw.scales.values(), (std::vector<float>{1.0f / 512, 1.0f / 1024}));
  Conv2dOptions o;
  o.bias = &bias.t;
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{5.875f, 1.25f, -4.3125f, -1.375f}), 0);
}

TEST(CpuConv2dFp8, ExactValuesThroughEveryTapAndThePadding) {
  // 3x3, padding 1, C = 3 (padded to 128 in the weight's layout), on exact
  // values: every output is the plain sum, checked against a direct loop.
  const int64_t N = 2, C = 3, H = 4, W = 5, O = 2;
  const std::vector<float> xs = {3.5f, -1, 0.25f, 2, -0.75f, 0, 1.5f, -3.5f, 0.5f, -2, 3, -0.25f, 1};
  const std::vector<float> ws = {0.875f, -0.5f, 0.25f, 0, -0.875f, 0.5f, -0.25f};
  const std::vector<float> xv = exact_values(N * C * H * W, xs), wv = exact_values(O * C * 9, ws);
  const std::vector<float> bv = {0.5f, -1.25f};
  auto x = make({N, C, H, W}, xv, DType::kF16);
  auto w = make({O, C, 3, 3}, wv, DType::kF16);
  auto bias = make({O}, bv, DType::kF16);
  auto y = zeros({N, O, H, W}, DType::kF16);
  Fp8Weight fw = fp8_weight(w);
  Conv2dOptions o;
  o.padding = 1;
  o.bias = &bias.t;
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
  std::vector<float> want;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc)
      for (int64_t oy = 0; oy < H; ++oy)
        for (int64_t ox = 0; ox < W; ++ox) {
          double s = bv[static_cast<size_t>(oc)];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy + ky - 1, ix = ox + kx - 1;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                s += static_cast<double>(xv[static_cast<size_t>(((n * C + c) * H + iy) * W + ix)]) *
                     wv[static_cast<size_t>(((oc * C + c) * 3 + ky) * 3 + kx)];
              }
          want.push_back(static_cast<float>(s));
        }
  EXPECT_VALUES_NEAR(y.values(), want, 0);
}

TEST(CpuConv2dFp8, ZeroInputGivesTheBiasAndTheResidual) {
  // amax 0: the floor 1e-12 makes s finite, every code 0, the sum 0.
  auto x = zeros({2, 40, 3, 5}, DType::kBF16);
  auto w = make({6, 40, 3, 3}, wavy(6 * 40 * 9, 0.37f, 0.2f), DType::kBF16);
  auto bias = make({6}, {0.5f, -1.25f, 3, 0.125f, -7, 2}, DType::kBF16);
  auto y = zeros({2, 6, 3, 5}, DType::kBF16);
  Fp8Weight fw = fp8_weight(w);
  Conv2dOptions o;
  o.padding = 1;
  o.bias = &bias.t;
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
  std::vector<float> want;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t oc = 0; oc < 6; ++oc)
      for (int p = 0; p < 15; ++p) want.push_back(bias.values()[static_cast<size_t>(oc)]);
  EXPECT_VALUES_NEAR(y.values(), want, 0);
  // With a residual: bias + residual, rounded once to bf16.
  auto res = make({2, 6, 3, 5}, wavy(2 * 6 * 15, 0.71f, 3.0f), DType::kBF16);
  o.residual = &res.t;
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
  std::vector<float> sums(want.size());
  for (size_t i = 0; i < sums.size(); ++i) sums[i] = want[i] + res.values()[i];
  EXPECT_VALUES_NEAR(y.values(), make({2, 6, 3, 5}, sums, DType::kBF16).values(), 0);
}

TEST(CpuConv2dFp8, AnImageGivesTheSameBytesWhateverElseIsInTheBatch) {
  // Each image has its own scale: an image 50x larger beside it, before or
  // after it, changes none of its output bytes.
  const int64_t C = 40, H = 7, W = 9, O = 12, per = C * H * W;
  const std::vector<float> mine = wavy(per, 0.37f, 2.0f), other = wavy(per, 0.113f, 100.0f);
  auto w = make({O, C, 3, 3}, wavy(O * C * 9, 0.91f, 0.25f), DType::kBF16);
  auto bias = make({O}, wavy(O, 1.3f, 1.0f), DType::kBF16);
  Fp8Weight fw = fp8_weight(w);
  Conv2dOptions o;
  o.padding = 1;
  o.bias = &bias.t;
  auto run = [&](const std::vector<std::vector<float>>& images) {
    std::vector<float> xv;
    for (const auto& im : images) xv.insert(xv.end(), im.begin(), im.end());
    const int64_t N = static_cast<int64_t>(images.size());
    auto x = make({N, C, H, W}, xv, DType::kBF16);
    auto y = zeros({N, O, H, W}, DType::kBF16);
    EXPECT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
    return y.bytes;
  };
  const std::vector<uint8_t> alone = run({mine});
  const size_t each = alone.size();
  const std::vector<uint8_t> first = run({mine, other}), last = run({other, mine});
  ASSERT_EQ(first.size(), 2 * each);
  EXPECT_EQ(std::memcmp(first.data(), alone.data(), each), 0) << "image 0 of 2 differs from it alone";
  EXPECT_EQ(std::memcmp(last.data() + each, alone.data(), each), 0) << "image 1 of 2 differs from it alone";
}

TEST(CpuConv2dFp8, QuantizedConvIsCloseToThePlainOne) {
  // e4m3 keeps 2^-4 relative an element at worst; a wrong scale or tap order
  // would give an error of the output's own size.
  const int64_t N = 2, C = 64, H = 6, W = 8, O = 16;
  auto x = make({N, C, H, W}, wavy(N * C * H * W, 0.37f, 2.0f), DType::kBF16);
  auto w = make({O, C, 3, 3}, wavy(O * C * 9, 0.0913f, 0.25f), DType::kBF16);
  Fp8Weight fw = fp8_weight(w);
  auto y = zeros({N, O, H, W}, DType::kBF16), ref = zeros({N, O, H, W});
  auto xf = make({N, C, H, W}, x.values()), wf = make({O, C, 3, 3}, w.values());
  Conv2dOptions o;
  o.padding = 1;
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
  ASSERT_TRUE(cpu::conv2d(xf.t, wf.t, ref.t, o).ok());
  double num = 0, den = 0;
  const std::vector<float> got = y.values(), want = ref.values();
  for (size_t i = 0; i < got.size(); ++i) {
    num += std::pow(got[i] - want[i], 2);
    den += std::pow(want[i], 2);
  }
  EXPECT_LT(num / den, 1e-2);
  EXPECT_GT(num, 0.0);  // it did quantize
}

TEST(CpuConv2dFp8, UpsampledInputIsBitwiseTheConvOfTheUpsampledTensor) {
  // An image and its nearest 2x upsample hold the same values: the same
  // amax, scale and codes, so the same sums.
  const int64_t N = 2, C = 40, H = 5, W = 7, O = 6;
  auto x = make({N, C, H, W}, wavy(N * C * H * W, 0.37f, 1.7f), DType::kF16);
  auto w = make({O, C, 3, 3}, wavy(O * C * 9, 0.91f, 0.25f), DType::kF16);
  auto bias = make({O}, {0.1f, -0.2f, 0.3f}, DType::kF16);
  auto res = make({N, O, 2 * H, 2 * W}, {0.25f, -1.5f, 3.0f}, DType::kF16);
  auto xu = zeros({N, C, 2 * H, 2 * W}, DType::kF16);
  ASSERT_TRUE(cpu::upsample_nearest2x(x.t, xu.t).ok());
  Fp8Weight fw = fp8_weight(w);
  Conv2dOptions o;
  o.padding = 1;
  o.bias = &bias.t;
  o.residual = &res.t;
  auto want = zeros({N, O, 2 * H, 2 * W}, DType::kF16);
  ASSERT_TRUE(cpu::conv2d_fp8(xu.t, fw.view(), want.t, o).ok());
  o.upsample_x2 = true;
  auto got = zeros({N, O, 2 * H, 2 * W}, DType::kF16);
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), got.t, o).ok());
  EXPECT_EQ(got.bytes, want.bytes);
  // The output is the upsampled input's: the half size is refused.
  auto half = zeros({N, O, H, W}, DType::kF16);
  o.residual = nullptr;
  EXPECT_EQ(cpu::conv2d_fp8(x.t, fw.view(), half.t, o).code(), StatusCode::kInvalidArgument);
}

TEST(CpuConv2dFp8, WeightIsQuantizedPerOutputChannelWithZeroPadding) {
  // codes [O, kh, kw, 128]: each tap's 5 channels, then zero codes; one scale
  // an output channel, over its 5 * 9 values.
  const int64_t O = 3, C = 5;
  const std::vector<float> wv = wavy(O * C * 9, 0.53f, 0.3f);
  auto w = make({O, C, 3, 3}, wv, DType::kBF16);
  Fp8Weight fw = fp8_weight(w);
  const std::vector<float> wb = w.values();
  for (int64_t oc = 0; oc < O; ++oc) {
    float amax = 0;
    for (int64_t i = 0; i < C * 9; ++i)
      amax = std::fmax(amax, std::fabs(wb[static_cast<size_t>(oc * C * 9 + i)]));
    const float s = fp8::row_scale(amax);
    EXPECT_EQ(fw.scales.values()[static_cast<size_t>(oc)], fp8::dequant_scale(s)) << "channel " << oc;
    for (int64_t t = 0; t < 9; ++t)
      for (int64_t c = 0; c < 128; ++c) {
        const uint8_t got = fw.codes.bytes[static_cast<size_t>((oc * 9 + t) * 128 + c)];
        const uint8_t want = c < C ? fp8::quantize(wb[static_cast<size_t>((oc * C + c) * 9 + t)], s) : 0;
        ASSERT_EQ(got, want) << "channel " << oc << " tap " << t << " input channel " << c;
      }
  }
  // Codes not padded to the 128-channel block are refused, naming them.
  auto be = testing::cpu();
  auto short_codes = zeros({O, 3, 3, C}, DType::kU8);
  const Status s = make_fp8_conv_weight(*be, w.t, {short_codes.t, fw.scales.t});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("codes"), std::string::npos) << s.message();
}

TEST(CpuConv2dFp8, RefusesBadArgumentsNamingTheOperand) {
  const int64_t N = 1, C = 40, H = 5, W = 7, O = 4;
  auto x = make({N, C, H, W}, {1, -0.5f}, DType::kBF16);
  auto w = make({O, C, 3, 3}, {0.25f, -0.125f}, DType::kBF16);
  Fp8Weight fw = fp8_weight(w);
  auto y = zeros({N, O, H, W}, DType::kBF16);
  Conv2dOptions o;
  o.padding = 1;
  ASSERT_TRUE(cpu::conv2d_fp8(x.t, fw.view(), y.t, o).ok());
  auto expect_refusal = [&](const Tensor& xx, const Fp8ConvWeight& ww, Tensor& yy, const Conv2dOptions& oo,
                            const std::string& names) {
    const Status s = cpu::conv2d_fp8(xx, ww, yy, oo);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << names;
    EXPECT_NE(s.message().find("conv2d_fp8: " + names), std::string::npos) << s.message();
  };
  // The weight's channels not padded to the 128-channel block, or not u8.
  auto unpadded = zeros({O, 3, 3, C}, DType::kU8);
  expect_refusal(x.t, {unpadded.t, fw.scales.t}, y.t, o, "w.codes");
  auto f32_codes = zeros({O, 3, 3, 128});
  expect_refusal(x.t, {f32_codes.t, fw.scales.t}, y.t, o, "w.codes");
  auto short_scales = zeros({O - 1});
  expect_refusal(x.t, {fw.codes.t, short_scales.t}, y.t, o, "w.scales");
  // Stride 2 runs as conv2d; a negative padding is no conv.
  Conv2dOptions strided = o;
  strided.stride = 2;
  auto y_s2 = zeros({N, O, 3, 4}, DType::kBF16);
  expect_refusal(x.t, fw.view(), y_s2.t, strided, "stride 2");
  Conv2dOptions negative = o;
  negative.padding = -1;
  expect_refusal(x.t, fw.view(), y.t, negative, "stride 1, padding -1");
  // y: the shape of padding 0, or another dtype; the message says the shape it needs.
  auto y_unpadded = zeros({N, O, H - 2, W - 2}, DType::kBF16);
  expect_refusal(x.t, fw.view(), y_unpadded.t, o, "y [1, 4, 3, 5]");
  {
    const Status s = cpu::conv2d_fp8(x.t, fw.view(), y_unpadded.t, o);
    EXPECT_NE(s.message().find("must be [1, 4, 5, 7]"), std::string::npos) << s.message();
  }
  auto y_f16 = zeros({N, O, H, W}, DType::kF16);
  expect_refusal(x.t, fw.view(), y_f16.t, o, "y");
  // bias and residual in y's dtype and shape.
  auto f32_bias = make({O}, {1});
  Conv2dOptions with_bias = o;
  with_bias.bias = &f32_bias.t;
  expect_refusal(x.t, fw.view(), y.t, with_bias, "bias [4] f32");
  auto short_res = zeros({N, O, H, W - 1}, DType::kBF16);
  Conv2dOptions with_res = o;
  with_res.residual = &short_res.t;
  expect_refusal(x.t, fw.view(), y.t, with_res, "residual");
  // x must be 16-bit: an f32 x is refused (the fp8 convs run in bf16 or f16).
  auto x_f32 = make({N, C, H, W}, {1});
  auto y_f32 = zeros({N, O, H, W});
  expect_refusal(x_f32.t, fw.view(), y_f32.t, o, "x [1, 40, 5, 7] f32");
}

}  // namespace
}  // namespace hipq::kernels
