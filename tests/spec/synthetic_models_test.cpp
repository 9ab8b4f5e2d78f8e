#include "spec/synthetic_models.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace hipq::spec {
namespace {

TEST(SyntheticModelsTest, TheTinyTestModelsComeFirstAndNoNameTwice) {
  const auto& names = synthetic_model_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "tiny-sdxl");
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size()) << "no name twice";
  EXPECT_EQ(kSyntheticModelPrefix, "synthetic:");
}

}  // namespace
}  // namespace hipq::spec
