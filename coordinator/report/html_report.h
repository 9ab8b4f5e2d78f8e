// HTML report: renders report data (query/report_data.h, the "report-data" query)
// into one self-contained HTML page — inline CSS, a few lines of inline
// script (table sorting), inline SVG charts and base64 PNG thumbnails. A
// Content-Security-Policy meta tag (default-src 'none') forbids every network
// fetch, so the page opens offline and cannot leak where it is viewed.
//
// Sections (element ids, stable for tests and links): summary, workers,
// distributions (box plots per phase, one box per GPU and warm/cold),
// histograms (denoise and step time per GPU; none for a single value),
// step-traces, stats (per phase table), parity (across seeds), thumbnails,
// history (only when the database holds two batches/builds or more: a
// timeline per phase), runs. Summary holds `no-golden`, the way to make
// goldens, when every verdict is NO_GOLDEN. Numbers print as the CLI prints
// them (base/number_format.h); tables fit a 1280 px wide window, long text
// (prompts, errors) wraps.
//
// Errors: InvalidArgument when the data lacks a required member (names it).
// Thread safety: pure function.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/result.h"

namespace hipq::coordinator::report {

Result<std::string> render_html_report(const nlohmann::json& data);

// The report's style sheet (CSS), for other pages that share its look (the
// coordinator's live status page, coordinator/monitor/status_page.h).
const char* report_style();

}  // namespace hipq::coordinator::report
