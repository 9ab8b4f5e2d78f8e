#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <vector>

namespace hipq::kernels::cpu {
namespace {

TEST(ThreadPool, EveryIndexIsVisitedExactlyOnce) {
  ThreadPool pool(4);
  std::vector<std::atomic<int>> hits(10007);
  pool.parallel_for(10007, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, NestedCallsRunInlineWithoutDeadlock) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(8, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallel_for(100, 1, [&](int64_t b2, int64_t e2) { sum += e2 - b2; });
  });
  EXPECT_EQ(sum.load(), 800);
}

TEST(ThreadPool, ConcurrentCallersFromTwoThreadsBothFinish) {
  ThreadPool pool(2);
  std::atomic<int64_t> a{0}, b{0};
  std::thread t([&] {
    for (int r = 0; r < 200; ++r) pool.parallel_for(1000, 10, [&](int64_t s, int64_t e) { a += e - s; });
  });
  for (int r = 0; r < 200; ++r) pool.parallel_for(1000, 10, [&](int64_t s, int64_t e) { b += e - s; });
  t.join();
  EXPECT_EQ(a.load(), 200000);
  EXPECT_EQ(b.load(), 200000);
}

TEST(ThreadPool, GrainKeepsSmallLoopsOnTheCaller) {
  ThreadPool pool(4);
  int calls = 0;  // not atomic: one chunk means only the caller runs it
  pool.parallel_for(100, 1000, [&](int64_t b, int64_t e) {
    ++calls;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPool, DefaultThreadsHonoursTheEnvironment) {
  const char* old = std::getenv("HIPQ_CPU_THREADS");
  std::string saved = old ? old : "";
  setenv("HIPQ_CPU_THREADS", "3", 1);
  EXPECT_EQ(default_cpu_threads(), 3);
  setenv("HIPQ_CPU_THREADS", "zero", 1);
  EXPECT_GE(default_cpu_threads(), 1);
  if (old) setenv("HIPQ_CPU_THREADS", saved.c_str(), 1);
  else unsetenv("HIPQ_CPU_THREADS");
}

}  // namespace
}  // namespace hipq::kernels::cpu
