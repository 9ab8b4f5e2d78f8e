// The history commands as a user runs them: the real `hipq` binary on a real
// database filled through JobStore (tests/db/run_history_fixture.h) — every
// output format of runs/stats, compare's verdicts and exit status, report.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/db/run_history_fixture.h"

namespace hipq::cli {
namespace {

using nlohmann::json;

struct Outcome {
  int status = -1;
  std::string out;
};

class HistoryCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override { db::testing::fill_run_history(h_); }

  // Runs `hipq ARGS --db <fixture db>` (without --db when with_db is false).
  Outcome hipq(const std::string& args, bool with_db = true) {
    const std::string cmd =
        std::string(HIPQ_EXE) + " " + args + (with_db ? " --db " + h_.db_path.string() : "") + " 2>&1";
    Outcome r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = ::pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
  }

  static std::vector<std::string> lines(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string l;
    while (std::getline(ss, l)) out.push_back(l);
    return out;
  }
  // Field count of a CSV line (quoted fields may hold commas).
  static size_t csv_fields(const std::string& line) {
    size_t n = 1;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      if (c == ',' && !quoted) ++n;
    }
    return n;
  }

  db::testing::RunHistory h_;
};

TEST_F(HistoryCommandsTest, RunsTableCsvAndJson) {
  Outcome t = hipq("runs");
  ASSERT_EQ(t.status, 0) << t.out;
  EXPECT_NE(t.out.find("14 runs"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(t.out.find("total ms"), std::string::npos);
  for (const char* col : {"prec", "peak GiB", " fp32 ", " 1.25 ", " 1.00 "})
    EXPECT_NE(t.out.find(col), std::string::npos) << col << "\n" << t.out;

  Outcome c = hipq("runs --gpu h200 --format csv");
  ASSERT_EQ(c.status, 0) << c.out;
  auto ls = lines(c.out);
  ASSERT_EQ(ls.size(), 1u + 7u) << c.out;  // header + 6 results + the failed attempt
  EXPECT_EQ(ls[0].rfind("job,batch,state,verdict,model,prompt", 0), 0u);
  for (const auto& l : ls) EXPECT_EQ(csv_fields(l), csv_fields(ls[0])) << l;
  EXPECT_NE(c.out.find("denoise_host_ms"), std::string::npos);

  Outcome j = hipq("runs --verdict fail --format json");
  ASSERT_EQ(j.status, 0) << j.out;
  auto parsed = json::parse(j.out);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0]["verdict"], "FAIL");
  EXPECT_EQ(parsed[0]["seed"], 1002);

  Outcome w = hipq("runs --tag places --seed 1001 --host boxb --warmth warm --format json");
  ASSERT_EQ(w.status, 0) << w.out;
  for (const auto& r : json::parse(w.out)) {
    EXPECT_EQ(r["host"], "boxb");
    EXPECT_EQ(r["seed"], 1001);
  }
  Outcome since = hipq("runs --since 2099-01-01 --format json");
  EXPECT_EQ(json::parse(since.out).size(), 0u);
}

TEST_F(HistoryCommandsTest, StatsTableCsvJsonAndParity) {
  Outcome t = hipq("stats --group-by gpu");
  ASSERT_EQ(t.status, 0) << t.out;
  for (const char* s : {"p50 95% CI", "denoise", "step", "warm", "cold", "steps/s", "images/h", "worst job",
                        "AMD Radeon RX 6800", "peak GiB", " 1.00 ", " 1.25 "}) {
    EXPECT_NE(t.out.find(s), std::string::npos) << s << "\n" << t.out;
  }
  Outcome c = hipq("stats --group-by gpu,host --phase denoise,total --format csv");
  ASSERT_EQ(c.status, 0) << c.out;
  auto ls = lines(c.out);
  ASSERT_EQ(ls.size(), 1u + 4u * 2u) << c.out;  // 4 groups × 2 phases
  EXPECT_EQ(ls[0].rfind("gpu,host,warmth,runs,phase,n,mean,sd", 0), 0u) << ls[0];
  for (const auto& l : ls) EXPECT_EQ(csv_fields(l), csv_fields(ls[0])) << l;
  Outcome j = hipq("stats --group-by model,day --clock gpu --format json");
  ASSERT_EQ(j.status, 0) << j.out;
  auto s = json::parse(j.out);
  EXPECT_EQ(s["clock"], "gpu");
  EXPECT_EQ(s["groups"].size(), 2u);
  Outcome p = hipq("stats --parity");
  ASSERT_EQ(p.status, 0) << p.out;
  EXPECT_NE(p.out.find("83.3% (5/6)"), std::string::npos) << p.out;
  Outcome pc = hipq("stats --parity --format csv");
  EXPECT_EQ(lines(pc.out).size(), 3u) << pc.out;
  Outcome bad = hipq("stats --group-by colour");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("colour"), std::string::npos);
}

TEST_F(HistoryCommandsTest, CompareVerdictsAndExitStatus) {
  Outcome slower = hipq("compare gpu=H200 'gpu=RX 6800' --phase denoise");
  EXPECT_EQ(slower.status, 3) << slower.out;
  EXPECT_NE(slower.out.find("verdict: slower"), std::string::npos) << slower.out;
  Outcome faster = hipq("compare host=boxb host=boxa --phase step");
  EXPECT_EQ(faster.status, 0) << faster.out;
  EXPECT_NE(faster.out.find("verdict: faster"), std::string::npos) << faster.out;
  Outcome same = hipq("compare build=abc gpu=h200 --format json");
  EXPECT_EQ(same.status, 0) << same.out;
  EXPECT_EQ(json::parse(same.out)["verdict"], "no change");
  Outcome few = hipq("compare gpu=H200 gpu=RX --runs cold");
  EXPECT_EQ(few.status, 1) << few.out;
  EXPECT_NE(few.out.find("run more repeats"), std::string::npos) << few.out;
  Outcome usage = hipq("compare nonsense build=x");
  EXPECT_EQ(usage.status, 2) << usage.out;
}

TEST_F(HistoryCommandsTest, ReportWritesOneSelfContainedFile) {
  const auto page = h_.dir / "report.html";
  Outcome r = hipq("report --html " + page.string());
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream in(page);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string html = ss.str();
  EXPECT_NE(html.find("<section id=\"parity\""), std::string::npos);
  EXPECT_NE(html.find("default-src 'none'"), std::string::npos);
  Outcome missing = hipq("report --batch 99 --html " + (h_.dir / "x.html").string());
  EXPECT_EQ(missing.status, 1) << missing.out;
  EXPECT_FALSE(std::filesystem::exists(h_.dir / "x.html"));
}

TEST_F(HistoryCommandsTest, MissingDatabaseIsAClearError) {
  Outcome r = hipq("runs --db " + (h_.dir / "absent.db").string(), false);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hipq::cli
