#include "worker/engine_job_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "proto/settings_codec.h"
#include "spec/generation_settings.h"

namespace hipq::worker {
namespace {

JobAssignment assignment(const std::string& batch_name) {
  JobAssignment a;
  a.set_job_id(17);
  a.set_batch_id(3);
  a.set_batch_name(batch_name);
  a.mutable_settings()->set_prompt("a cat");
  a.mutable_settings()->set_seed(42);
  return a;
}

TEST(EngineJobRunnerTest, ImageFileNameNamesBatchJobAndSeed) {
  EXPECT_EQ(image_file_name(assignment("quickstart")), "quickstart-j17-s42.png");
  EXPECT_EQ(image_file_name(assignment("parti_v1.2")), "parti_v1.2-j17-s42.png");
}

TEST(EngineJobRunnerTest, ABatchNameThatIsNoPlainFileNameFallsBackToTheBatchId) {
  for (const std::string& bad : {std::string(), std::string("../escape"), std::string("a/b"),
                                 std::string(".hidden"), std::string("sp ace"), std::string(101, 'x')}) {
    EXPECT_EQ(image_file_name(assignment(bad)), "b3-j17-s42.png") << "batch name '" << bad << "'";
  }
}

// The hello says what memory the worker has and runs under, so `hipq
// workers` can show it: the cap from the environment, the placement setting.
TEST(EngineJobRunnerTest, TheHelloCarriesTheMemoryCapAndThePlacement) {
  ASSERT_EQ(::setenv(kernels::kDeviceMemoryLimitEnv, "6GiB", 1), 0);
  auto runner = EngineJobRunner::create("cpu", 0, engine::Placement::kLow);
  ::unsetenv(kernels::kDeviceMemoryLimitEnv);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  proto::WorkerHello hello;
  (*runner)->describe(hello);
  EXPECT_EQ(hello.memory_limit_bytes(), int64_t{6} << 30);
  EXPECT_EQ(hello.placement(), "low");
  EXPECT_EQ(hello.backend(), "cpu");

  ASSERT_EQ(::setenv(kernels::kDeviceMemoryLimitEnv, "six gigs", 1), 0);
  auto refused = EngineJobRunner::create("cpu", 0);
  ::unsetenv(kernels::kDeviceMemoryLimitEnv);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(kernels::kDeviceMemoryLimitEnv), std::string::npos)
      << refused.status().message();
}

// Counts a job's progress reports.
class CountingProgress final : public ProgressSink {
 public:
  void progress(int step, int, std::string_view) override { last = step; }
  int last = 0;
};

JobAssignment tiny_job(int64_t id, const std::string& prompt, uint64_t seed,
                       const std::filesystem::path& root) {
  JobAssignment a;
  a.set_job_id(id);
  a.set_attempt(1);
  a.set_batch_id(5);
  a.set_batch_name("batched");
  a.set_model("synthetic:tiny-sdxl");
  a.set_output_root(root.string());
  a.set_output_dir("j" + std::to_string(id));
  for (const char* kind : {"latent", "png", "timings"}) a.add_save(kind);
  spec::GenerationSettings s;
  s.prompt = prompt;
  s.seed = seed;
  s.width = 64;
  s.height = 64;
  s.steps = 3;
  s.guidance = 5.0f;
  s.sampler = "euler_ancestral";
  *a.mutable_settings() = proto::to_proto(s);
  return a;
}

std::map<std::string, std::string> output_digests(const proto::JobResult& r) {
  std::map<std::string, std::string> out;
  for (const auto& o : r.outputs())
    if (o.kind() != "timings") out[o.kind()] = o.sha256();
  return out;
}

// The worker's batch: every file a job writes (latent, PNG) is the file it
// writes alone, byte for byte; its result and timings.json say it shared a
// batch; a job with bad settings fails alone.
TEST(EngineJobRunnerTest, ABatchWritesWhatEachJobWritesAlone) {
  auto runner = EngineJobRunner::create("cpu", 0);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const auto root =
      std::filesystem::temp_directory_path() / ("hipq-batch-runner-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::vector<JobAssignment> jobs = {tiny_job(1, "a red fox in the snow", 7, root / "batch"),
                                     tiny_job(2, "a lighthouse at dusk", 8, root / "batch"),
                                     tiny_job(3, "bad size", 9, root / "batch"),
                                     tiny_job(4, "a bowl of ramen", 7, root / "batch")};
  jobs[2].mutable_settings()->set_width(60);  // not a multiple of 8
  EXPECT_EQ((*runner)->batch_key(jobs[0]), (*runner)->batch_key(jobs[1]));
  EXPECT_EQ((*runner)->batch_key(jobs[2]), "");
  EXPECT_GE((*runner)->max_batch(), 4);

  std::atomic<bool> no{false};
  std::vector<CountingProgress> sinks(jobs.size());
  std::vector<ProgressSink*> progress;
  std::vector<const std::atomic<bool>*> cancel;
  for (auto& p : sinks) progress.push_back(&p);
  for (size_t i = 0; i < jobs.size(); ++i) cancel.push_back(&no);
  auto batch = (*runner)->run_batch(jobs, progress, cancel);
  ASSERT_EQ(batch.size(), jobs.size());
  ASSERT_FALSE(batch[2].ok());
  EXPECT_EQ(batch[2].status().code(), StatusCode::kInvalidArgument) << batch[2].status().ToString();
  for (size_t i : {size_t{0}, size_t{1}, size_t{3}}) {
    SCOPED_TRACE("job " + std::to_string(jobs[i].job_id()));
    ASSERT_TRUE(batch[i].ok()) << batch[i].status().ToString();
    EXPECT_EQ(batch[i]->batch_size(), 3);
    EXPECT_EQ(sinks[i].last, 3);
    JobAssignment alone_job = jobs[i];
    alone_job.set_output_root((root / "alone").string());
    CountingProgress p;
    auto alone = (*runner)->run(alone_job, p, no);
    ASSERT_TRUE(alone.ok()) << alone.status().ToString();
    EXPECT_EQ(alone->batch_size(), 1);
    const auto a = output_digests(*alone), b = output_digests(*batch[i]);
    ASSERT_EQ(a.size(), 2u);
    EXPECT_EQ(a, b) << "the batched job's latent or PNG differs from its run alone";
    std::ifstream timings(root / "batch" / jobs[i].output_dir() / "timings.json");
    const auto j = nlohmann::json::parse(timings, nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["denoise"]["batch_jobs"], 3);
    EXPECT_EQ(j["denoise"]["unet_batch"], 6);
  }
  std::filesystem::remove_all(root);
}

// A batch whose model fails to load fails each of its jobs with the load's
// own reason, in every chunk: the chunk's load (after the jobs moved into
// it) asks for the batch's precision and LoRAs, not a moved-from copy's
// (it answered 'unknown precision ""'). The load fails here by an fp8
// setting the pipeline refuses (HIPQ_FP8_CONVS).
TEST(EngineJobRunnerTest, ABatchWhoseModelFailsToLoadReportsTheLoadsReason) {
  auto runner = EngineJobRunner::create("cpu", 0);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const auto root =
      std::filesystem::temp_directory_path() / ("hipq-batch-load-" + std::to_string(::getpid()));
  std::vector<JobAssignment> jobs = {tiny_job(1, "a red fox in the snow", 7, root),
                                     tiny_job(2, "a lighthouse at dusk", 8, root)};
  for (JobAssignment& j : jobs) j.mutable_settings()->set_precision("fp8");
  ASSERT_EQ((*runner)->batch_key(jobs[0]), (*runner)->batch_key(jobs[1]));
  std::atomic<bool> no{false};
  std::vector<CountingProgress> sinks(jobs.size());
  std::vector<ProgressSink*> progress = {&sinks[0], &sinks[1]};
  std::vector<const std::atomic<bool>*> cancel = {&no, &no};
  ::setenv("HIPQ_FP8_CONVS", "bogus", 1);
  auto batch = (*runner)->run_batch(jobs, progress, cancel);
  ::unsetenv("HIPQ_FP8_CONVS");
  ASSERT_EQ(batch.size(), jobs.size());
  for (const auto& r : batch) {
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("HIPQ_FP8_CONVS=bogus: expected all, aligned or off"), std::string::npos)
        << r.status().ToString();
  }
  // Mended, the same runner loads the model and runs the batch.
  auto again = (*runner)->run_batch(jobs, progress, cancel);
  ASSERT_EQ(again.size(), jobs.size());
  for (const auto& r : again) EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace hipq::worker
