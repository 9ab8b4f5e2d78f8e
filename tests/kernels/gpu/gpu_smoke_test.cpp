// GPU smoke test: the hip backend's tiled GEMM (with bias and a batch), fp32
// matmul and conv in both HIPQ_FP32_MATH modes, large uploads, a conv from
// constant weights (their kept form, and its end with the block), and a
// block reduction (group_norm's statistics and parity_sums) against plain
// CPU loops written here, so the test depends on nothing but the hip
// backend. Skips with "no device" when no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "kernels/backend.h"

namespace hipq::kernels {
namespace {

class GpuSmoke : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_device_count() == 0) GTEST_SKIP() << "no device: hip backend not available on this machine";
    auto b = make_backend("hip", 0);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
    const BackendInfo& i = backend_->info();
    std::printf("device: %s (%s), %d SMs/CUs, warp %d, %.1f GiB, %s, %s, fp32 products: %s, f16 products: %s\n",
                i.device_name.c_str(), i.arch.c_str(), i.multiprocessors, i.warp_size, i.memory_bytes / 1073741824.0,
                i.runtime_version.c_str(), i.driver_version.c_str(), i.fp32_products.c_str(),
                i.f16_products.c_str());
  }

  Buffer upload(const std::vector<float>& v) {
    auto buf = backend_->allocate(v.size() * sizeof(float));
    EXPECT_TRUE(buf.ok());
    EXPECT_TRUE(backend_->copy_to_device(v.data(), buf->data(), v.size() * sizeof(float)).ok());
    return std::move(buf).value();
  }

  std::vector<float> download(const Buffer& b, size_t n) {
    std::vector<float> v(n);
    EXPECT_TRUE(backend_->copy_to_host(b.data(), v.data(), n * sizeof(float)).ok());
    return v;
  }

  std::unique_ptr<Backend> backend_;
};

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST_F(GpuSmoke, TiledGemmWithBiasAndBatchMatchesCpu) {
  // Odd sizes: not multiples of any tile.
  const int B = 3, M = 157, K = 203, N = 131;
  auto a = random_vector(static_cast<size_t>(B) * M * K, 1);
  auto w = random_vector(static_cast<size_t>(N) * K, 2);  // Linear weight [N, K]
  auto bias = random_vector(N, 3);
  Buffer da = upload(a), dw = upload(w), dbias = upload(bias);
  auto dout = backend_->allocate(static_cast<size_t>(B) * M * N * sizeof(float));
  ASSERT_TRUE(dout.ok());
  Tensor ta = da.tensor(DType::kF32, {B, M, K});
  Tensor tw = dw.tensor(DType::kF32, {N, K});
  Tensor tb = dbias.tensor(DType::kF32, {N});
  Tensor to = dout->tensor(DType::kF32, {B, M, N});
  MatmulOptions o;
  o.trans_b = true;
  o.bias = &tb;
  ASSERT_TRUE(backend_->matmul(ta, tw, to, o).ok());
  auto got = download(*dout, static_cast<size_t>(B) * M * N);
  double max_err = 0;
  for (int b = 0; b < B; ++b)
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        double ref = bias[n];
        for (int k = 0; k < K; ++k)
          ref += static_cast<double>(a[(static_cast<size_t>(b) * M + m) * K + k]) * w[static_cast<size_t>(n) * K + k];
        max_err = std::max(max_err, std::fabs(ref - got[(static_cast<size_t>(b) * M + m) * N + n]));
      }
  std::printf("gemm %dx%dx%dx%d max abs err %.3g\n", B, M, N, K, max_err);
  EXPECT_LT(max_err, 1e-3);
}

