#include "coordinator/query_service.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>
#include <zmq.hpp>

#include "coordinator/server.h"
#include "coordinator/query/stats_accumulator.h"
#include "coordinator/statistics/descriptive.h"
#include "db/job_store.h"
#include "tests/db/run_history_fixture.h"

namespace hipq::coordinator {
namespace {

using nlohmann::json;

class QueryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { db::testing::fill_run_history(h_); }
  json query(const std::string& kind, const json& args) {
    auto r = run_query(*h_.db, kind, args);
    EXPECT_TRUE(r.ok()) << kind << " " << args.dump() << ": " << r.status().ToString();
    return r.ok() ? *r : json();
  }
  // Phase values read back through JobStore, not through the query code.
  std::vector<double> phase_via_job_store(const std::string& gpu_worker, bool warm, const std::string& phase) {
    db::JobStore store(*h_.db);
    std::vector<double> v;
    for (int64_t job : h_.done_jobs) {
      auto res = store.get_result(job);
      EXPECT_TRUE(res.ok());
      if (res->worker_id != gpu_worker || res->warm != warm) continue;
      auto phases = store.list_phase_timings(res->attempt_id);
      EXPECT_TRUE(phases.ok());
      for (const auto& p : *phases) {
        if (p.phase == phase) v.push_back(p.host_ms);
      }
    }
    return v;
  }
  db::testing::RunHistory h_;
};

TEST_F(QueryServiceTest, RunsAppliesFiltersAndReportsContext) {
  EXPECT_EQ(query("runs", json::object())["runs"].size(), 14u);
  auto r = query("runs", {{"gpu", "H200"}, {"verdict", "pass"}, {"limit", 100}});
  for (const auto& run : r["runs"]) {
    EXPECT_EQ(run["gpu"], "NVIDIA H200");
    EXPECT_EQ(run["verdict"], "PASS");
    EXPECT_EQ(run["build"], "abc1234");
    EXPECT_TRUE(run["phases"].contains("denoise"));
  }
  EXPECT_EQ(query("runs", {{"tag", "places"}, {"seed", 1000}})["runs"].size(), 2u);
  EXPECT_EQ(query("runs", {{"since", "2099-01-01"}})["runs"].size(), 0u);
  EXPECT_EQ(query("runs", {{"since", "2020-01-01T00:00"}, {"until", "2099-01-01"}})["runs"].size(), 14u);
}

TEST_F(QueryServiceTest, StatsGroupsByGpuKeepsWarmAndColdApartAndMatchesRawTimings) {
  auto s = query("stats", {{"group_by", "gpu"}});
  ASSERT_EQ(s["groups"].size(), 4u);  // 2 GPUs × warm/cold
  int checked = 0;
  for (const auto& g : s["groups"]) {
    const std::string gpu = g["key"]["gpu"];
    const bool warm = g["warmth"] == "warm";
    const std::string worker = gpu == "NVIDIA H200" ? "boxa/0" : "boxb/0";
    EXPECT_EQ(g["runs"].get<int>(), warm ? 5 : 1) << gpu;
    bool has_load = false;
    for (const auto& p : g["phases"]) {
      if (p["phase"] == "load") has_load = true;
      if (p["phase"] != "denoise") continue;
      auto raw = phase_via_job_store(worker, warm, "denoise");
      auto expect = statistics::summarize(raw);
      ASSERT_TRUE(expect.ok());
      EXPECT_EQ(p["n"].get<size_t>(), expect->n);
      EXPECT_NEAR(p["p50"].get<double>(), expect->p50, 1e-9);
      EXPECT_NEAR(p["mean"].get<double>(), expect->mean, 1e-9);
      EXPECT_NEAR(p["max"].get<double>(), expect->max, 1e-9);
      EXPECT_LE(p["median_ci"][0].get<double>(), expect->p50);
      EXPECT_GE(p["median_ci"][1].get<double>(), expect->p50);
      ++checked;
    }
    EXPECT_EQ(has_load, !warm) << "cold runs load the model, warm ones do not";
    const double sps = g["throughput"]["steps_per_s"];
    EXPECT_NEAR(sps, gpu == "NVIDIA H200" ? 10.0 : 10.0 / 1.1, 0.2);
    EXPECT_GT(g["throughput"]["images_per_hour"].get<double>(), 1000.0);
    EXPECT_EQ(g["memory"]["runs"].get<int>(), g["runs"].get<int>());
    EXPECT_EQ(g["memory"]["peak_bytes_max"].get<int64_t>(), warm ? (1LL << 30) : (5LL << 28)) << gpu;
    EXPECT_DOUBLE_EQ(g["memory"]["peak_bytes_p50"].get<double>(), warm ? 1073741824.0 : 1342177280.0);
  }
  EXPECT_EQ(checked, 4);
}

TEST_F(QueryServiceTest, StatsOtherDimensionsAndClocks) {
  auto s = query("stats", {{"group_by", json::array({"model", "resolution", "day"})}, {"clock", "gpu"}});
  ASSERT_EQ(s["groups"].size(), 2u);
  EXPECT_EQ(s["groups"][0]["key"]["resolution"], "64x64");
  for (const auto& p : s["groups"][0]["phases"]) {
    EXPECT_NE(p["phase"], "total") << "no GPU-clock total";
    EXPECT_NE(p["phase"], "write") << "write has no GPU time";
  }
  auto bad = run_query(*h_.db, "stats", {{"group_by", "colour"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("colour"), std::string::npos);
}

TEST_F(QueryServiceTest, StatsGroupByTagNameUsesTheTagValuesAndGathersUntaggedRuns) {
  auto s = query("stats", {{"group_by", "tag:Category"}});
  std::map<std::string, int64_t> runs;
  for (const auto& g : s["groups"]) runs[g["key"]["tag:Category"].get<std::string>()] += g["runs"].get<int64_t>();
  // The name matches case-insensitively (prompt 1's tag is "category:Architecture").
  ASSERT_EQ(runs.size(), 2u) << s.dump(1);
  EXPECT_GT(runs["Architecture"], 0);
  EXPECT_GT(runs["(none)"], 0);
  auto all = query("stats", {});
  int64_t total = 0;
  for (const auto& g : all["groups"]) total += g["runs"].get<int64_t>();
  EXPECT_EQ(runs["Architecture"] + runs["(none)"], total);

  auto bad = run_query(*h_.db, "stats", {{"group_by", "tag:"}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("tag:NAME"), std::string::npos) << bad.status().message();
}

TEST_F(QueryServiceTest, CompareFindsTheTenPercentSlowerGpuAndNoChangeForTheSameRuns) {
  auto c = query("compare", {{"a", {{"gpu", "H200"}}}, {"b", {{"gpu", "RX 6800"}}}, {"phase", "denoise"}});
  EXPECT_EQ(c["verdict"], "slower") << c.dump(1);
  EXPECT_NEAR(c["ratio"].get<double>(), 1.10, 0.02);
  EXPECT_EQ(c["a"]["n"], 5);
  EXPECT_LT(c["p"].get<double>(), 0.05);
  auto back = query("compare", {{"a", {{"host", "boxb"}}}, {"b", {{"host", "boxa"}}}, {"phase", "step"}});
  EXPECT_EQ(back["verdict"], "faster") << back.dump(1);
  auto same = query("compare", {{"a", {{"build", "abc"}}}, {"b", {{"gpu", "h200"}}}, {"phase", "total"}});
  EXPECT_EQ(same["verdict"], "no change") << same.dump(1);
  EXPECT_DOUBLE_EQ(same["ratio"].get<double>(), 1.0);
  auto few = run_query(*h_.db, "compare", {{"a", {{"gpu", "H200"}}}, {"b", {{"gpu", "RX"}}}, {"warmth", "cold"}});
  EXPECT_EQ(few.status().code(), StatusCode::kFailedPrecondition) << few.status().ToString();
  auto bad = run_query(*h_.db, "compare", {{"a", {{"gpu", "H200"}}}});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(QueryServiceTest, ParityAcrossSeedsFindsTheWorstJob) {
  auto p = query("parity", json::object());
  ASSERT_EQ(p["rows"].size(), 2u);
  for (const auto& row : p["rows"]) {
    EXPECT_EQ(row["seeds"], 3);
    EXPECT_EQ(row["runs"], 6);
    EXPECT_NEAR(row["pass_rate"].get<double>(), 5.0 / 6.0, 1e-12);
    EXPECT_DOUBLE_EQ(row["cosine_min"].get<double>(), 0.9971);
    EXPECT_EQ(row["worst"]["seed"], 1002);
    EXPECT_EQ(row["worst"]["verdict"], "FAIL");
    EXPECT_LE(row["cosine_min"].get<double>(), row["cosine_mean"].get<double>());
    EXPECT_LE(row["cosine_mean"].get<double>(), row["cosine_max"].get<double>());
  }
}

// `parity` and `compare` read the runs a page at a time (a million runs must
// not sit in memory at once): under a cap of 2 runs per read, with pages of 2,
// they give the answers the queries give, while reading every run at once
// fails under that cap.
TEST_F(QueryServiceTest, ParityAndCompareReadAPageOfRunsAtATime) {
  const json parity = query("parity", json::object());
  const json compare = query("compare", {{"a", {{"gpu", "H200"}}}, {"b", {{"gpu", "RX 6800"}}}, {"phase", "denoise"}});
  db::RunFilter h200, rx;
  h200.gpu = "H200";
  rx.gpu = "RX 6800";
  h200.warm = rx.warm = true;
  db::RunRowCap cap(2);
  auto all = db::query_runs(*h_.db, db::RunFilter{});
  ASSERT_FALSE(all.ok()) << "the cap does not bite: the history has too few runs";
  EXPECT_EQ(all.status().code(), StatusCode::kResourceExhausted);

  auto paged = query::stream_parity(*h_.db, db::RunFilter{}, 2);
  ASSERT_TRUE(paged.ok()) << paged.status().ToString();
  EXPECT_EQ((*paged)["rows"], parity["rows"]);

  for (auto [filter, side] : {std::pair{h200, "a"}, std::pair{rx, "b"}}) {
    auto v = query::stream_phase_values(*h_.db, filter, "host", "denoise", 2);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->runs, compare[side]["runs"].get<size_t>()) << side;
    EXPECT_EQ(v->values.count(), compare[side]["n"].get<size_t>()) << side;
    EXPECT_DOUBLE_EQ(v->values.mean(), compare[side]["summary"]["mean"].get<double>()) << side;
  }
  auto h200_values = phase_via_job_store("boxa/0", true, "denoise");
  auto v = query::stream_phase_values(*h_.db, h200, "host", "denoise", 2);
  ASSERT_TRUE(v.ok());
  std::vector<double> got = v->values.values();
  std::sort(got.begin(), got.end());
  std::sort(h200_values.begin(), h200_values.end());
  EXPECT_EQ(got, h200_values);
}

TEST_F(QueryServiceTest, ReportDataCoversTheBatch) {
  auto d = query("report-data", {{"thumbnails", 4}});
  EXPECT_EQ(d["batch"]["id"], h_.batch_id);
  EXPECT_EQ(d["batch"]["total"], 14);
  EXPECT_EQ(d["workers"].size(), 2u);
  EXPECT_EQ(d["runs"].size(), 14u);
  EXPECT_EQ(d["step_traces"].size(), 4u);
  EXPECT_EQ(d["step_traces"][0]["median"].size(), static_cast<size_t>(db::testing::RunHistory::kSteps));
  EXPECT_FALSE(d["samples"].empty());
  EXPECT_EQ(d["parity"].size(), 2u);
  // The fixture records PNG outputs but writes no files: each is counted.
  EXPECT_TRUE(d["thumbnails"].empty());
  EXPECT_GT(d["thumbnail_errors"].get<int>(), 0);
  EXPECT_EQ(run_query(*h_.db, "report-data", {{"batch", 999}}).status().code(), StatusCode::kNotFound);

  // History: one point per (batch, build); the medians are those of the runs' phases.
  ASSERT_EQ(d["history"].size(), 2u) << d["history"].dump(1);
  std::set<std::string> builds;
  int64_t runs = 0;
  for (const auto& pt : d["history"]) {
    builds.insert(pt["build"].get<std::string>());
    runs += pt["runs"].get<int64_t>();
    EXPECT_EQ(pt["batch"], h_.batch_id);
    EXPECT_GT(pt["phases"]["denoise"].get<double>(), 0);
    EXPECT_GT(pt["phases"]["total"].get<double>(), pt["phases"]["denoise"].get<double>());
  }
  EXPECT_EQ(builds, (std::set<std::string>{"abc1234", "def5678"}));
  EXPECT_EQ(runs, 12) << "the 12 runs with a result";
  EXPECT_LE(d["history"][0]["time"].get<double>(), d["history"][1]["time"].get<double>()) << "oldest first";
}

TEST_F(QueryServiceTest, RejectsUnknownKindAndBadArgs) {
  auto r = run_query(*h_.db, "histogram", json::object());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("runs, stats, compare, parity, report-data"), std::string::npos);
  EXPECT_EQ(run_query(*h_.db, "runs", json::array()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run_query(*h_.db, "runs", {{"since", "yesterday"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run_query(*h_.db, "runs", {{"state", "sleeping"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(run_query(*h_.db, "runs", {{"batch", "x1"}}).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(QueryServiceTest, LocalFileAndCoordinatorGiveTheSameAnswers) {
  QueryTarget local;
  local.db_path = h_.db_path;
  zmq::context_t context;
  ServerOptions options;
  options.db_path = h_.db_path;
  options.bind = "tcp://127.0.0.1:*";
  auto server = Server::create(context, options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::thread loop([&] { (void)(*server)->run(); });
  QueryTarget remote;
  remote.endpoint = (*server)->endpoint();
  remote.timeout = std::chrono::milliseconds(20000);
  const json stats_args{{"group_by", "gpu,host"}, {"resamples", 500}};
  auto a = run_query_at(local, "stats", stats_args);
  auto b = run_query_at(remote, "stats", stats_args);
  auto ra = run_query_at(local, "runs", {{"verdict", "FAIL"}});
  auto rb = run_query_at(remote, "runs", {{"verdict", "FAIL"}});
  auto bad = run_query_at(remote, "nonsense", json::object());
  (*server)->request_stop();
  loop.join();
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*a, *b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(*ra, *rb);
  EXPECT_EQ((*ra)["runs"].size(), 2u);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown query kind"), std::string::npos) << bad.status().ToString();
}

TEST_F(QueryServiceTest, QueryTargetErrors) {
  EXPECT_EQ(run_query_at(QueryTarget{}, "runs", json::object()).status().code(), StatusCode::kInvalidArgument);
  QueryTarget missing;
  missing.db_path = h_.dir / "nope.db";
  EXPECT_EQ(run_query_at(missing, "runs", json::object()).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(missing.db_path)) << "a query must not create a database";
}

}  // namespace
}  // namespace hipq::coordinator
