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

}  // namespace
}  // namespace hipq::coordinator::report
