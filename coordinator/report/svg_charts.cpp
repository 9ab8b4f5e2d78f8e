#include "coordinator/report/svg_charts.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/number_format.h"
#include "coordinator/statistics/descriptive.h"

namespace hipq::coordinator::report {

namespace st = hipq::coordinator::statistics;

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* series_colour(size_t index) {
  static const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
  return kPalette[index % (sizeof kPalette / sizeof kPalette[0])];
}

namespace {

std::string num(double v, int prec = 4) { return format_significant(v, prec); }
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// "Nice" axis ticks covering [lo, hi].
std::vector<double> ticks(double lo, double hi, int target = 6) {
  if (!(hi > lo)) {
    hi = lo + 1;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> t;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) t.push_back(v);
  return t;
}

// A tick's label with as many decimals as the tick spacing needs, so close
// ticks never print alike (395.65, 395.70, not 395.7, 395.7).
std::string tick_text(double v, const std::vector<double>& all) {
  const double step = all.size() > 1 ? all[1] - all[0] : 0.0;
  int decimals = 0;
  if (step > 0) {
    decimals = std::max(0, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    const double scaled = step * std::pow(10.0, decimals);
    if (std::fabs(scaled - std::round(scaled)) > 1e-6) ++decimals;  // 2.5 x 10^k
  }
  if (std::fabs(v) < step * 1e-9) v = 0.0;  // no "-0"
  if (std::fabs(v) >= 1e6 || decimals > 6) return num(v, 6);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

struct Axis {
  double lo, hi, x0, x1;
  double map(double v) const { return x0 + (v - lo) / (hi - lo) * (x1 - x0); }
};

Axis padded_axis(double lo, double hi, double x0, double x1) {
  if (!(hi > lo)) {
    const double pad = std::max(std::fabs(lo) * 0.05, 1e-3);
    return {lo - pad, hi + pad, x0, x1};
  }
  const double pad = (hi - lo) * 0.05;
  return {lo - pad, hi + pad, x0, x1};
}

std::string x_axis(const Axis& ax, double y, double grid_top, const std::string& unit) {
  std::string s;
  const std::vector<double> all = ticks(ax.lo, ax.hi);
  for (double t : all) {
    const double x = ax.map(t);
    s += "<line x1=\"" + px(x) + "\" y1=\"" + px(grid_top) + "\" x2=\"" + px(x) + "\" y2=\"" + px(y) +
         "\" class=\"grid\"/>";
    s += "<text x=\"" + px(x) + "\" y=\"" + px(y + 14) + "\" class=\"tick\" text-anchor=\"middle\">" +
         tick_text(t, all) + "</text>";
  }
  s += "<text x=\"" + px((ax.x0 + ax.x1) / 2) + "\" y=\"" + px(y + 30) + "\" class=\"axis\" text-anchor=\"middle\">" +
       html_escape(unit) + "</text>";
  return s;
}

}  // namespace

std::string box_plot_svg(const std::vector<BoxSeries>& series, const std::string& title, const std::string& unit) {
  // The label column grows with the longest label (about 6.3 px per character
  // at the label font size) so GPU names are never clipped.
  size_t longest = 0;
  for (const auto& s : series) longest = std::max(longest, s.label.size() + 8);
  const double left = std::clamp(10.0 + 6.3 * static_cast<double>(longest), 120.0, 330.0);
  const double width = 620, right = 20, row_h = 34, top = 28;
  const double height = top + row_h * static_cast<double>(series.size()) + 40;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : series) {
    for (double v : s.values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  std::string svg = "<svg class=\"chart box\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) +
                    "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                    "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">";
  svg += "<text x=\"8\" y=\"18\" class=\"title\">" + html_escape(title) + "</text>";
  if (!std::isfinite(lo)) return svg + "<text x=\"8\" y=\"48\">no data</text></svg>";
  const Axis ax = padded_axis(lo, hi, left, width - right);
  const double axis_y = top + row_h * static_cast<double>(series.size()) + 4;
  svg += x_axis(ax, axis_y, top, unit);
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const double cy = top + row_h * (static_cast<double>(i) + 0.5);
    svg += "<text x=\"" + px(left - 8) + "\" y=\"" + px(cy + 4) + "\" class=\"label\" text-anchor=\"end\">" +
           html_escape(s.label) + " (n=" + std::to_string(s.values.size()) + ")</text>";
    if (s.values.empty()) continue;
    std::vector<double> v = s.values;
    std::sort(v.begin(), v.end());
    const double q1 = st::quantile_sorted(v, 0.25), med = st::quantile_sorted(v, 0.5),
                 q3 = st::quantile_sorted(v, 0.75), iqr = q3 - q1;
    const double lo_fence = q1 - 1.5 * iqr, hi_fence = q3 + 1.5 * iqr;
    double wlo = q1, whi = q3;
    for (double x : v) {
      if (x >= lo_fence) {
        wlo = x;
        break;
      }
    }
    for (auto it = v.rbegin(); it != v.rend(); ++it) {
      if (*it <= hi_fence) {
        whi = *it;
        break;
      }
    }
    const char* c = series_colour(s.colour);
    const double bh = row_h * 0.55;
    svg += "<g class=\"series\" data-label=\"" + html_escape(s.label) + "\" data-median=\"" + num(med, 8) + "\">";
    svg += "<title>" + html_escape(s.label) + ": median " + num(med) + ", IQR " + num(q1) + "-" + num(q3) + " " +
           html_escape(unit) + "</title>";
    svg += "<line x1=\"" + px(ax.map(wlo)) + "\" y1=\"" + px(cy) + "\" x2=\"" + px(ax.map(whi)) + "\" y2=\"" +
           px(cy) + "\" stroke=\"" + c + "\"/>";
    for (double w : {wlo, whi}) {
      svg += "<line x1=\"" + px(ax.map(w)) + "\" y1=\"" + px(cy - bh / 3) + "\" x2=\"" + px(ax.map(w)) +
             "\" y2=\"" + px(cy + bh / 3) + "\" stroke=\"" + c + "\"/>";
    }
    svg += "<rect x=\"" + px(ax.map(q1)) + "\" y=\"" + px(cy - bh / 2) + "\" width=\"" +
           px(std::max(1.0, ax.map(q3) - ax.map(q1))) + "\" height=\"" + px(bh) + "\" fill=\"" + c +
           "\" fill-opacity=\"0.25\" stroke=\"" + c + "\"/>";
    svg += "<line x1=\"" + px(ax.map(med)) + "\" y1=\"" + px(cy - bh / 2) + "\" x2=\"" + px(ax.map(med)) +
           "\" y2=\"" + px(cy + bh / 2) + "\" stroke=\"" + c + "\" stroke-width=\"2.5\"/>";
    for (double x : v) {
      if (x < lo_fence || x > hi_fence) {
        svg += "<circle cx=\"" + px(ax.map(x)) + "\" cy=\"" + px(cy) + "\" r=\"3\" fill=\"none\" stroke=\"" +
               std::string(c) + "\" class=\"outlier\"/>";
      }
    }
    svg += "</g>";
  }
  return svg + "</svg>";
}

std::string histogram_svg(const std::vector<double>& values, const std::string& title, const std::string& subtitle,
                          const std::string& unit, size_t colour) {
  const double width = 320, height = 204, left = 36, right = 10, top = 40, bottom = 40;
  std::string svg = "<svg class=\"chart hist\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) +
                    "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                    "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">";
  svg += "<text x=\"4\" y=\"15\" class=\"title small\">" + html_escape(title) + "</text>";
  svg += "<text x=\"4\" y=\"30\" class=\"label\">" + html_escape(subtitle) + "</text>";
  if (values.empty()) return svg + "<text x=\"8\" y=\"48\">no data</text></svg>";
  std::vector<double> v = values;
  std::sort(v.begin(), v.end());
  const double lo = v.front(), hi = v.back();
  const double iqr = st::quantile_sorted(v, 0.75) - st::quantile_sorted(v, 0.25);
  size_t bins;
  if (iqr > 0 && hi > lo) {
    const double h = 2.0 * iqr / std::cbrt(static_cast<double>(v.size()));
    bins = static_cast<size_t>(std::ceil((hi - lo) / h));
  } else {
    bins = static_cast<size_t>(std::ceil(std::log2(static_cast<double>(v.size())) + 1));
  }
  bins = std::clamp<size_t>(bins, 5, 40);
  const double span = hi > lo ? hi - lo : std::max(std::fabs(lo) * 0.01, 1e-3);
  const double b0 = hi > lo ? lo : lo - span / 2;
  std::vector<size_t> counts(bins, 0);
  for (double x : v) {
    size_t b = static_cast<size_t>((x - b0) / span * static_cast<double>(bins));
    counts[std::min(b, bins - 1)]++;
  }
  const size_t cmax = *std::max_element(counts.begin(), counts.end());
  const Axis ax{b0, b0 + span, left, width - right};
  const double plot_h = height - top - bottom;
  svg += x_axis(ax, height - bottom, top, unit);
  svg += "<text x=\"" + px(left - 4) + "\" y=\"" + px(top + 8) + "\" class=\"tick\" text-anchor=\"end\">" +
         std::to_string(cmax) + "</text>";
  const double bw = (width - right - left) / static_cast<double>(bins);
  for (size_t b = 0; b < bins; ++b) {
    const double h = cmax ? plot_h * static_cast<double>(counts[b]) / static_cast<double>(cmax) : 0;
    svg += "<rect x=\"" + px(left + bw * static_cast<double>(b) + 0.5) + "\" y=\"" + px(top + plot_h - h) +
           "\" width=\"" + px(std::max(0.5, bw - 1)) + "\" height=\"" + px(h) + "\" fill=\"" +
           series_colour(colour) + "\" fill-opacity=\"0.7\"><title>" + std::to_string(counts[b]) + "</title></rect>";
  }
  return svg + "</svg>";
}

std::string trace_svg(const std::vector<TraceSeries>& series, const std::string& title, const std::string& unit) {
  const double width = 900, height = 280, left = 56, right = 260, top = 28, bottom = 40;
  std::string svg = "<svg class=\"chart trace\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) +
                    "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                    "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">";
  svg += "<text x=\"8\" y=\"18\" class=\"title\">" + html_escape(title) + "</text>";
  double lo = INFINITY, hi = -INFINITY;
  size_t steps = 0;
  for (const auto& s : series) {
    steps = std::max(steps, s.median.size());
    for (const auto* arr : {&s.low, &s.high, &s.median}) {
      for (double v : *arr) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (steps == 0 || !std::isfinite(lo)) return svg + "<text x=\"8\" y=\"48\">no step timings</text></svg>";
  const Axis xa{0, static_cast<double>(std::max<size_t>(steps - 1, 1)), left, width - right};
  const Axis ya = padded_axis(lo, hi, height - bottom, top);  // inverted: larger values up
  const std::vector<double> yticks = ticks(ya.lo, ya.hi, 5);
  for (double t : yticks) {
    const double y = ya.map(t);
    svg += "<line x1=\"" + px(left) + "\" y1=\"" + px(y) + "\" x2=\"" + px(width - right) + "\" y2=\"" + px(y) +
           "\" class=\"grid\"/><text x=\"" + px(left - 4) + "\" y=\"" + px(y + 4) +
           "\" class=\"tick\" text-anchor=\"end\">" + tick_text(t, yticks) + "</text>";
  }
  for (double t : ticks(0, xa.hi, std::min<int>(10, static_cast<int>(steps)))) {
    if (t != std::floor(t)) continue;
    svg += "<text x=\"" + px(xa.map(t)) + "\" y=\"" + px(height - bottom + 14) +
           "\" class=\"tick\" text-anchor=\"middle\">" + num(t) + "</text>";
  }
  svg += "<text x=\"" + px((left + width - right) / 2) + "\" y=\"" + px(height - 8) +
         "\" class=\"axis\" text-anchor=\"middle\">denoising step</text>";
  svg += "<text x=\"12\" y=\"" + px((top + height - bottom) / 2) + "\" class=\"axis\" transform=\"rotate(-90 12 " +
         px((top + height - bottom) / 2) + ")\" text-anchor=\"middle\">" + html_escape(unit) + "</text>";
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* c = series_colour(s.colour);
    std::string band, line;
    for (size_t k = 0; k < s.high.size(); ++k) {
      band += (k ? " L" : "M") + px(xa.map(static_cast<double>(k))) + " " + px(ya.map(s.high[k]));
    }
    for (size_t k = s.low.size(); k-- > 0;) band += " L" + px(xa.map(static_cast<double>(k))) + " " + px(ya.map(s.low[k]));
    for (size_t k = 0; k < s.median.size(); ++k) {
      line += (k ? " L" : "M") + px(xa.map(static_cast<double>(k))) + " " + px(ya.map(s.median[k]));
    }
    svg += "<g class=\"series\" data-label=\"" + html_escape(s.label) + "\">";
    if (!band.empty()) svg += "<path d=\"" + band + " Z\" fill=\"" + std::string(c) + "\" fill-opacity=\"0.15\"/>";
    svg += "<path d=\"" + line + "\" fill=\"none\" stroke=\"" + std::string(c) + "\" stroke-width=\"2\"" +
           (s.dashed ? " stroke-dasharray=\"6 4\"" : "") + "/>";
    svg += "</g>";
    const double ly = top + 14 + 18 * static_cast<double>(i);
    svg += "<line x1=\"" + px(width - right + 8) + "\" y1=\"" + px(ly - 3) + "\" x2=\"" + px(width - right + 24) +
           "\" y2=\"" + px(ly - 3) + "\" stroke=\"" + std::string(c) + "\" stroke-width=\"3\"" +
           (s.dashed ? " stroke-dasharray=\"4 2\"" : "") + "/><text x=\"" + px(width - right + 29) + "\" y=\"" + px(ly + 1) +
           "\" class=\"label\">" + html_escape(s.label) + "</text>";
  }
  return svg + "</svg>";
}

std::string timeline_svg(const std::vector<std::string>& point_labels, const std::vector<TimelineSeries>& series,
                         const std::string& title, const std::string& unit) {
  const double width = 1000, height = 320, left = 64, right = 150, top = 28, bottom = 70;
  std::string svg = "<svg class=\"chart timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" + px(width) +
                    "\" height=\"" + px(height) + "\" viewBox=\"0 0 " + px(width) + " " + px(height) +
                    "\" role=\"img\" aria-label=\"" + html_escape(title) + "\">";
  svg += "<text x=\"8\" y=\"18\" class=\"title\">" + html_escape(title) + "</text>";
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& s : series)
    for (double v : s.values)
      if (std::isfinite(v) && v > 0) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  const size_t n = point_labels.size();
  if (n == 0 || !std::isfinite(lo)) return svg + "<text x=\"8\" y=\"48\">no timings</text></svg>";
  // Whole decades around the data; 2 and 5 marks too when it spans under three.
  const double dlo = std::floor(std::log10(lo)), dhi = std::max(dlo + 1, std::ceil(std::log10(hi)));
  const Axis ya{dlo, dhi, height - bottom, top};
  const Axis xa{0, static_cast<double>(std::max<size_t>(n - 1, 1)), left + 10, width - right - 10};
  for (double d = dlo; d <= dhi + 1e-9; d += 1) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && dhi - dlo >= 3) continue;
      const double v = m * std::pow(10.0, d);
      const double lv = std::log10(v);
      if (lv > dhi + 1e-9) continue;
      const double y = ya.map(lv);
      svg += "<line x1=\"" + px(left) + "\" y1=\"" + px(y) + "\" x2=\"" + px(width - right) + "\" y2=\"" + px(y) +
             "\" class=\"grid\"/><text x=\"" + px(left - 4) + "\" y=\"" + px(y + 4) +
             "\" class=\"tick\" text-anchor=\"end\">" + num(v, 6) + "</text>";
    }
  }
  // At most ~16 x labels, rotated so long ones fit.
  const size_t every = std::max<size_t>(1, (n + 15) / 16);
  for (size_t i = 0; i < n; i += every) {
    const double x = xa.map(static_cast<double>(n == 1 ? 0 : i));
    svg += "<text x=\"" + px(x) + "\" y=\"" + px(height - bottom + 12) + "\" class=\"tick\" text-anchor=\"end\" " +
           "transform=\"rotate(-35 " + px(x) + " " + px(height - bottom + 12) + ")\">" + html_escape(point_labels[i]) +
           "</text>";
  }
  svg += "<text x=\"12\" y=\"" + px((top + height - bottom) / 2) + "\" class=\"axis\" transform=\"rotate(-90 12 " +
         px((top + height - bottom) / 2) + ")\" text-anchor=\"middle\">" + html_escape(unit) + " (log scale)</text>";
  for (size_t si = 0; si < series.size(); ++si) {
    const auto& s = series[si];
    const std::string c = series_colour(s.colour);
    std::string path, dots;
    bool pen = false;
    for (size_t i = 0; i < s.values.size() && i < n; ++i) {
      const double v = s.values[i];
      if (!std::isfinite(v) || v <= 0) {
        pen = false;
        continue;
      }
      const double x = xa.map(static_cast<double>(i)), y = ya.map(std::log10(v));
      path += (pen ? " L" : " M") + px(x) + " " + px(y);
      pen = true;
      dots += "<circle cx=\"" + px(x) + "\" cy=\"" + px(y) + "\" r=\"3\" fill=\"" + c + "\"><title>" +
              html_escape(s.label + " · " + point_labels[i] + ": " + num(v, 5) + " " + unit) + "</title></circle>";
    }
    svg += "<g class=\"series\" data-label=\"" + html_escape(s.label) + "\">";
    if (!path.empty()) svg += "<path d=\"" + path.substr(1) + "\" fill=\"none\" stroke=\"" + c + "\" stroke-width=\"2\"/>";
    svg += dots + "</g>";
    const double ly = top + 14 + 18 * static_cast<double>(si);
    svg += "<line x1=\"" + px(width - right + 8) + "\" y1=\"" + px(ly - 3) + "\" x2=\"" + px(width - right + 24) +
           "\" y2=\"" + px(ly - 3) + "\" stroke=\"" + c + "\" stroke-width=\"3\"/><text x=\"" + px(width - right + 29) +
           "\" y=\"" + px(ly + 1) + "\" class=\"label\">" + html_escape(s.label) + "</text>";
  }
  return svg + "</svg>";
}

}  // namespace hipq::coordinator::report
