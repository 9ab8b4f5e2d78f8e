#include "kernels/cpu/host_pool.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace hipq::kernels::cpu {
namespace {

TEST(HostPool, SizeClassesRoundUpByAtMostAQuarter) {
  EXPECT_EQ(HostPool::size_class(0), 64u);
  EXPECT_EQ(HostPool::size_class(1), 64u);
  EXPECT_EQ(HostPool::size_class(65), 128u);
  EXPECT_EQ(HostPool::size_class(1024), 1024u);
  EXPECT_EQ(HostPool::size_class(1025), 1280u);
  EXPECT_EQ(HostPool::size_class(4096), 4096u);
  EXPECT_EQ(HostPool::size_class(4097), 5120u);
  for (size_t b : {size_t{3000}, size_t{100000}, size_t{123456789}}) {
    EXPECT_GE(HostPool::size_class(b), b);
    EXPECT_LT(HostPool::size_class(b), b + b / 4 + 64);
  }
}

TEST(HostPool, BlocksAre64ByteAlignedAndReusedAfterRelease) {
  HostPool pool;
  auto a = pool.allocate(1000);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*a) % 64, 0u);
  void* first = *a;
  pool.release(first, 1000);
  auto b = pool.allocate(990);  // same class
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, first);
  pool.release(*b, 990);
}

TEST(HostPool, InUseAndPeakFollowAllocations) {
  HostPool pool;
  auto a = pool.allocate(4096);
  auto b = pool.allocate(4096);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(pool.bytes_in_use(), 8192);
  pool.release(*a, 4096);
  EXPECT_EQ(pool.bytes_in_use(), 4096);
  EXPECT_EQ(pool.peak_bytes(), 8192);
  EXPECT_EQ(pool.bytes_cached(), 4096);
  pool.reset_peak();
  EXPECT_EQ(pool.peak_bytes(), 4096);
  pool.trim();
  EXPECT_EQ(pool.bytes_cached(), 0);
  pool.release(*b, 4096);
}

TEST(HostPool, ImpossibleRequestIsResourceExhausted) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizer allocators abort on impossible sizes";
#endif
  HostPool pool;
  auto r = pool.allocate(size_t{1} << 62);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace hipq::kernels::cpu
