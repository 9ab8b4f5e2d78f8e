#include "worker/engine_job_runner.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/backend.h"

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
  for (const std::string& bad : {std::string(), std::string("../escape"), std::string("a/b"), std::string(".hidden"),
                                 std::string("sp ace"), std::string(101, 'x')}) {
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

}  // namespace
}  // namespace hipq::worker
