#include "worker/job_runner_factory.h"

#include <gtest/gtest.h>

#include "worker/engine_job_runner.h"
#include "worker/sleep_engine.h"

namespace hipq::worker {
namespace {

TEST(JobRunnerFactoryTest, EngineNamesTheRealPipelineOnTheCpuBackend) {
  auto r = make_job_runner("engine", "cpu", 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(dynamic_cast<EngineJobRunner*>(r->get()), nullptr);
  proto::WorkerHello hello;
  (*r)->describe(hello);
  EXPECT_EQ(hello.backend(), "cpu");
}

TEST(JobRunnerFactoryTest, SleepWithADurationIsTheTestDouble) {
  auto r = make_job_runner("sleep:5ms", "cpu", 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(dynamic_cast<SleepEngine*>(r->get()), nullptr);
}

TEST(JobRunnerFactoryTest, AnUnknownEngineOrDurationIsRefusedNamingTheFlag) {
  auto unknown = make_job_runner("turbo", "cpu", 0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("--engine \"turbo\""), std::string::npos) << unknown.status().message();
  EXPECT_FALSE(make_job_runner("sleep:soon", "cpu", 0).ok());
}

TEST(JobRunnerFactoryTest, ABackendThatIsNotBuiltInIsNotFound) {
  auto r = make_job_runner("engine", "no-such-backend", 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
}

}  // namespace
}  // namespace hipq::worker
