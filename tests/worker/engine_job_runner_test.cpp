#include "worker/engine_job_runner.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace hipq::worker
