#include "kernels/cpu/cpu_backend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace hipq::kernels {
namespace {

TEST(CpuBackend, InfoDescribesTheHost) {
  auto be = make_backend("cpu");
  ASSERT_TRUE(be.ok());
  const BackendInfo& info = (*be)->info();
  EXPECT_EQ(info.name, "cpu");
  EXPECT_EQ(info.device_name, "host CPU");
  EXPECT_FALSE(info.arch.empty());
  EXPECT_GT(info.memory_bytes, 0);
  EXPECT_GE(info.multiprocessors, 1);
}

TEST(CpuBackend, BuffersComeFromThePoolAndCountTowardsPeak) {
  auto be = std::move(*make_backend("cpu"));
  be->reset_peak();
  const int64_t base = be->bytes_in_use();
  void* first;
  {
    auto a = be->allocate(1 << 20);
    ASSERT_TRUE(a.ok());
    first = a->data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_GE(be->bytes_in_use(), base + (1 << 20));
    Tensor t = a->tensor(DType::kF16, {512, 1024});
    EXPECT_EQ(t.location, Location::kHost);
  }
  EXPECT_EQ(be->bytes_in_use(), base);
  EXPECT_GE(be->peak_bytes(), base + (1 << 20));
  auto b = be->allocate(1 << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->data(), first);  // reused, no new allocation
}

TEST(CpuBackend, CopiesAndMemsetMoveBytes) {
  auto be = std::move(*make_backend("cpu"));
  auto buf = std::move(*be->allocate(16));
  const char src[16] = "0123456789abcde";
  ASSERT_TRUE(be->copy_to_device(src, buf.data(), 16).ok());
  char back[16] = {};
  ASSERT_TRUE(be->copy_to_host(buf.data(), back, 16).ok());
  EXPECT_EQ(std::memcmp(src, back, 16), 0);
  ASSERT_TRUE(be->memset_zero(buf.data(), 16).ok());
  ASSERT_TRUE(be->copy_to_host(buf.data(), back, 16).ok());
  EXPECT_EQ(back[5], 0);
  EXPECT_EQ(be->copy_to_host(nullptr, back, 4).code(), StatusCode::kInvalidArgument);
}

TEST(CpuBackend, EventsMeasureHostTime) {
  auto be = std::move(*make_backend("cpu"));
  auto a = be->record_event();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto b = be->record_event();
  ASSERT_TRUE(a.ok() && b.ok());
  auto ms = be->elapsed_ms(*a, *b);
  ASSERT_TRUE(ms.ok());
  EXPECT_GE(*ms, 19.0);
  EXPECT_LT(*ms, 2000.0);
  EXPECT_EQ(be->elapsed_ms(*a, 999).status().code(), StatusCode::kInvalidArgument);
}

// One backend per worker thread: ops on distinct backends running at the same
// time (sharing the process-wide thread pool) give the single-threaded answers.
TEST(CpuBackend, TwoBackendsOnTwoThreadsComputeIndependently) {
  auto run = [](int seed, std::vector<float>& out) {
    auto be = std::move(*make_backend("cpu"));
    const int64_t M = 67, N = 131, K = 97;
    std::vector<float> a(M * K), b(N * K);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7 + seed) % 13) - 6.0f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 5 + seed) % 11) - 5.0f;
    out.assign(static_cast<size_t>(M * N), 0.0f);
    MatmulOptions o;
    o.trans_b = true;
    Tensor ta = Tensor::contiguous(a.data(), DType::kF32, {M, K});
    Tensor tb = Tensor::contiguous(b.data(), DType::kF32, {N, K});
    Tensor tc = Tensor::contiguous(out.data(), DType::kF32, {M, N});
    for (int rep = 0; rep < 20; ++rep) ASSERT_TRUE(be->matmul(ta, tb, tc, o).ok());
  };
  std::vector<float> alone1, alone2, par1, par2;
  run(1, alone1);
  run(2, alone2);
  std::thread t([&] { run(1, par1); });
  run(2, par2);
  t.join();
  EXPECT_EQ(par1, alone1);
  EXPECT_EQ(par2, alone2);
  EXPECT_NE(alone1, alone2);
}

TEST(CpuBackend, UnknownBackendNameIsNotFound) {
  auto be = make_backend("tpu");
  ASSERT_FALSE(be.ok());
  EXPECT_EQ(be.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hipq::kernels
