#include "coordinator/report/svg_charts.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hipq::coordinator::report {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(SvgChartsTest, EscapesText) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
}

TEST(SvgChartsTest, BoxPlotHasOneSeriesPerInputWithItsMedianAndOutliers) {
  std::vector<BoxSeries> s{{"gpu <A>", {10, 11, 12, 13, 14, 50}, 0}, {"gpu B", {20, 21, 22}, 1}};
  const std::string svg = box_plot_svg(s, "denoise", "ms");
  EXPECT_EQ(count(svg, "<g class=\"series\""), 2u);
  EXPECT_NE(svg.find("data-median=\"12.5\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("data-median=\"21\""), std::string::npos);
  EXPECT_EQ(count(svg, "class=\"outlier\""), 1u);  // 50 is beyond q3 + 1.5 IQR
  EXPECT_NE(svg.find("gpu &lt;A&gt; (n=6)"), std::string::npos);
  EXPECT_EQ(svg.find("<A>"), std::string::npos) << "labels must be escaped";
}

TEST(SvgChartsTest, CloseTicksGetDistinctLabels) {
  // Two cold loads 0.09 ms apart: the axis spans 395.67..395.76, and every tick
  // label must differ (the %.4g labels used to print 395.7 four times).
  std::vector<BoxSeries> s{{"cold", {395.67, 395.76}, 0}};
  const std::string svg = box_plot_svg(s, "load", "ms");
  std::vector<std::string> labels;
  const std::string open = "class=\"tick\" text-anchor=\"middle\">";
  for (size_t p = svg.find(open); p != std::string::npos; p = svg.find(open, p + 1)) {
    const size_t b = p + open.size();
    labels.push_back(svg.substr(b, svg.find('<', b) - b));
  }
  ASSERT_GE(labels.size(), 3u) << svg;
  for (size_t i = 1; i < labels.size(); ++i) EXPECT_NE(labels[i], labels[i - 1]) << svg;
  EXPECT_NE(std::find(labels.begin(), labels.end(), "395.70"), labels.end()) << svg;
}

TEST(SvgChartsTest, HistogramBarsCountEveryValue) {
  std::vector<double> v;
  for (int i = 0; i < 100; ++i) v.push_back(100 + (i % 10));
  const std::string svg = histogram_svg(v, "step", "gpu", "ms", 0);
  size_t total = 0;
  for (size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) {
    total += std::stoul(svg.substr(p + 7));
  }
  EXPECT_EQ(total, 100u);
  EXPECT_NE(histogram_svg({}, "empty", "", "ms", 0).find("no data"), std::string::npos);
  EXPECT_NE(histogram_svg({5, 5, 5}, "flat", "", "ms", 0).find("<rect"), std::string::npos);
}

TEST(SvgChartsTest, TraceDrawsABandAndALinePerSeries) {
  std::vector<TraceSeries> t{{"A", {1, 2, 3}, {0.5, 1.5, 2.5}, {1.5, 2.5, 3.5}, 0, false},
                             {"B", {2, 2, 2}, {2, 2, 2}, {2, 2, 2}, 1, true}};
  const std::string svg = trace_svg(t, "steps", "ms");
  EXPECT_EQ(count(svg, "<g class=\"series\""), 2u);
  EXPECT_EQ(count(svg, "<path"), 4u);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 2u);  // B is cold: its line and its legend
  EXPECT_NE(trace_svg({}, "none", "ms").find("no step timings"), std::string::npos);
}

}  // namespace
}  // namespace hipq::coordinator::report
