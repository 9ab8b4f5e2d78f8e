// The query layer's run statistics on their own (hipq_query, no sockets):
// argument parsing and the step timings read back from a real database.
#include "coordinator/query/run_stats.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

#include "db/run_queries.h"
#include "tests/db/run_history_fixture.h"

namespace hipq::coordinator::query {
namespace {

using nlohmann::json;

TEST(RunStatsTest, TimesAreEpochSecondsUtcDatesOrAges) {
  const double now = 1790000000.0;
  EXPECT_EQ(*parse_time(json(1700000000.5), "since", now), 1700000000.5);
  EXPECT_EQ(*parse_time(json("2026-01-02"), "since", now), 1767312000.0);
  EXPECT_EQ(*parse_time(json("2026-01-02T03:04:05Z"), "since", now), 1767312000.0 + 3 * 3600 + 4 * 60 + 5);
  EXPECT_EQ(*parse_time(json("2h"), "since", now), now - 7200);
  EXPECT_EQ(*parse_time(json("7d"), "until", now), now - 7 * 86400);
  auto bad = parse_time(json("yesterday"), "since", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("since: \"yesterday\" is not a time"), std::string::npos)
      << bad.status().message();
}

TEST(RunStatsTest, AnUnknownPhaseIsRefusedListingTheKnownOnes) {
  EXPECT_TRUE(check_phase_name("step").ok());
  EXPECT_TRUE(check_phase_name("total").ok());
  auto s = check_phase_name("warmup");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown phase \"warmup\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("text_encode"), std::string::npos) << s.message();
}

TEST(RunStatsTest, AFilterArgOfTheWrongTypeIsInvalidArgument) {
  EXPECT_TRUE(parse_run_filter(json{{"seed", 3}, {"gpu", "H200"}}).ok());
  auto r = parse_run_filter(json{{"warm", "sometimes"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(RunStatsTest, SamplesCarryEveryStepTheDatabaseHolds) {
  db::testing::RunHistory h;
  db::testing::fill_run_history(h);
  db::RunFilter filter;
  filter.with_result_only = true;
  auto rows = db::query_runs(*h.db, filter);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_FALSE(rows->empty());
  auto samples = load_samples(*h.db, *rows, "host");
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), rows->size());
  size_t with_steps = 0;
  for (const RunSample& s : *samples) {
    if (s.steps.empty()) continue;
    ++with_steps;
    EXPECT_EQ(s.steps.size(), static_cast<size_t>(db::testing::RunHistory::kSteps));
    EXPECT_TRUE(s.phases.count("denoise"));
    EXPECT_TRUE(s.phases.count("total"));
  }
  EXPECT_EQ(with_steps, h.done_jobs.size());
  EXPECT_EQ(phase_values(*samples, "step").size(), with_steps * db::testing::RunHistory::kSteps);
}

// group_by lora names each LoRA set by its files' stems and scales, mode the
// kind of job; runs of one set and mode fall in one group.
TEST(RunStatsTest, RunsGroupByLoraSetAndMode) {
  std::vector<db::RunRow> rows(4);
  rows[0].loras_json = R"([{"path":"/l/watercolor.safetensors","scale":0.8,"sha256":"a"}])";
  rows[1] = rows[0];
  rows[1].init_image = "/in/fox.png";
  rows[2].refiner = "synthetic:sdxl-refiner";
  rows[3].loras_json = R"([{"path":"/l/watercolor.safetensors","scale":0.8,"sha256":"a"},)"
                       R"({"path":"/m/detail.safetensors","scale":-0.5,"sha256":"b"}])";
  std::vector<RunSample> samples;
  for (const auto& r : rows) samples.push_back(RunSample{&r, {{"denoise", 10.0}, {"total", 12.0}}, {}});
  auto parsed = parse_stats_options(json{{"group_by", "lora,mode"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto stats = compute_stats(samples, *parsed);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  std::set<std::pair<std::string, std::string>> keys;
  for (const auto& g : (*stats)["groups"])
    keys.emplace(g["key"]["lora"].get<std::string>(), g["key"]["mode"].get<std::string>());
  EXPECT_EQ(keys, (std::set<std::pair<std::string, std::string>>{{"watercolor:0.8", "txt2img"},
                                                                 {"watercolor:0.8", "img2img"},
                                                                 {"none", "refiner"},
                                                                 {"watercolor:0.8+detail:-0.5", "txt2img"}}))
      << stats->dump(1);
  EXPECT_FALSE(parse_stats_options(json{{"group_by", "loras"}}).ok());
}

// group_by vae names the decode a job asked for ("auto" when it left it to
// the precision), shared the jobs of its UNet batch; the parity table keeps
// jobs of another decode in a row of their own.
TEST(RunStatsTest, RunsGroupByDecodePrecisionAndSharedBatch) {
  std::vector<db::RunRow> rows(4);
  rows[0].batch_size = 1;
  rows[1].batch_size = 4;
  rows[2].batch_size = 4;
  rows[2].vae_precision = "bf16";
  rows[3].vae_precision = "fp32";  // no result: no batch size
  std::vector<RunSample> samples;
  for (const auto& r : rows) samples.push_back(RunSample{&r, {{"denoise", 10.0}, {"total", 12.0}}, {}});
  auto parsed = parse_stats_options(json{{"group_by", "vae,shared"}});
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  auto stats = compute_stats(samples, *parsed);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  std::set<std::pair<std::string, std::string>> keys;
  for (const auto& g : (*stats)["groups"])
    keys.emplace(g["key"]["vae"].get<std::string>(), g["key"]["shared"].get<std::string>());
  EXPECT_EQ(keys, (std::set<std::pair<std::string, std::string>>{
                      {"auto", "1"}, {"auto", "4"}, {"bf16", "4"}, {"fp32", "?"}}))
      << stats->dump(1);
  const json parity = parity_table(rows);
  std::set<std::string> decodes;
  for (const auto& p : parity) decodes.insert(p.value("vae_precision", std::string("auto")));
  EXPECT_EQ(decodes, (std::set<std::string>{"auto", "bf16", "fp32"})) << parity.dump(1);
}

}  // namespace
}  // namespace hipq::coordinator::query
