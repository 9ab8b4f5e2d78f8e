// hipq compare A B: is group B faster or slower than group A?
//
// A and B are selectors: comma-separated key=value run filters, e.g.
//   hipq compare build=abc123 build=def456
//   hipq compare gpu="NVIDIA H200" gpu=gfx1030 --phase denoise
// Exit status (for CI gates): 0 = no change or faster, 3 = slower,
// 1 = the comparison could not be made (too few runs, database error),
// 2 = bad flags or selectors.
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "cli/query_cli.h"
#include "spec/generation_settings.h"
#include "spec/phases.h"

namespace hipq::cli {

using nlohmann::json;

namespace {

constexpr int kExitSlower = 3;

Result<json> parse_selector(const std::string& text, const char* which) {
  static const std::set<std::string> keys{"batch", "manifest", "model", "prompt", "tag",   "seed",  "gpu",
                                          "host",  "build",    "verdict", "state", "since", "until", "warm"};
  json sel = json::object();
  std::string last_key;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string piece = text.substr(start, comma - start);
    const size_t eq = piece.find('=');
    const std::string key = eq == std::string::npos ? "" : piece.substr(0, eq);
    if (eq != std::string::npos && keys.count(key)) {
      last_key = key;
      std::string value = piece.substr(eq + 1);
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
      sel[key] = value;
    } else if (!last_key.empty()) {
      // A comma inside a value (a prompt, say): keep it.
      sel[last_key] = sel[last_key].get<std::string>() + "," + piece;
    } else {
      return Status::InvalidArgument(std::string("selector ") + which + " \"" + text +
                                     "\": expected key=value[,key=value], keys: batch, manifest, model, prompt, tag, "
                                     "seed, gpu, host, build, verdict, state, since, until, warm");
    }
    start = comma + 1;
  }
  if (sel.empty()) return Status::InvalidArgument(std::string("selector ") + which + " is empty");
  return sel;
}

std::string describe(const json& sel) {
  std::string s;
  for (const auto& [k, v] : sel.items()) s += (s.empty() ? "" : ",") + k + "=" + fmt_text(v);
  return s;
}

void print_side(const char* name, const json& side) {
  std::cout << "  " << name << "  " << describe(side["selector"]) << ": " << fmt_text(side["runs"]) << " runs, n = "
            << fmt_text(side["n"]);
  if (side.contains("summary")) {
    const auto& s = side["summary"];
    std::cout << ", median " << fmt_num(s["p50"], 6) << " ms [" << fmt_num(s["median_ci"][0], 6) << ", "
              << fmt_num(s["median_ci"][1], 6) << "], mean " << fmt_num(s["mean"], 6) << ", sd "
              << fmt_num(s["sd"], 3);
  }
  std::cout << "\n";
}

}  // namespace

void add_compare_command(CLI::App& app, int& exit_code) {
  struct Flags {
    QueryFlags query;
    FilterFlags filter;
    std::string a, b;
    std::string phase = "total";
    std::string warmth = "warm";
    std::string clock = "host";
    double threshold = 0.02;
    double alpha = 0.05;
    int resamples = 2000;
    std::string format = "table";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Compare two groups of runs: ratio of medians with a bootstrap CI, Mann-Whitney U, and a verdict. "
      "Exit status: 0 no change or faster, 3 slower, 1 could not compare, 2 usage");
  cmd->add_option("A", flags->a, "baseline selector, e.g. build=abc123 or gpu=\"NVIDIA H200\",batch=3")->required();
  cmd->add_option("B", flags->b, "candidate selector")->required();
  add_query_flags(cmd, flags->query);
  add_filter_flags(cmd, flags->filter);
  cmd->add_option("--phase", flags->phase,
                  "what to compare: " + spec::join_names(spec::statistics_phases(), ", "))
      ->check(CLI::IsMember(spec::statistics_phases()));
  cmd->add_option("--runs", flags->warmth, "warm (default), cold or all runs")
      ->check(CLI::IsMember({"warm", "cold", "all"}));
  cmd->add_option("--clock", flags->clock, "host or gpu")->check(CLI::IsMember({"host", "gpu"}));
  cmd->add_option("--threshold", flags->threshold, "noise band as a fraction (0.02 = ±2%)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--alpha", flags->alpha, "significance level of the test")->check(CLI::Range(1e-9, 0.5));
  cmd->add_option("--resamples", flags->resamples, "bootstrap resamples")->check(CLI::Range(1, 1000000));
  cmd->add_option("--format", flags->format, "table or json")->check(CLI::IsMember({"table", "json"}));
  cmd->callback([flags, &exit_code] {
    auto a = parse_selector(flags->a, "A");
    auto b = a.ok() ? parse_selector(flags->b, "B") : Result<json>(a.status());
    if (!b.ok()) {
      exit_code = report_failure(b.status(), "compare");
      return;
    }
    auto target = make_query_target(flags->query);
    if (!target.ok()) {
      exit_code = report_failure(target.status(), "compare");
      return;
    }
    json args = filter_args(flags->filter);
    args["a"] = *a;
    args["b"] = *b;
    args["phase"] = flags->phase;
    args["warmth"] = flags->warmth;
    args["clock"] = flags->clock;
    args["threshold"] = flags->threshold;
    args["alpha"] = flags->alpha;
    args["resamples"] = flags->resamples;
    auto r = coordinator::run_query_at(*target, "compare", args);
    if (!r.ok()) {
      exit_code = report_failure(r.status(), "compare");
      if (exit_code == kExitUsage && r.status().message().find("need at least") != std::string::npos) {
        exit_code = kExitFailure;
      }
      return;
    }
    const json& c = *r;
    if (flags->format == "json") {
      std::cout << c.dump(1) << "\n";
    } else {
      std::cout << "compare " << fmt_text(c["phase"]) << " (" << fmt_text(c["warmth"]) << " runs, "
                << fmt_text(c["clock"]) << " clock)\n";
      print_side("A", c["a"]);
      print_side("B", c["b"]);
      std::cout << "  B/A = " << fmt_fixed(c["ratio"], 4) << "  95% CI [" << fmt_fixed(c["ratio_ci"][0], 4) << ", "
                << fmt_fixed(c["ratio_ci"][1], 4) << "]  (bootstrap, " << fmt_text(c["resamples"])
                << " resamples)\n";
      std::cout << "  " << fmt_text(c["test"]) << ": U = " << fmt_num(c["u"], 8) << ", p = " << fmt_num(c["p"], 3)
                << "\n";
      std::cout << "verdict: " << fmt_text(c["verdict"]) << " (noise band ±" << fmt_num(json(100.0 * c["threshold"].get<double>()), 3)
                << "%, alpha " << fmt_num(c["alpha"]) << "): " << fmt_text(c["reason"]) << "\n";
    }
    exit_code = c["verdict"] == "slower" ? kExitSlower : kExitOk;
  });
}

}  // namespace hipq::cli