// HIPQ_FP32_MATH sets a backend's fp32 products when it is made (read once),
// so one process holds a backend of each mode. Both keep fp32's accuracy on
// a K of 4096, where tf32 products alone would be ~2e-4 off (relative).
class ScopedFp32Math {
 public:
  explicit ScopedFp32Math(const char* value) {
    const char* old = std::getenv("HIPQ_FP32_MATH");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("HIPQ_FP32_MATH", value, 1);
  }
  ~ScopedFp32Math() {
    if (had_)
      ::setenv("HIPQ_FP32_MATH", old_.c_str(), 1);
    else
      ::unsetenv("HIPQ_FP32_MATH");
  }

 private:
  bool had_ = false;
  std::string old_;
};

double relative_l2(const std::vector<float>& got, const std::vector<double>& ref) {
  double e = 0, r = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e += (got[i] - ref[i]) * (got[i] - ref[i]);
    r += ref[i] * ref[i];
  }
  return std::sqrt(e / r);
}

TEST_F(GpuSmoke, Fp32MatmulAndConvKeepFp32AccuracyInBothFp32MathModes) {
  const int M = 130, N = 136, K = 4096;  // tails of the 128 x 128 x 32 tile
  auto a = random_vector(static_cast<size_t>(M) * K, 5);
  auto w = random_vector(static_cast<size_t>(N) * K, 6);
  std::vector<double> mm_ref(static_cast<size_t>(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double acc = 0;
      for (int k = 0; k < K; ++k)
        acc += static_cast<double>(a[static_cast<size_t>(m) * K + k]) * w[static_cast<size_t>(n) * K + k];
      mm_ref[static_cast<size_t>(m) * N + n] = acc;
    }
  // 3x3 conv, pad 1: C = 68 (weights plain, K = 612), pixel and channel tails.
  const int C = 68, H = 21, W = 19, O = 40;
  auto x = random_vector(static_cast<size_t>(C) * H * W, 7);
  auto cw = random_vector(static_cast<size_t>(O) * C * 9, 8);
  std::vector<double> conv_ref(static_cast<size_t>(O) * H * W);
  for (int o = 0; o < O; ++o)
    for (int y = 0; y < H; ++y)
      for (int xx = 0; xx < W; ++xx) {
        double acc = 0;
        for (int c = 0; c < C; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int hi = y + ky - 1, wi = xx + kx - 1;
              if (hi < 0 || hi >= H || wi < 0 || wi >= W) continue;
              acc += static_cast<double>(cw[((static_cast<size_t>(o) * C + c) * 3 + ky) * 3 + kx]) *
                     x[(static_cast<size_t>(c) * H + hi) * W + wi];
            }
        conv_ref[(static_cast<size_t>(o) * H + y) * W + xx] = acc;
      }

  for (const char* mode : {"3xtf32", "fma"}) {
    ScopedFp32Math env(mode);
    auto made = make_backend("hip", 0);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    Backend& be = **made;
    auto put = [&](const std::vector<float>& v) {
      auto buf = be.allocate(v.size() * sizeof(float));
      EXPECT_TRUE(buf.ok());
      EXPECT_TRUE(be.copy_to_device(v.data(), buf->data(), v.size() * sizeof(float)).ok());
      return std::move(buf).value();
    };
    auto get = [&](const Buffer& b, size_t n) {
      std::vector<float> v(n);
      EXPECT_TRUE(be.copy_to_host(b.data(), v.data(), n * sizeof(float)).ok());
      return v;
    };
    Buffer da = put(a), dw = put(w), dx = put(x), dcw = put(cw);
    auto dmm = be.allocate(mm_ref.size() * sizeof(float));
    auto dconv = be.allocate(conv_ref.size() * sizeof(float));
    ASSERT_TRUE(dmm.ok() && dconv.ok());
    Tensor tmm = dmm->tensor(DType::kF32, {M, N});
    MatmulOptions mo;
    mo.trans_b = true;
    ASSERT_TRUE(be.matmul(da.tensor(DType::kF32, {M, K}), dw.tensor(DType::kF32, {N, K}), tmm, mo).ok());
    Tensor tconv = dconv->tensor(DType::kF32, {1, O, H, W});
    Conv2dOptions co;
    co.padding = 1;
    ASSERT_TRUE(
        be.conv2d(dx.tensor(DType::kF32, {1, C, H, W}), dcw.tensor(DType::kF32, {O, C, 3, 3}), tconv, co).ok());
    const double mm_err = relative_l2(get(*dmm, mm_ref.size()), mm_ref);
    const double conv_err = relative_l2(get(*dconv, conv_ref.size()), conv_ref);
    std::printf("HIPQ_FP32_MATH=%s (%s): matmul %dx%dx%d relative error %.3g, conv 3x3 C=%d %.3g\n", mode,
                be.info().fp32_products.c_str(), M, N, K, mm_err, C, conv_err);
    if (std::string(mode) == "fma") {
      EXPECT_EQ(be.info().fp32_products, "fp32 FMA");
    }
    // Both keep fp32's accuracy (H200, 2026-12-02: 3xTF32 matmul 4.1e-7, conv 1.7e-7;
    // FMA 1.1e-6 and 4.3e-7; before 3xTF32 summed each k step in a partial of its
    // own, its matmul was 2.9e-5 off: gemm_3xtf32.h).
    const double bound = 5e-6;
    EXPECT_LT(mm_err, bound);
    EXPECT_LT(conv_err, bound);
  }
}

TEST_F(GpuSmoke, AnUnknownFp32MathModeFailsBackendCreationWithTheChoices) {
  ScopedFp32Math env("tf32");
  auto made = make_backend("hip", 0);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(made.status().message().find("HIPQ_FP32_MATH=tf32"), std::string::npos) << made.status().ToString();
}

TEST_F(GpuSmoke, BlockReductionsMatchCpu) {
  // group_norm reduces each group with block reductions; parity_sums with
  // an fp64 two-level reduction.
  const int N = 2, C = 64, HW = 37 * 29, G = 32;
  auto x = random_vector(static_cast<size_t>(N) * C * HW, 4);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 3.0f + 2.0f * x[i];  // non-zero mean
  std::vector<float> gamma(C, 1.0f), beta(C, 0.0f);
  Buffer dx = upload(x), dg = upload(gamma), db = upload(beta);
  auto dy = backend_->allocate(x.size() * sizeof(float));
  ASSERT_TRUE(dy.ok());
  Tensor tx = dx.tensor(DType::kF32, {N, C, 37, 29});
  Tensor ty = dy->tensor(DType::kF32, {N, C, 37, 29});
  GroupNormOptions o;
  o.groups = G;
  ASSERT_TRUE(backend_->group_norm(tx, dg.tensor(DType::kF32, {C}), db.tensor(DType::kF32, {C}), ty, o).ok());
  auto got = download(*dy, x.size());
  const int64_t len = static_cast<int64_t>(C / G) * HW;
  double max_err = 0;
  for (int g = 0; g < N * G; ++g) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < len; ++i) mean += x[g * len + i];
    mean /= len;
    for (int64_t i = 0; i < len; ++i) var += (x[g * len + i] - mean) * (x[g * len + i] - mean);
    var /= len;
    for (int64_t i = 0; i < len; ++i)
      max_err = std::max(max_err, std::fabs((x[g * len + i] - mean) / std::sqrt(var + 1e-5) - got[g * len + i]));
  }
  std::printf("group_norm max abs err %.3g\n", max_err);
  EXPECT_LT(max_err, 1e-4);

  auto sums = backend_->parity_sums(tx, ty);
  ASSERT_TRUE(sums.ok()) << sums.status().ToString();
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    dot += static_cast<double>(x[i]) * got[i];
    na += static_cast<double>(x[i]) * x[i];
    nb += static_cast<double>(got[i]) * got[i];
  }
  std::printf("parity_sums dot %.9g (cpu %.9g)\n", sums->dot, dot);
  EXPECT_NEAR(sums->dot, dot, 1e-9 * std::fabs(na + nb));
  EXPECT_NEAR(sums->norm_a2, na, 1e-9 * na);
  EXPECT_NEAR(sums->norm_b2, nb, 1e-9 * nb);
  EXPECT_EQ(sums->count, static_cast<int64_t>(x.size()));
  EXPECT_EQ(sums->nonfinite_a, 0);
}

