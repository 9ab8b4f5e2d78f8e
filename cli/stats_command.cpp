// hipq stats: timing distributions per group and phase, throughput and
// parity across seeds; table (default), CSV or JSON.
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/query_cli.h"

namespace hipq::cli {

using nlohmann::json;

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  return out;
}

int64_t outlier_total(const json& o) {
  return o.value("low_severe", 0) + o.value("low_mild", 0) + o.value("high_mild", 0) + o.value("high_severe", 0);
}

std::string pass_text(const json& p) {
  if (!p["pass_rate"].is_number()) return "-";
  return fmt_fixed(json(100.0 * p["pass_rate"].get<double>()), 1) + "% (" + fmt_text(p["pass"]) + "/" +
         fmt_text(p["gated"]) + ")";
}

void print_stats(const json& s, const std::set<std::string>& phases, const std::string& format) {
  const auto dims = s["group_by"].get<std::vector<std::string>>();
  auto wanted = [&](const json& p) { return phases.empty() || phases.count(p["phase"].get<std::string>()); };
  if (format == "json") {
    std::cout << s.dump(1) << "\n";
    return;
  }
  if (format == "csv") {
    std::vector<std::string> header = dims;
    for (const char* h : {"warmth", "runs", "phase", "n", "mean", "sd", "min", "p50", "p50_ci_low", "p50_ci_high",
                          "p90", "p95", "p99", "max", "outliers_low_severe", "outliers_low_mild", "outliers_high_mild",
                          "outliers_high_severe", "steps_per_s", "images_per_hour", "peak_memory_max_bytes",
                          "pass_rate", "cosine_min", "cosine_mean", "cosine_max", "clock", "unit"}) {
      header.push_back(h);
    }
    std::cout << csv_line(header);
    for (const auto& g : s["groups"]) {
      for (const auto& p : g["phases"]) {
        if (!wanted(p)) continue;
        std::vector<std::string> f;
        for (const auto& d : dims) f.push_back(fmt_text(g["key"][d]));
        const auto& o = p["outliers"];
        for (const json* v : {&g["warmth"], &g["runs"], &p["phase"], &p["n"], &p["mean"], &p["sd"], &p["min"],
                              &p["p50"], &p["median_ci"][0], &p["median_ci"][1], &p["p90"], &p["p95"], &p["p99"],
                              &p["max"], &o["low_severe"], &o["low_mild"], &o["high_mild"], &o["high_severe"],
                              &g["throughput"]["steps_per_s"], &g["throughput"]["images_per_hour"],
                              &g["memory"]["peak_bytes_max"], &g["parity"]["pass_rate"], &g["parity"]["cosine_min"],
                              &g["parity"]["cosine_mean"], &g["parity"]["cosine_max"], &s["clock"], &s["unit"]}) {
          f.push_back(v->is_null() ? "" : fmt_text(*v));
        }
        std::cout << csv_line(f);
      }
    }
    return;
  }
  std::vector<std::string> header = dims;
  for (const char* h : {"warmth", "phase", "n", "mean", "sd", "min", "p50", "p50 95% CI", "p90", "p95", "p99", "max",
                        "outliers"}) {
    header.push_back(h);
  }
  std::vector<bool> right(dims.size() + 2, false);
  for (int i = 0; i < 11; ++i) right.push_back(true);
  std::vector<std::vector<std::string>> rows;
  for (const auto& g : s["groups"]) {
    for (const auto& p : g["phases"]) {
      if (!wanted(p)) continue;
      std::vector<std::string> r;
      for (const auto& d : dims) r.push_back(fmt_text(g["key"][d]));
      const int64_t out = outlier_total(p["outliers"]);
      const int64_t severe = p["outliers"].value("low_severe", 0) + p["outliers"].value("high_severe", 0);
      for (const std::string& c :
           {fmt_text(g["warmth"]), fmt_text(p["phase"]), fmt_num(p["n"]), fmt_num(p["mean"], 5), fmt_num(p["sd"], 3),
            fmt_num(p["min"], 5), fmt_num(p["p50"], 5), fmt_num(p["median_ci"][0], 5) + "-" + fmt_num(p["median_ci"][1], 5),
            fmt_num(p["p90"], 5), fmt_num(p["p95"], 5), fmt_num(p["p99"], 5), fmt_num(p["max"], 5),
            out ? std::to_string(out) + (severe ? " (" + std::to_string(severe) + " severe)" : "") : "0"}) {
        r.push_back(c);
      }
      rows.push_back(std::move(r));
    }
  }
  std::cout << "timings in " << fmt_text(s["unit"]) << " on the " << fmt_text(s["clock"])
            << " clock; quantiles: numpy linear; p50 CI: bootstrap 95%, " << fmt_text(s["resamples"])
            << " resamples; outliers: Tukey fences 1.5/3 IQR\n\n";
  std::cout << format_table(header, rows, right) << "\n";
  // Rows past the reservoir's cap (coordinator/query/value_reservoir.h): say which numbers are sampled.
  for (const auto& g : s["groups"]) {
    bool sampled = false;
    json sample;
    for (const auto& p : g["phases"]) {
      if (p.contains("sample")) {
        sampled = true;
        sample = p["sample"];
      }
    }
    if (sampled) {
      std::cout << "rows with n over " << fmt_text(sample["values"])
                << ": p50..p99, the p50 CI and outliers (scaled to n) come from a fixed-seed uniform sample of "
                << fmt_text(sample["values"]) << " values; n, mean, sd, min, max and throughput are exact\n\n";
      break;
    }
  }

  std::vector<std::string> h2 = dims;
  for (const char* h : {"warmth", "runs", "workers", "steps/s", "images/h", "peak GiB", "seeds", "cos min", "cos mean",
                        "pass", "worst job"}) {
    h2.push_back(h);
  }
  std::vector<bool> right2(dims.size() + 1, false);
  for (int i = 0; i < 9; ++i) right2.push_back(true);
  right2.push_back(false);
  std::vector<std::vector<std::string>> rows2;
  for (const auto& g : s["groups"]) {
    std::vector<std::string> r;
    for (const auto& d : dims) r.push_back(fmt_text(g["key"][d]));
    const auto& par = g["parity"];
    std::string worst = "-";
    if (par["worst"].is_object()) {
      worst = "job " + fmt_text(par["worst"]["job"]) + " seed " + fmt_text(par["worst"]["seed"]) + " " +
              fmt_fixed(par["worst"]["cosine"], 6) + " " + fmt_text(par["worst"]["verdict"]);
    }
    for (const std::string& c : {fmt_text(g["warmth"]), fmt_text(g["runs"]), fmt_text(g["workers"]),
                                 fmt_fixed(g["throughput"]["steps_per_s"], 3),
                                 fmt_fixed(g["throughput"]["images_per_hour"], 1),
                                 fmt_gib(g["memory"]["peak_bytes_max"]), fmt_text(par["seeds"]),
                                 fmt_fixed(par["cosine_min"], 6), fmt_fixed(par["cosine_mean"], 6), pass_text(par),
                                 worst}) {
      r.push_back(c);
    }
    rows2.push_back(std::move(r));
  }
  std::cout << format_table(h2, rows2, right2);
}

