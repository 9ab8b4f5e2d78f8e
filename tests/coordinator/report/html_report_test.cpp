#include "coordinator/report/html_report.h"

#include <gtest/gtest.h>

namespace hipq::coordinator::report {
namespace {

using nlohmann::json;

// Report data as the report-data query shapes it, written by hand.
json sample_data() {
  json stats_group = {{"key", {{"gpu", "NVIDIA H200"}}},
                      {"warmth", "warm"},
                      {"runs", 3},
                      {"throughput", {{"steps_per_s", 10.0}, {"images_per_hour", 3600.0}}},
                      {"memory", {{"runs", 3}, {"peak_bytes_max", 11521519360LL}, {"peak_bytes_p50", 11521519360.0}}},
                      {"phases",
                       json::array({{{"phase", "denoise"}, {"n", 3}, {"mean", 801.0}, {"sd", 1.0}, {"min", 800.0},
                                     {"p50", 801.0}, {"p90", 801.8}, {"p95", 801.9}, {"p99", 801.98}, {"max", 802.0},
                                     {"median_ci", {800.0, 802.0}},
                                     {"outliers", {{"low_severe", 0}, {"low_mild", 0}, {"high_mild", 0},
                                                   {"high_severe", 0}}}}})}};
  return json{
      {"batch",
       {{"id", 7}, {"name", "nightly <b>"}, {"state", "done"}, {"manifest", std::string(64, 'c')},
        {"manifest_path", "examples/nightly.yaml"}, {"output_root", "/srv/out"}, {"created_at", 1790000000.0},
        {"finished_at", 1790000100.0}, {"total", 3}, {"by_state", {{"done", 3}, {"queued", 0}}},
        {"by_verdict", {{"PASS", 2}, {"FAIL", 1}}}}},
      {"workers", json::array({{{"worker", "boxa/0"}, {"host", "boxa"}, {"gpu", "NVIDIA H200"}, {"arch", "sm_90"},
                                {"build", "abc1234"}, {"backend", "hip"}, {"runtime_version", "13.0"},
                                {"driver_version", "580"}}})},
      {"stats", {{"resamples", 2000}, {"groups", json::array({stats_group})}}},
      {"samples", json::array({{{"gpu", "NVIDIA H200"}, {"warmth", "warm"}, {"phase", "denoise"},
                                {"values", {800.0, 801.0, 802.0}}}})},
      {"step_traces", json::array({{{"gpu", "NVIDIA H200"}, {"warmth", "warm"}, {"runs", 3},
                                    {"median", {100.0, 101.0}}, {"low", {99.0, 100.0}}, {"high", {101.0, 102.0}}}})},
      {"parity", json::array({{{"prompt", "a fox & a hound"}, {"model", "m"}, {"width", 64}, {"height", 64},
                               {"steps", 2}, {"sampler", "euler"}, {"precision", "fp32"}, {"seeds", 3}, {"runs", 3},
                               {"cosine_min", 0.9971}, {"cosine_mean", 0.9990}, {"cosine_max", 0.9998},
                               {"pass_rate", 2.0 / 3.0}, {"no_golden", 0},
                               {"worst", {{"job", 3}, {"seed", 1002}, {"cosine", 0.9971}, {"verdict", "FAIL"}}}}})},
      {"runs", json::array({{{"job", 3}, {"prompt", "a fox & a hound"}, {"seed", 1002}, {"repeat", 0},
                             {"state", "done"}, {"verdict", "FAIL"}, {"cosine", 0.9971}, {"gpu", "NVIDIA H200"},
                             {"warm", true}, {"total_ms", 900.0}, {"error", nullptr}}})},
      {"thumbnails", json::array({{{"job", 3}, {"prompt", "p"}, {"seed", 1002}, {"repeat", 0}, {"verdict", "FAIL"},
                                   {"uri", "data:image/png;base64,AAAA"}},
                                  {{"job", 4}, {"prompt", "p"}, {"seed", 1}, {"repeat", 0}, {"verdict", "PASS"},
                                   {"uri", "https://example.invalid/x.png"}}})},
      {"thumbnail_errors", 0},
      {"generated_at", 1790000200.0}};
}

TEST(HtmlReportTest, HasEverySectionTheCspAndEscapedText) {
  auto html = render_html_report(sample_data());
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  for (const char* id : {"summary", "workers", "distributions", "histograms", "step-traces", "stats", "parity",
                         "thumbnails", "runs"}) {
    EXPECT_NE(html->find(std::string("<section id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(html->find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_NE(html->find("nightly &lt;b&gt;"), std::string::npos);
  EXPECT_EQ(html->find("nightly <b>"), std::string::npos);
  EXPECT_NE(html->find("a fox &amp; a hound"), std::string::npos);
  EXPECT_NE(html->find("0.997100"), std::string::npos);
  EXPECT_NE(html->find("66.7%"), std::string::npos);
  EXPECT_NE(html->find("<th>peak GiB</th>"), std::string::npos);
  EXPECT_NE(html->find("<td>10.73</td>"), std::string::npos) << "11521519360 bytes = 10.73 GiB";
  EXPECT_NE(html->find("src=\"data:image/png;base64,AAAA\""), std::string::npos);
}

TEST(HtmlReportTest, NeverReferencesTheNetwork) {
  auto html = render_html_report(sample_data());
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(html->find("example.invalid"), std::string::npos) << "a non-data thumbnail URI must be dropped";
  EXPECT_EQ(html->find("src=\"http"), std::string::npos);
  EXPECT_EQ(html->find("href="), std::string::npos);
  EXPECT_EQ(html->find("url("), std::string::npos);
  EXPECT_EQ(html->find("@import"), std::string::npos);
}

TEST(HtmlReportTest, MissingMemberIsInvalidArgumentNamingIt) {
  json d = sample_data();
  d.erase("step_traces");
  auto html = render_html_report(d);
  EXPECT_EQ(html.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(html.status().message().find("step_traces"), std::string::npos);
  json bad = sample_data();
  bad["samples"][0]["values"] = "oops";
  EXPECT_EQ(render_html_report(bad).status().code(), StatusCode::kInvalidArgument);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(HtmlReportTest, NoHistogramForASingleValue) {
  json d = sample_data();
  d["samples"].push_back({{"gpu", "AMD RX 6800"}, {"warmth", "cold"}, {"phase", "denoise"}, {"values", {14210.3}}});
  auto html = render_html_report(d);
  ASSERT_TRUE(html.ok());
  const std::string section = html->substr(html->find("<section id=\"histograms\""));
  const std::string hist = section.substr(0, section.find("</section>"));
  EXPECT_EQ(count(hist, "<svg"), 1u) << "only the n = 3 series gets a histogram";
  EXPECT_NE(hist.find("1 histogram(s) left out"), std::string::npos) << hist;
}

TEST(HtmlReportTest, NumbersAreWrittenAsTheCliWritesThem) {
  json d = sample_data();
  auto& p = d["stats"]["groups"][0]["phases"][0];
  p["mean"] = 14210.3;
  p["p50"] = 14210.3;
  p["max"] = 142103.7;
  d["stats"]["groups"][0]["throughput"]["images_per_hour"] = 253.38;
  auto html = render_html_report(d);
  ASSERT_TRUE(html.ok());
  EXPECT_EQ(html->find("e+0"), std::string::npos) << "no exponent notation anywhere";
  EXPECT_NE(html->find("<td>14210</td>"), std::string::npos);
  EXPECT_NE(html->find("<b>14210</b>"), std::string::npos);
  EXPECT_NE(html->find("<td>142104</td>"), std::string::npos);
  EXPECT_NE(html->find("<td>253.4</td>"), std::string::npos);
}

TEST(HtmlReportTest, SaysHowToMakeGoldensWhenEveryVerdictIsNoGolden) {
  json d = sample_data();
  EXPECT_EQ(render_html_report(d)->find("id=\"no-golden\""), std::string::npos) << "not when some were judged";
  d["batch"]["by_verdict"] = {{"NO_GOLDEN", 3}};
  auto html = render_html_report(d);
  ASSERT_TRUE(html.ok());
  EXPECT_NE(html->find("id=\"no-golden\""), std::string::npos);
  EXPECT_NE(html->find("<code>hipq golden promote batch:7</code>"), std::string::npos);
}

TEST(HtmlReportTest, HistoryTimelineOnlyWithSeveralBatchesOrBuilds) {
  json d = sample_data();
  d["history"] = json::array({{{"batch", 7}, {"name", "nightly"}, {"build", "abc1234def"}, {"runs", 3},
                               {"time", 1790000050.0}, {"phases", {{"denoise", 801.0}, {"total", 900.0}}}}});
  auto one = render_html_report(d);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->find("id=\"history\""), std::string::npos) << "one point is no history";
  d["history"].insert(d["history"].begin(),
                      json{{"batch", 5}, {"name", "nightly"}, {"build", "0001111aaa"}, {"runs", 3}, {"time", 1789000000.0},
                           {"phases", {{"denoise", 14210.3}, {"total", 15000.0}, {"load", 2.5}}}});
  auto two = render_html_report(d);
  ASSERT_TRUE(two.ok());
  const size_t at = two->find("<section id=\"history\"");
  ASSERT_NE(at, std::string::npos);
  const std::string section = two->substr(at, two->find("</section>", at) - at);
  EXPECT_NE(section.find("<svg class=\"chart timeline\""), std::string::npos);
  EXPECT_EQ(count(section, "<g class=\"series\""), 3u) << "one line per phase: total, load, denoise";
  EXPECT_NE(section.find("#5 0001111"), std::string::npos) << "points labelled by batch and build";
  EXPECT_NE(section.find("<td>14210</td>"), std::string::npos);
  EXPECT_NE(section.find("7 ◀"), std::string::npos) << "this report's batch is marked";
}

}  // namespace
}  // namespace hipq::coordinator::report
