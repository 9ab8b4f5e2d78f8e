#include "worker/sleep_engine.h"

#include <gtest/gtest.h>

#include <thread>

namespace hipq::worker {
namespace {

struct CountingSink : ProgressSink {
  int calls = 0;
  int last_step = 0;
  int last_steps = 0;
  void progress(int step, int steps, std::string_view) override {
    ++calls;
    last_step = step;
    last_steps = steps;
  }
};

JobAssignment job(const std::string& prompt, int steps = 4) {
  JobAssignment a;
  a.set_job_id(3);
  a.set_attempt(1);
  a.set_model("synthetic:tiny-sdxl");
  a.mutable_settings()->set_prompt(prompt);
  a.mutable_settings()->set_steps(steps);
  return a;
}

TEST(SleepEngine, ParsesDurationsWithUnits) {
  EXPECT_EQ(*SleepEngine::parse_spec("sleep:20ms"), std::chrono::milliseconds(20));
  EXPECT_EQ(*SleepEngine::parse_spec("sleep:1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(*SleepEngine::parse_spec("sleep:0"), std::chrono::microseconds(0));
  EXPECT_EQ(*SleepEngine::parse_spec("sleep"), std::chrono::microseconds(0));
  EXPECT_FALSE(SleepEngine::parse_spec("sleep:20").ok());
  EXPECT_FALSE(SleepEngine::parse_spec("sleep:-1ms").ok());
  EXPECT_FALSE(SleepEngine::parse_spec("engine").ok());
}

TEST(SleepEngine, SleepsReportsProgressPerStepAndNoGolden) {
  SleepEngine e(std::chrono::milliseconds(40));
  CountingSink sink;
  std::atomic<bool> cancel{false};
  auto start = std::chrono::steady_clock::now();
  auto out = e.run(job("a cat"), sink, cancel);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(40));
  EXPECT_EQ(sink.calls, 4);
  EXPECT_EQ(sink.last_step, 4);
  EXPECT_EQ(out->parity().verdict(), "NO_GOLDEN");
  EXPECT_FALSE(out->warm());
  EXPECT_EQ(e.loaded_models(), (std::vector<std::string>{"synthetic:tiny-sdxl"}));
  EXPECT_TRUE(e.run(job("again"), sink, cancel)->warm());
}

TEST(SleepEngine, StopsWhenCancelled) {
  SleepEngine e(std::chrono::seconds(10));
  CountingSink sink;
  std::atomic<bool> cancel{false};
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel.store(true);
  });
  auto start = std::chrono::steady_clock::now();
  auto out = e.run(job("slow", 100), sink, cancel);
  t.join();
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

TEST(SleepEngine, FailureMarkersDriveTheErrorPaths) {
  SleepEngine e(std::chrono::microseconds(0));
  CountingSink sink;
  std::atomic<bool> cancel{false};
  auto bad = e.run(job("x [fail]"), sink, cancel);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(is_retryable(bad.status()));
  auto oom = e.run(job("x [oom]"), sink, cancel);
  EXPECT_EQ(oom.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(is_retryable(oom.status()));
}

}  // namespace
}  // namespace hipq::worker
