// Report data straight from the query layer (hipq_query, no sockets): the
// batch it covers, and the args it refuses.
#include "coordinator/query/report_data.h"

#include <gtest/gtest.h>

#include "coordinator/query/run_pages.h"
#include "coordinator/report/html_report.h"
#include "db/run_queries.h"
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

TEST_F(ReportDataTest, ABatchOverTheRunsTableCapListsWorstAndSlowestAndThePageSaysSo) {
  auto all = build_report_data(*h_.db, json::object());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_FALSE(all->contains("runs_table")) << "a small batch lists every run";
  const size_t total = (*all)["runs"].size();
  ASSERT_GT(total, 6u);

  // 3 worst by parity and 3 slowest of the 14 runs.
  auto d = build_report_data(*h_.db, json{{"runs_table", 6}});
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_TRUE(d->contains("runs_table"));
  const json& t = (*d)["runs_table"];
  EXPECT_EQ(t["total"], total);
  EXPECT_EQ(t["cap"], 6);
  EXPECT_EQ(t["worst_by_parity"], 3);
  EXPECT_EQ(t["slowest"], 3);
  EXPECT_EQ(t["shown"], (*d)["runs"].size());
  EXPECT_LE((*d)["runs"].size(), 6u);
  EXPECT_EQ(t["not_shown"].get<size_t>() + t["shown"].get<size_t>(), total);
  // The worst by parity: the fixture's two FAIL verdicts, then the job that failed.
  size_t fails = 0;
  bool failed_listed = false;
  for (const auto& r : (*d)["runs"]) {
    failed_listed = failed_listed || r["job"] == h_.failed_job;
    fails += r["verdict"] == "FAIL";
  }
  EXPECT_TRUE(failed_listed) << (*d)["runs"].dump();
  EXPECT_EQ(fails, 2u) << (*d)["runs"].dump();
  // Everything else is what the full report says.
  for (const char* k : {"stats", "samples", "step_traces", "parity", "workers", "batch"}) EXPECT_EQ((*d)[k], (*all)[k]) << k;

  auto html = report::render_html_report(*d);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  EXPECT_NE(html->find("id=\"runs-capped\""), std::string::npos);
  EXPECT_NE(html->find("This batch has " + std::to_string(total) + " runs, more than the 6"), std::string::npos);
  auto plain = report::render_html_report(*all);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->find("runs-capped"), std::string::npos);

  auto bad = build_report_data(*h_.db, json{{"runs_table", 1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("runs_table 1 is outside 2..1000000"), std::string::npos);
}

TEST_F(ReportDataTest, TheSameDatabaseGivesTheSameReportBytes) {
  auto a = build_report_data(*h_.db, json{{"runs_table", 4}});
  auto b = build_report_data(*h_.db, json{{"runs_table", 4}});
  ASSERT_TRUE(a.ok() && b.ok());
  (*b)["generated_at"] = (*a)["generated_at"];
  auto ha = report::render_html_report(*a);
  auto hb = report::render_html_report(*b);
  ASSERT_TRUE(ha.ok() && hb.ok());
  EXPECT_EQ(*ha, *hb);
}

TEST_F(ReportDataTest, PagesVisitEveryRunOnceInJobOrder) {
  db::RunFilter f;
  f.batch = h_.batch_id;
  auto whole = db::query_runs(*h_.db, f);
  ASSERT_TRUE(whole.ok());
  std::vector<int64_t> want, got;
  for (const auto& r : *whole) want.push_back(r.job_id);
  size_t pages = 0;
  ASSERT_TRUE(for_each_run_page(*h_.db, f, [&](std::vector<db::RunRow>& page) {
                ++pages;
                for (const auto& r : page) got.push_back(r.job_id);
                return Status::Ok();
              }, 3).ok());
  EXPECT_EQ(got, want);
  EXPECT_EQ(pages, (want.size() + 2) / 3 + (want.size() % 3 == 0 ? 1 : 0)) << "the last page may be empty";
  f.limit = 5;  // the filter's own limit still holds
  got.clear();
  ASSERT_TRUE(for_each_run_page(*h_.db, f, [&](std::vector<db::RunRow>& page) {
                for (const auto& r : page) got.push_back(r.job_id);
                return Status::Ok();
              }, 3).ok());
  EXPECT_EQ(got, std::vector<int64_t>(want.begin(), want.begin() + 5));
  EXPECT_EQ(for_each_run_page(*h_.db, f, [](std::vector<db::RunRow>&) { return Status::Ok(); }, 0).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hipq::coordinator::query
