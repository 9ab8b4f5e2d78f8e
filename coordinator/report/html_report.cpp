#include "coordinator/report/html_report.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

#include "base/number_format.h"
#include "coordinator/report/svg_charts.h"
#include "spec/phases.h"

namespace hipq::coordinator::report {

using nlohmann::json;

namespace {

constexpr char kStyle[] = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
header{background:#1f2a36;color:#fff;padding:18px 28px}
header h1{margin:0;font-size:22px}header p{margin:4px 0 0;color:#c5d0db}
main{padding:8px 24px 40px;max-width:1232px}
section{background:#fff;border:1px solid #dde2e8;border-radius:8px;margin:16px 0;padding:14px 18px;overflow-x:auto}
h2{font-size:17px;margin:2px 0 10px}
table{border-collapse:collapse;font-size:13px}th,td{padding:4px 7px;border-bottom:1px solid #e6e9ee;text-align:right;white-space:nowrap}
td.w{white-space:normal;min-width:12em;max-width:26em;overflow-wrap:anywhere}
table.dense{font-size:12px}table.dense th,table.dense td{padding:3px 5px}
th{background:#f0f3f6;cursor:pointer;position:sticky;top:0}td.l,th.l{text-align:left}
.tiles{display:flex;flex-wrap:wrap;gap:10px}.tile{border:1px solid #dde2e8;border-radius:6px;padding:8px 14px;min-width:110px}
.tile b{display:block;font-size:20px}.tile span{color:#5a6672;font-size:12px}
.PASS{color:#0a7d3b;font-weight:600}.FAIL,.NON_FINITE{color:#b3261e;font-weight:600}.NO_GOLDEN{color:#8a6d00}
.charts{display:flex;flex-wrap:wrap;gap:12px}
svg.chart{background:#fff}svg .grid{stroke:#e3e7ec}svg .tick{font-size:10px;fill:#5a6672}
svg .axis{font-size:11px;fill:#37414b}svg .label{font-size:11px;fill:#1d2329}svg .title{font-size:13px;font-weight:600;fill:#1d2329}
svg .small{font-size:12px}
.thumbs{display:flex;flex-wrap:wrap;gap:10px}.thumbs figure{margin:0;width:170px;font-size:11px}
.thumbs img{display:block;border-radius:4px;border:1px solid #ccd;max-width:160px;image-rendering:auto}
.note{color:#5a6672;font-size:12px}.scroll{max-height:420px;overflow:auto}
.hint{background:#fff8e1;border:1px solid #f0d98c;border-radius:6px;padding:8px 12px;margin:10px 0 0}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;background:#eef1f4;padding:1px 4px;border-radius:3px}
)css";

// Sorts a table when its header is clicked; marks the page as scripted so a
// headless test can tell the script ran.
constexpr char kScript[] = R"js(
document.querySelectorAll('table.sortable th').forEach(function(th){th.addEventListener('click',function(){
var t=th.closest('table'),b=t.tBodies[0],i=Array.prototype.indexOf.call(th.parentNode.children,th),
d=th.dataset.dir==='asc'?-1:1;th.dataset.dir=d>0?'asc':'desc';
Array.from(b.rows).sort(function(x,y){var a=x.cells[i].dataset.v||x.cells[i].textContent,
c=y.cells[i].dataset.v||y.cells[i].textContent,na=parseFloat(a),nc=parseFloat(c);
return (isNaN(na)||isNaN(nc)?a.localeCompare(c):na-nc)*d;}).forEach(function(r){b.appendChild(r);});});});
document.documentElement.setAttribute('data-scripted','1');
)js";

// Numbers as the CLI prints them (base/number_format.h): 14210, not 1.421e+04.
std::string num(double v, int prec = 4) { return format_significant(v, prec); }
std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string jnum(const json& v, int prec = 4) {
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  return v.is_number() ? num(v.get<double>(), prec) : "–";
}
std::string jstr(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}
std::string esc(const json& v) { return html_escape(jstr(v)); }
std::string when(const json& t) {
  if (!t.is_number()) return "–";
  const auto tt = static_cast<std::time_t>(t.get<double>());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}
std::string verdict_cell(const json& v) {
  const std::string s = jstr(v);
  return "<td class=\"l " + html_escape(s) + "\">" + (s.empty() ? "–" : html_escape(s)) + "</td>";
}
std::string tile(const std::string& value, const std::string& label) {
  return "<div class=\"tile\"><b>" + html_escape(value) + "</b><span>" + html_escape(label) + "</span></div>";
}
// A stats group's largest device-memory peak in GiB ("–" when none recorded).
std::string peak_gib_cell(const json& group) {
  const json peak = group.value("memory", json::object()).value("peak_bytes_max", json());
  return peak.is_number() ? fixed(peak.get<double>() / (1024.0 * 1024.0 * 1024.0), 2) : "–";  // as `hipq stats`
}

std::string phase_title(const std::string& p) {
  if (p == spec::kPhaseStep) return "denoising step";
  if (p == spec::kPhaseTextEncode) return "text encode";
  if (p == spec::kPhaseTotal) return "total per image";
  return p;
}

Status require(const json& data, const char* key) {
  if (!data.contains(key)) {
    return Status::InvalidArgument(std::string("report data lacks \"") + key +
                                   "\"; produce it with the report-data query (same hipq version)");
  }
  return Status::Ok();
}

// When every verdict of the batch is NO_GOLDEN: how to make goldens of it.
std::string no_golden_hint(const json& b) {
  const json& v = b.value("by_verdict", json::object());
  int64_t all = 0, none = 0;
  for (const auto& [verdict, n] : v.items()) {
    all += n.get<int64_t>();
    if (verdict == "NO_GOLDEN") none += n.get<int64_t>();
  }
  if (all == 0 || none != all) return "";
  const std::string id = std::to_string(b.value("id", 0));
  return "<p class=\"hint\" id=\"no-golden\">No job of this batch had a golden to compare with (every verdict is "
         "NO_GOLDEN). Once its images look right, pin them as goldens with <code>hipq golden promote batch:" + id +
         "</code> (or <code>hipq golden import DIR</code> for goldens made elsewhere, e.g. by "
         "<code>tools/golden/make_goldens.py</code>); the next run of the same manifest is then judged PASS or FAIL. "
         "See docs/golden-format.md.</p>";
}

std::string summary_section(const json& b, const json& data) {
  std::string h = "<section id=\"summary\"><h2>Batch summary</h2><div class=\"tiles\">";
  h += tile(std::to_string(b.value("total", 0)), "jobs");
  for (const auto& [state, n] : b["by_state"].items()) {
    if (n.get<int64_t>() > 0) h += tile(std::to_string(n.get<int64_t>()), state);
  }
  for (const auto& [verdict, n] : b["by_verdict"].items()) h += tile(std::to_string(n.get<int64_t>()), verdict);
  h += tile(std::to_string(data["workers"].size()), "workers");
  h += "</div><table><tbody>";
  h += "<tr><th class=\"l\">batch</th><td class=\"l\">" + std::to_string(b.value("id", 0)) + " " + esc(b["name"]) +
       " (" + esc(b["state"]) + ")</td></tr>";
  h += "<tr><th class=\"l\">manifest</th><td class=\"l\">" + esc(b["manifest_path"]) + " · sha256 " +
       html_escape(jstr(b["manifest"]).substr(0, 16)) + "…</td></tr>";
  h += "<tr><th class=\"l\">output root</th><td class=\"l\">" + esc(b["output_root"]) + "</td></tr>";
  h += "<tr><th class=\"l\">created</th><td class=\"l\">" + when(b["created_at"]) + "</td></tr>";
  h += "<tr><th class=\"l\">finished</th><td class=\"l\">" + when(b["finished_at"]) + "</td></tr>";
  h += "</tbody></table>";
  h += no_golden_hint(b);
  return h + "</section>";
}

std::string workers_section(const json& workers) {
  std::string h = "<section id=\"workers\"><h2>Workers</h2><table class=\"sortable\"><thead><tr>"
                  "<th class=\"l\">worker</th><th class=\"l\">host</th><th class=\"l\">GPU</th><th class=\"l\">arch</th>"
                  "<th class=\"l\">build</th><th class=\"l\">backend</th><th class=\"l\">runtime</th>"
                  "<th class=\"l\">driver</th></tr></thead><tbody>";
  for (const auto& w : workers) {
    h += "<tr><td class=\"l\">" + esc(w["worker"]) + "</td><td class=\"l\">" + esc(w["host"]) +
         "</td><td class=\"l\">" + esc(w["gpu"]) + "</td><td class=\"l\">" + esc(w["arch"]) + "</td><td class=\"l\">" +
         esc(w["build"]) + "</td><td class=\"l\">" + esc(w["backend"]) + "</td><td class=\"l\">" +
         esc(w["runtime_version"]) + "</td><td class=\"l\">" + esc(w["driver_version"]) + "</td></tr>";
  }
  return h + "</tbody></table></section>";
}

// Across batches and builds: one line per phase over time (asv's timeline),
// and the numbers beneath. Only when the database holds two points or more.
std::string history_section(const json& history, int64_t this_batch) {
  if (!history.is_array() || history.size() < 2) return "";
  std::vector<std::string> labels;
  std::map<std::string, std::vector<double>> by_phase;
  std::vector<std::string> phases;
  std::vector<std::string> shown{std::string(spec::kPhaseTotal)};
  shown.insert(shown.end(), spec::job_phases().begin(), spec::job_phases().end());
  for (const std::string& p : shown) {
    bool any = false;
    for (const auto& pt : history) any = any || pt["phases"].contains(p);
    if (any) phases.push_back(p);
  }
  for (const auto& pt : history) {
    std::string build = jstr(pt["build"]).substr(0, 7);
    labels.push_back("#" + jnum(pt["batch"]) + " " + build);
    for (const auto& p : phases) {
      by_phase[p].push_back(pt["phases"].contains(p) ? pt["phases"][p].get<double>() : NAN);
    }
  }
  std::vector<TimelineSeries> series;
  for (size_t i = 0; i < phases.size(); ++i) series.push_back({phase_title(phases[i]), by_phase[phases[i]], i});
  std::string h = "<section id=\"history\"><h2>History across batches and builds</h2><p class=\"note\">Median "
                  "host time of each phase per batch and build (newest 50 batches of the database, oldest first); "
                  "hover a point for its value; in the table, this report's batch is marked ◀.</p>";
  h += timeline_svg(labels, series, "median per phase over time", "ms");
  h += "<div class=\"scroll\"><table class=\"sortable dense\"><thead><tr><th>batch</th><th class=\"l\">name</th>"
       "<th class=\"l\">build</th><th class=\"l\">time</th><th>runs</th>";
  for (const auto& p : phases) h += "<th>" + html_escape(phase_title(p)) + "</th>";
  h += "</tr></thead><tbody>";
  for (const auto& pt : history) {
    const bool here = pt.value("batch", int64_t{0}) == this_batch;
    h += "<tr><td>" + jnum(pt["batch"]) + (here ? " ◀" : "") + "</td><td class=\"l\">" + esc(pt["name"]) +
         "</td><td class=\"l\">" + html_escape(jstr(pt["build"]).substr(0, 12)) + "</td><td class=\"l\">" +
         when(pt["time"]) + "</td><td>" + jnum(pt["runs"]) + "</td>";
    for (const auto& p : phases) h += "<td>" + (pt["phases"].contains(p) ? jnum(pt["phases"][p], 5) : "–") + "</td>";
    h += "</tr>";
  }
  return h + "</tbody></table></div></section>";
}

// Under the statistics table when a group's phase had more values than the
// reservoir keeps (report-data "sample"): which numbers are exact.
std::string sampled_note(const json& data) {
  size_t kept = 0, groups = 0;
  for (const auto& g : data["stats"]["groups"]) {
    for (const auto& p : g["phases"]) {
      if (!p.contains("sample")) continue;
      ++groups;
      kept = p["sample"].value("values", size_t{0});
    }
  }
  if (groups == 0) return "";
  return "<p class=\"note\" id=\"sampled\">" + std::to_string(groups) +
         " row(s) had more values than the report keeps per GPU, warmth and phase: their n, mean, sd, min, max and "
         "throughput are exact; the percentiles, the median interval, the outlier counts (scaled to n) and the "
         "charts come from a uniform sample of " + std::to_string(kept) +
         " values (fixed seed: the same batch gives the same page).</p>";
}

// Above the runs table when the batch had more runs than the table lists.
std::string runs_table_note(const json& data, const json& b) {
  if (!data.contains("runs_table") || !data["runs_table"].is_object()) return "";
  const json& t = data["runs_table"];
  const bool ranked = t.value("worst_by_parity", 0) > 0;
  return "<p class=\"note\" id=\"runs-capped\">This batch has " + jnum(t["total"], 20) +
         " runs, more than the " + jnum(t["cap"], 20) + " this table lists in full: it shows " +
         jnum(t["shown"], 20) + " of them, " +
         (ranked ? "the " + jnum(t["worst_by_parity"], 20) +
                       " worst by parity (NON_FINITE, FAIL, failed or dead, then lowest cosine) and "
                 : std::string()) +
         "the " + jnum(t["slowest"], 20) + " slowest (total ms), in job order" +
         (ranked ? std::string() : std::string(" (no run had a verdict, a cosine or an error to rank by parity)")) +
         "; the other " + jnum(t["not_shown"], 20) +
         " are counted in the summary and statistics above. Every run: <code>hipq runs --batch " +
         std::to_string(b.value("id", 0)) + " --format csv</code>.</p>";
}

}  // namespace

const char* report_style() { return kStyle; }

Result<std::string> render_html_report(const json& data) {
  for (const char* k : {"batch", "workers", "stats", "samples", "step_traces", "parity", "runs", "thumbnails"}) {
    HIPQ_RETURN_IF_ERROR(require(data, k));
  }
  try {
    const json& b = data["batch"];
    // A stable colour per GPU across every chart.
    std::map<std::string, size_t> colour;
    for (const auto& s : data["samples"]) colour.emplace(jstr(s["gpu"]), colour.size());
    for (const auto& t : data["step_traces"]) colour.emplace(jstr(t["gpu"]), colour.size());

    std::string h;
    h += "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">";
    h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
         "script-src 'unsafe-inline'; img-src data:\">";
    h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">";
    h += "<title>hipq report: batch " + std::to_string(b.value("id", 0)) + " " + esc(b["name"]) + "</title>";
    h += "<style>" + std::string(kStyle) + "</style></head><body>";
    h += "<header><h1>hipq report — batch " + std::to_string(b.value("id", 0)) + " “" + esc(b["name"]) +
         "”</h1><p>generated " + when(data.value("generated_at", json(nullptr))) +
         " · timings in milliseconds on the host clock · quantiles: numpy linear · median CI: bootstrap 95% (" +
         jnum(data["stats"].value("resamples", json(nullptr))) + " resamples)</p></header><main>";
    h += summary_section(b, data);
    h += workers_section(data["workers"]);

    // Box plots: one chart per phase, one box per (GPU, warmth).
    h += "<section id=\"distributions\"><h2>Distributions per phase and GPU</h2><p class=\"note\">Box: quartiles; "
         "line: median; whiskers: furthest values within 1.5 IQR; circles: outliers (Tukey). Warm and cold runs "
         "(model load) are separate rows.</p><div class=\"charts\">";
    std::map<std::string, std::vector<BoxSeries>> boxes;
    std::vector<std::string> phase_order;
    for (const auto& s : data["samples"]) {
      const std::string phase = jstr(s["phase"]);
      if (!boxes.count(phase)) phase_order.push_back(phase);
      boxes[phase].push_back({jstr(s["gpu"]) + " · " + jstr(s["warmth"]), s["values"].get<std::vector<double>>(),
                              colour[jstr(s["gpu"])]});
    }
    for (const auto& phase : phase_order) h += box_plot_svg(boxes[phase], phase_title(phase), "ms");
    if (phase_order.empty()) h += "<p>No timings recorded in this batch yet.</p>";
    h += "</div></section>";

    h += "<section id=\"histograms\"><h2>Histograms</h2><div class=\"charts\">";
    size_t skipped = 0;
    for (const auto& s : data["samples"]) {
      const std::string phase = jstr(s["phase"]);
      if (phase != spec::kPhaseDenoise && phase != spec::kPhaseStep && phase != spec::kPhaseTotal) continue;
      if (s["values"].size() < 2) {  // one value has no distribution to draw
        ++skipped;
        continue;
      }
      // "of": the values are a uniform sample of that many (report-data, bounded memory).
      const std::string n = s.contains("of") ? jnum(s["of"]) + ", sample of " + std::to_string(s["values"].size())
                                             : std::to_string(s["values"].size());
      h += histogram_svg(s["values"].get<std::vector<double>>(), phase_title(phase),
                         jstr(s["gpu"]) + " · " + jstr(s["warmth"]) + " · n=" + n, "ms", colour[jstr(s["gpu"])]);
    }
    h += "</div>";
    if (skipped > 0) {
      h += "<p class=\"note\">" + std::to_string(skipped) +
           " histogram(s) left out: their GPU and warmth have a single value (n = 1); the value is in the "
           "statistics table.</p>";
    }
    h += "</section>";

    h += "<section id=\"step-traces\"><h2>Step-time traces</h2><p class=\"note\">Median time of each denoising "
         "step across runs; the band spans the 10th to 90th percentile.</p>";
    std::vector<TraceSeries> traces;
    for (const auto& t : data["step_traces"]) {
      traces.push_back({jstr(t["gpu"]) + " · " + jstr(t["warmth"]) + " (" + jnum(t["runs"]) + ")",
                        t["median"].get<std::vector<double>>(), t["low"].get<std::vector<double>>(),
                        t["high"].get<std::vector<double>>(), colour[jstr(t["gpu"])], jstr(t["warmth"]) == "cold"});
    }
    h += trace_svg(traces, "step time by step index", "ms") + "</section>";

    h += "<section id=\"stats\"><h2>Statistics per GPU and phase</h2><div class=\"scroll\"><table class=\"sortable dense\">"
         "<thead><tr><th class=\"l\">GPU</th><th class=\"l\">runs</th><th class=\"l\">phase</th><th>n</th><th>mean</th>"
         "<th>sd</th><th>min</th><th>p50</th><th>p50 95% CI</th><th>p90</th><th>p95</th><th>p99</th><th>max</th>"
         "<th>outliers</th><th>steps/s</th><th>images/h</th><th>peak GiB</th></tr></thead><tbody>";
    for (const auto& g : data["stats"]["groups"]) {
      const std::string gpu = g["key"].contains("gpu") ? jstr(g["key"]["gpu"]) : "all";
      for (const auto& p : g["phases"]) {
        const auto& o = p["outliers"];
        const int64_t outl = o.value("low_severe", 0) + o.value("low_mild", 0) + o.value("high_mild", 0) +
                             o.value("high_severe", 0);
        h += "<tr><td class=\"l\">" + html_escape(gpu) + "</td><td class=\"l\">" + esc(g["warmth"]) + " (" +
             jnum(g["runs"]) + ")</td><td class=\"l\">" + html_escape(phase_title(jstr(p["phase"]))) + "</td><td>" +
             jnum(p["n"]) + "</td><td>" + jnum(p["mean"]) + "</td><td>" + jnum(p["sd"], 3) + "</td><td>" +
             jnum(p["min"]) + "</td><td><b>" + jnum(p["p50"]) + "</b></td><td>" + jnum(p["median_ci"][0]) + "–" +
             jnum(p["median_ci"][1]) + "</td><td>" + jnum(p["p90"]) + "</td><td>" + jnum(p["p95"]) + "</td><td>" +
             jnum(p["p99"]) + "</td><td>" + jnum(p["max"]) + "</td><td data-v=\"" + std::to_string(outl) + "\">" +
             (outl ? std::to_string(outl) + " (" + std::to_string(o.value("high_severe", 0) + o.value("low_severe", 0)) +
                         " severe)"
                   : "0") +
             "</td><td>" + jnum(g["throughput"]["steps_per_s"]) + "</td><td>" +
             jnum(g["throughput"]["images_per_hour"]) + "</td><td>" + peak_gib_cell(g) + "</td></tr>";
      }
    }
    h += "</tbody></table></div>";
    h += sampled_note(data);
    h += "</section>";

    h += "<section id=\"parity\"><h2>Parity across seeds</h2><table class=\"sortable dense\"><thead><tr>"
         "<th class=\"l\">prompt</th><th class=\"l\">settings</th><th>seeds</th><th>runs</th><th>cos min</th>"
         "<th>cos mean</th><th>cos max</th><th>pass rate</th><th>no golden</th><th class=\"l\">worst job</th></tr>"
         "</thead><tbody>";
    for (const auto& p : data["parity"]) {
      std::string worst = "–";
      if (p["worst"].is_object()) {
        worst = "job " + jnum(p["worst"]["job"], 12) + " · seed " + jnum(p["worst"]["seed"], 20) + " · " +
                (p["worst"]["cosine"].is_number() ? fixed(p["worst"]["cosine"].get<double>(), 6) : "–") + " " +
                jstr(p["worst"]["verdict"]);
      }
      h += "<tr><td class=\"l w\">" + esc(p["prompt"]) + "</td><td class=\"l w\">" + esc(p["model"]) + " " +
           jnum(p["width"]) + "×" + jnum(p["height"]) + " " + jnum(p["steps"]) + " steps " + esc(p["sampler"]) +
           " " + esc(p["precision"]) + "</td><td>" + jnum(p["seeds"]) + "</td><td>" + jnum(p["runs"]) + "</td><td>" +
           (p["cosine_min"].is_number() ? fixed(p["cosine_min"].get<double>(), 6) : "–") + "</td><td>" +
           (p["cosine_mean"].is_number() ? fixed(p["cosine_mean"].get<double>(), 6) : "–") + "</td><td>" +
           (p["cosine_max"].is_number() ? fixed(p["cosine_max"].get<double>(), 6) : "–") + "</td><td>" +
           (p["pass_rate"].is_number() ? fixed(100.0 * p["pass_rate"].get<double>(), 1) + "%" : "–") + "</td><td>" +
           jnum(p["no_golden"]) + "</td><td class=\"l\">" + html_escape(worst) + "</td></tr>";
    }
    h += "</tbody></table></section>";

    h += "<section id=\"thumbnails\"><h2>Images</h2>";
    if (data["thumbnails"].empty()) {
      h += "<p class=\"note\">No PNG outputs were readable where the report was made";
      if (data.value("thumbnail_errors", 0) > 0) h += " (" + jnum(data["thumbnail_errors"]) + " unreadable)";
      h += ".</p>";
    }
    h += "<div class=\"thumbs\">";
    for (const auto& t : data["thumbnails"]) {
      const std::string uri = jstr(t["uri"]);
      if (uri.rfind("data:image/png;base64,", 0) != 0) continue;  // only embedded images, never a URL
      h += "<figure><img alt=\"job " + jnum(t["job"], 12) + "\" src=\"" + uri + "\"><figcaption>job " +
           jnum(t["job"], 12) + " · seed " + jnum(t["seed"], 20) + " · r" + jnum(t["repeat"]) + " <span class=\"" +
           esc(t["verdict"]) + "\">" + esc(t["verdict"]) + "</span><br>" + esc(t["prompt"]) + "</figcaption></figure>";
    }
    h += "</div></section>";

    h += history_section(data.value("history", json::array()), b.value("id", 0));

    h += "<section id=\"runs\"><h2>Runs</h2>" + runs_table_note(data, b) + "<div class=\"scroll\"><table class=\"sortable dense\"><thead><tr><th>job</th>"
         "<th class=\"l\">prompt</th><th>seed</th><th>repeat</th><th class=\"l\">state</th><th class=\"l\">verdict</th>"
         "<th>cosine</th><th class=\"l\">GPU</th><th class=\"l\">warm</th><th>total ms</th><th class=\"l\">error</th>"
         "</tr></thead><tbody>";
    for (const auto& r : data["runs"]) {
      h += "<tr><td>" + jnum(r["job"], 12) + "</td><td class=\"l w\">" + esc(r["prompt"]) + "</td><td>" +
           jnum(r["seed"], 20) + "</td><td>" + jnum(r["repeat"]) + "</td><td class=\"l\">" + esc(r["state"]) +
           "</td>" + verdict_cell(r["verdict"]) + "<td>" +
           (r["cosine"].is_number() ? fixed(r["cosine"].get<double>(), 6) : "–") + "</td><td class=\"l\">" +
           esc(r["gpu"]) + "</td><td class=\"l\">" +
           (r["warm"].is_boolean() ? (r["warm"].get<bool>() ? "warm" : "cold") : "–") + "</td><td>" +
           jnum(r["total_ms"], 6) + "</td><td class=\"l w\">" + esc(r["error"]) + "</td></tr>";
    }
    h += "</tbody></table></div></section>";
    h += "</main><script>" + std::string(kScript) + "</script></body></html>\n";
    return h;
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("report data is malformed: ") + e.what());
  }
}

}  // namespace hipq::coordinator::report