TEST_F(GpuSmoke, PoolReusesFreedBlocks) {
  void* first = nullptr;
  {
    auto b = backend_->allocate(1 << 20);
    ASSERT_TRUE(b.ok());
    first = b->data();
  }
  auto again = backend_->allocate(1 << 20);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->data(), first);
  EXPECT_GE(backend_->peak_bytes(), 1 << 20);
}

// Large uploads go through the backend's two pinned buffers in 32 MiB chunks
// (hip_backend.hip): an upload of several chunks and a ragged tail, one that
// starts where the previous one left the buffers in flight, and the source
// overwritten right after each call (the call must have consumed it) all
// arrive intact.
TEST_F(GpuSmoke, LargeUploadsThroughPinnedBuffersArriveIntact) {
  const size_t words = (size_t{100} << 20) / 4 + 12345;  // 3 chunks and a piece, not a multiple of a MiB
  std::vector<uint32_t> a(words), b(words);
  for (size_t i = 0; i < words; ++i) a[i] = static_cast<uint32_t>(i * 2654435761u), b[i] = ~a[i];
  auto da = backend_->allocate(words * 4), db = backend_->allocate(words * 4);
  ASSERT_TRUE(da.ok() && db.ok());
  ASSERT_TRUE(backend_->copy_to_device(a.data(), da->data(), words * 4).ok());
  std::vector<uint32_t> a_copy = a;
  std::fill(a.begin(), a.end(), 0u);  // the upload has read its source by the time it returns
  ASSERT_TRUE(backend_->copy_to_device(b.data(), db->data(), words * 4).ok());
  std::vector<uint32_t> back(words);
  ASSERT_TRUE(backend_->copy_to_host(da->data(), back.data(), words * 4).ok());
  EXPECT_TRUE(back == a_copy);
  ASSERT_TRUE(backend_->copy_to_host(db->data(), back.data(), words * 4).ok());
  EXPECT_TRUE(back == b);
}

