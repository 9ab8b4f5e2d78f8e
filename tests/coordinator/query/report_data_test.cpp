// Report data straight from the query layer (hipq_query, no sockets): the
// batch it covers, and the args it refuses.
#include "coordinator/query/report_data.h"

#include <gtest/gtest.h>

#include "tests/db/run_history_fixture.h"

namespace hipq::coordinator::query {
namespace {

using nlohmann::json;

class ReportDataTest : public ::testing::Test {
 protected:
  void SetUp() override { db::testing::fill_run_history(h_); }
  db::testing::RunHistory h_;
};

TEST_F(ReportDataTest, WithoutArgsItCoversTheNewestBatch) {
  auto d = build_report_data(*h_.db, json::object());
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ((*d)["batch"]["id"], h_.batch_id);
  EXPECT_EQ((*d)["batch"]["name"], "history");
  EXPECT_EQ((*d)["workers"].size(), 2u);
  EXPECT_FALSE((*d)["runs"].empty());
}

TEST_F(ReportDataTest, NoThumbnailsAskedForMeansNoneReadAndNoneCounted) {
  auto d = build_report_data(*h_.db, json{{"thumbnails", 0}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE((*d)["thumbnails"].empty());
  EXPECT_EQ((*d)["thumbnail_errors"], 0);
}

TEST_F(ReportDataTest, BadArgsAreRefusedNamingThem) {
  auto px = build_report_data(*h_.db, json{{"thumbnail_px", 8}});
  ASSERT_FALSE(px.ok());
  EXPECT_EQ(px.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(px.status().message().find("thumbnail_px 8"), std::string::npos) << px.status().message();
  EXPECT_EQ(build_report_data(*h_.db, json{{"batch", 999}}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hipq::coordinator::query
