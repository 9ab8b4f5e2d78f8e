#include "kernels/cpu/ops.h"

#include "cpu_test_util.h"

namespace hipq::kernels {
namespace {
using testing::make;
using testing::zeros;

TEST(CpuEmbedding, LooksUpRowsForI32AndI64Ids) {
  auto table = make({3, 2}, {0, 1, 10, 11, 20, 21});
  auto ids32 = make({2, 2}, {2, 0, 1, 1}, DType::kI32);
  auto y = zeros({2, 2, 2});
  ASSERT_TRUE(cpu::embedding(ids32.t, table.t, y.t).ok());
  EXPECT_VALUES_NEAR(y.values(), (std::vector<float>{20, 21, 0, 1, 10, 11, 10, 11}), 0);
  auto ids64 = make({1}, {2}, DType::kI64);
  auto y1 = zeros({1, 2});
  ASSERT_TRUE(cpu::embedding(ids64.t, table.t, y1.t).ok());
  EXPECT_VALUES_NEAR(y1.values(), (std::vector<float>{20, 21}), 0);
}

TEST(CpuEmbedding, OutOfRangeIdIsInvalidArgumentNamingPositionAndValue) {
  auto table = make({3, 2}, {0});
  auto ids = make({3}, {0, 3, 1}, DType::kI32);
  auto y = zeros({3, 2});
  Status s = cpu::embedding(ids.t, table.t, y.t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("ids[1] = 3"), std::string::npos) << s.message();
}

TEST(CpuEmbedding, FloatIdsAreRejected) {
  auto table = make({3, 2}, {0});
  auto ids = make({1}, {0});
  auto y = zeros({1, 2});
  EXPECT_EQ(cpu::embedding(ids.t, table.t, y.t).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::kernels