// Constant conv weights (Backend::hold_constant): the f16 conv keeps their
// rearranged form after the first call. Results from a held block equal
// those from the same weights not held, on the first call and from the kept
// form; once the held block is released, a new block at the same address
// holding other weights is not served the old form.
TEST_F(GpuSmoke, ConvWithConstantWeightsMatchesAndForgetsReleasedBlocks) {
  const int64_t N = 2, C = 64, H = 16, W = 16, O = 64;
  const std::vector<int64_t> xs{N, C, H, W}, ws{O, C, 3, 3}, ys{N, O, H, W};
  auto f16 = [&](const std::vector<float>& v, const std::vector<int64_t>& shape) {
    Buffer f = upload(v);
    auto h = backend_->allocate(v.size() * 2);
    EXPECT_TRUE(h.ok());
    Tensor dst = h->tensor(DType::kF16, shape);
    EXPECT_TRUE(backend_->copy(f.tensor(DType::kF32, shape), dst).ok());
    return std::move(h).value();
  };
  Buffer x = f16(random_vector(static_cast<size_t>(N * C * H * W), 1), xs);
  auto conv = [&](const Buffer& w) {
    auto y = backend_->allocate(static_cast<size_t>(N * O * H * W) * 2);
    auto y32 = backend_->allocate(static_cast<size_t>(N * O * H * W) * 4);
    EXPECT_TRUE(y.ok() && y32.ok());
    Tensor yt = y->tensor(DType::kF16, ys), y32t = y32->tensor(DType::kF32, ys);
    Conv2dOptions o;
    o.padding = 1;
    EXPECT_TRUE(backend_->conv2d(x.tensor(DType::kF16, xs), w.tensor(DType::kF16, ws), yt, o).ok());
    EXPECT_TRUE(backend_->copy(yt, y32t).ok());
    return download(*y32, static_cast<size_t>(N * O * H * W));
  };
  const std::vector<float> w1 = random_vector(static_cast<size_t>(O * C * 9), 2);
  const std::vector<float> w2 = random_vector(static_cast<size_t>(O * C * 9), 3);
  const std::vector<float> plain1 = conv(f16(w1, ws));
  const std::vector<float> plain2 = conv(f16(w2, ws));
  ASSERT_NE(plain1, plain2);

  Buffer held = f16(w1, ws);
  backend_->hold_constant(held.data(), held.bytes());
  EXPECT_EQ(conv(held), plain1);  // derives and keeps the form
  EXPECT_EQ(conv(held), plain1);  // from the kept form
  const void* at = held.data();
  const size_t bytes = held.bytes();
  held = Buffer();  // its kept form (same size) goes back to the pool with it
  std::vector<Buffer> others;
  Buffer again;
  for (int i = 0; i < 4 && again.data() != at; ++i) {
    auto b = backend_->allocate(bytes);
    ASSERT_TRUE(b.ok());
    if (b->data() == at) again = std::move(b).value();
    else others.push_back(std::move(b).value());
  }
  ASSERT_EQ(again.data(), at) << "the pool did not hand the released block out again; the test needs it to";
  Tensor again_w = again.tensor(DType::kF16, ws);
  ASSERT_TRUE(backend_->copy(f16(w2, ws).tensor(DType::kF16, ws), again_w).ok());
  backend_->hold_constant(again.data(), again.bytes());
  EXPECT_EQ(conv(again), plain2);
}