void print_parity(const json& rows, const std::string& format) {
  if (format == "json") {
    std::cout << rows.dump(1) << "\n";
    return;
  }
  const std::vector<std::string> header{"model", "prompt", "size", "steps", "sampler", "precision", "seeds", "runs",
                                        "cos min", "cos mean", "cos max", "pass", "no golden", "worst job"};
  std::vector<std::vector<std::string>> out;
  for (const auto& p : rows) {
    std::string worst = "-";
    if (p["worst"].is_object()) {
      worst = "job " + fmt_text(p["worst"]["job"]) + " seed " + fmt_text(p["worst"]["seed"]) + " " +
              fmt_fixed(p["worst"]["cosine"], 6) + " " + fmt_text(p["worst"]["verdict"]);
    }
    out.push_back({fmt_text(p["model"]), fmt_text(p["prompt"]), fmt_text(p["width"]) + "x" + fmt_text(p["height"]),
                   fmt_text(p["steps"]), fmt_text(p["sampler"]), fmt_text(p["precision"]), fmt_text(p["seeds"]),
                   fmt_text(p["runs"]), fmt_fixed(p["cosine_min"], 6), fmt_fixed(p["cosine_mean"], 6),
                   fmt_fixed(p["cosine_max"], 6), pass_text(p), fmt_text(p["no_golden"]), worst});
  }
  if (format == "csv") {
    std::cout << csv_line(header);
    for (const auto& r : out) std::cout << csv_line(r);
    return;
  }
  std::cout << format_table(header, out,
                            {false, false, false, true, false, false, true, true, true, true, true, true, true, false});
}

}  // namespace

void add_stats_command(CLI::App& app, int& exit_code) {
  struct Flags {
    QueryFlags query;
    FilterFlags filter;
    std::string group_by;
    std::string clock = "host";
    std::string phases;
    int resamples = 2000;
    bool parity = false;
    std::string format = "table";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "stats", "Timing distributions per group and phase (n, mean, sd, quantiles, bootstrap CI of the median, "
               "outliers), throughput and parity across seeds");
  add_query_flags(cmd, flags->query);
  add_filter_flags(cmd, flags->filter);
  cmd->add_option("--group-by", flags->group_by,
                  "comma list of: model, resolution, steps, precision, sampler, spacing, guidance, lora (the LoRA set), "
                  "mode (txt2img, img2img, refiner), gpu, host, build, batch, day, "
                  "tag:NAME (the VALUE of the manifest's tags NAME:VALUE, e.g. tag:Category) "
                  "(warm and cold runs are always apart)");
  cmd->add_option("--clock", flags->clock, "host (wall clock) or gpu (device events)")
      ->check(CLI::IsMember({"host", "gpu"}));
  cmd->add_option("--phase", flags->phases,
                  "only these phases (comma list of load, text_encode, image_encode, denoise, step, decode, write, parity, total)");
  cmd->add_option("--resamples", flags->resamples, "bootstrap resamples for the median CI")
      ->check(CLI::Range(1, 1000000));
  cmd->add_flag("--parity", flags->parity, "show parity across seeds (one row per prompt and settings) instead");
  cmd->add_option("--format", flags->format, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}));
  cmd->callback([flags, &exit_code] {
    auto target = make_query_target(flags->query);
    if (!target.ok()) {
      exit_code = report_failure(target.status(), "stats");
      return;
    }
    json args = filter_args(flags->filter);
    if (flags->parity) {
      auto r = coordinator::run_query_at(*target, "parity", args);
      if (!r.ok()) {
        exit_code = report_failure(r.status(), "stats");
        return;
      }
      print_parity((*r)["rows"], flags->format);
      exit_code = kExitOk;
      return;
    }
    args["group_by"] = split_list(flags->group_by);
    args["clock"] = flags->clock;
    args["resamples"] = flags->resamples;
    std::set<std::string> phases;
    for (const auto& p : split_list(flags->phases)) phases.insert(p);
    auto r = coordinator::run_query_at(*target, "stats", args);
    if (!r.ok()) {
      exit_code = report_failure(r.status(), "stats");
      return;
    }
    print_stats(*r, phases, flags->format);
    exit_code = kExitOk;
  });
}

}  // namespace hipq::cli
