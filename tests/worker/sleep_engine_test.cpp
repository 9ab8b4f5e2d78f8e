#include "worker/sleep_engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "proto/protocol.h"

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

// Batching (docs/protocol.md, "Batching"): a batch sleeps once for all its
// jobs, each gets its own result with batch_size set, and a failure marker
// fails its job alone.
struct Batch {
  std::vector<JobAssignment> jobs;
  std::vector<CountingSink> sinks;
  std::vector<std::atomic<bool>> flags;
  explicit Batch(const std::vector<std::string>& prompts, int steps = 4) : sinks(prompts.size()), flags(prompts.size()) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      jobs.push_back(job(prompts[i], steps));
      jobs.back().set_job_id(static_cast<int64_t>(10 + i));
      flags[i].store(false);
    }
  }
  std::vector<ProgressSink*> progress() {
    std::vector<ProgressSink*> out;
    for (auto& s : sinks) out.push_back(&s);
    return out;
  }
  std::vector<const std::atomic<bool>*> cancel() {
    std::vector<const std::atomic<bool>*> out;
    for (auto& f : flags) out.push_back(&f);
    return out;
  }
};

TEST(SleepEngine, ABatchSleepsOnceAndEachJobGetsItsOwnResultWithTheBatchSize) {
  // 400 ms a sleep: once per job would be 1.6 s; the bound leaves a busy
  // machine 0.8 s of stalls.
  SleepEngine e(std::chrono::milliseconds(400));
  Batch b({"a", "b", "c [fail]", "d"});
  const auto start = std::chrono::steady_clock::now();
  auto out = e.run_batch(b.jobs, b.progress(), b.cancel());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(400));
  EXPECT_LT(took, std::chrono::milliseconds(1200)) << "slept once per job, not once per batch";
  ASSERT_EQ(out.size(), 4u);
  for (size_t i : {0u, 1u, 3u}) {
    ASSERT_TRUE(out[i].ok()) << out[i].status().ToString();
    EXPECT_EQ(out[i]->job_id(), b.jobs[i].job_id());
    EXPECT_EQ(out[i]->batch_size(), 4);
    EXPECT_EQ(out[i]->steps_size(), 4);
    EXPECT_EQ(b.sinks[i].last_step, 4);
  }
  EXPECT_EQ(out[2].status().code(), StatusCode::kInvalidArgument) << "the [fail] marker fails its job alone";
  EXPECT_EQ(b.sinks[2].calls, 0);
}

TEST(SleepEngine, ACancelledJobOfABatchEndsCancelledAloneAndTheOthersFinish) {
  SleepEngine e(std::chrono::milliseconds(400));
  Batch b({"a", "b", "c"}, 20);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    b.flags[1].store(true);
  });
  auto out = e.run_batch(b.jobs, b.progress(), b.cancel());
  t.join();
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(out[0].ok());
  EXPECT_EQ(out[1].status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(out[2].ok());
  EXPECT_LT(b.sinks[1].last_step, 20) << "the cancelled job went on reporting progress";
  EXPECT_EQ(b.sinks[2].last_step, 20);
}

TEST(SleepEngine, BatchKeysFollowModelAndSettingsAndAMixedBatchIsRefused) {
  SleepEngine e(std::chrono::microseconds(0));
  EXPECT_EQ(e.max_batch(), proto::kMaxBatch);
  JobAssignment a = job("one"), b = job("two");
  b.mutable_settings()->set_seed(99);
  EXPECT_FALSE(e.batch_key(a).empty());
  EXPECT_EQ(e.batch_key(a), e.batch_key(b)) << "prompt and seed differ per job of a batch";
  JobAssignment other_model = job("one");
  other_model.set_model("synthetic:tiny-sd15");
  EXPECT_NE(e.batch_key(a), e.batch_key(other_model));
  JobAssignment other_size = job("one");
  other_size.mutable_settings()->set_width(128);
  EXPECT_NE(e.batch_key(a), e.batch_key(other_size));
  Batch mixed({"a", "b"});
  mixed.jobs[1].set_model("synthetic:tiny-sd15");
  auto out = e.run_batch(mixed.jobs, mixed.progress(), mixed.cancel());
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out[1].status().message().find("batch key"), std::string::npos) << out[1].status().message();
  Batch too_many(std::vector<std::string>(proto::kMaxBatch + 1, "x"));
  auto refused = e.run_batch(too_many.jobs, too_many.progress(), too_many.cancel());
  ASSERT_EQ(refused.size(), static_cast<size_t>(proto::kMaxBatch + 1));
  EXPECT_EQ(refused[0].status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::worker