// A worker makes its backend on the main thread and runs jobs on another; with
// several GPUs, device K's backend must work from any thread (HIP's current
// device is per thread). Every visible device, each made on this thread and
// used from a new one, interleaved with device 0 on this thread.
TEST(GpuSmokeDevices, EachDeviceWorksFromAnotherThread) {
  const int n = gpu_device_count();
  if (n == 0) GTEST_SKIP() << "no device: hip backend not available on this machine";
  std::printf("%d device(s)\n", n);
  auto b0 = make_backend("hip", 0);
  ASSERT_TRUE(b0.ok()) << b0.status().ToString();
  for (int d = 0; d < n; ++d) {
    auto b = make_backend("hip", d);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    Backend& be = **b;
    EXPECT_EQ(be.info().device_index, d);
    Status from_thread = Status::Ok();
    std::vector<float> got(1000, 0.0f);
    std::thread t([&] {
      auto run = [&]() -> Status {
        HIPQ_ASSIGN_OR_RETURN(Buffer buf, be.allocate(got.size() * sizeof(float)));
        Tensor y = buf.tensor(DType::kF32, {static_cast<int64_t>(got.size())});
        HIPQ_RETURN_IF_ERROR(be.fill(y, 1.5f + d));
        HIPQ_ASSIGN_OR_RETURN(int e0, be.record_event());
        HIPQ_RETURN_IF_ERROR(be.scale(y, y, 2.0f, 0.0f));
        HIPQ_ASSIGN_OR_RETURN(int e1, be.record_event());
        HIPQ_RETURN_IF_ERROR(be.elapsed_ms(e0, e1).status());
        return be.copy_to_host(buf.data(), got.data(), got.size() * sizeof(float));
      };
      from_thread = run();
    });
    t.join();
    ASSERT_TRUE(from_thread.ok()) << "device " << d << ": " << from_thread.ToString();
    for (float v : got) ASSERT_EQ(v, 2.0f * (1.5f + d)) << "device " << d;
    // And device 0 still works on this thread afterwards.
    ASSERT_TRUE((*b0)->synchronize().ok());
  }
}

}  // namespace
}  // namespace hipq::kernels
