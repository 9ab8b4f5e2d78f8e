// SVG charts for the HTML report, drawn as inline <svg> text (no script, no
// external fonts or images): horizontal box plots, histograms and step-time
// traces, and timelines across batches. Inputs are plain values; labels are
// escaped here. Numbers print as base/number_format.h writes them.
// Box plots: box = quartiles (numpy-linear), line = median, whiskers = the
// furthest values inside Tukey's 1.5 IQR fences, dots = values beyond them.
// Histograms: equal-width bins, count by the Freedman–Diaconis rule (bounded
// to 5..40 bins; Sturges when the IQR is 0).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace hipq::coordinator::report {

std::string html_escape(const std::string& text);
// A fixed, colour-blind-friendly palette, by index (wraps).
const char* series_colour(size_t index);

struct BoxSeries {
  std::string label;
  std::vector<double> values;
  size_t colour = 0;
};
std::string box_plot_svg(const std::vector<BoxSeries>& series, const std::string& title, const std::string& unit);

std::string histogram_svg(const std::vector<double>& values, const std::string& title, const std::string& subtitle,
                          const std::string& unit, size_t colour);

struct TraceSeries {
  std::string label;
  std::vector<double> median, low, high;  // per step
  size_t colour = 0;
  bool dashed = false;  // cold runs: same colour as the GPU's warm line, dashed
};
std::string trace_svg(const std::vector<TraceSeries>& series, const std::string& title, const std::string& unit);

// A timeline (asv's "timeline" view): one line per series over the same
// ordered points (batches, oldest first), y on a log scale so phases of very
// different lengths share one chart. `values[i]` is NaN where series has no
// value at point i (the line breaks there). Each point has a hover title.
struct TimelineSeries {
  std::string label;
  std::vector<double> values;  // one per point
  size_t colour = 0;
};
std::string timeline_svg(const std::vector<std::string>& point_labels, const std::vector<TimelineSeries>& series,
                         const std::string& title, const std::string& unit);

}  // namespace hipq::coordinator::report
