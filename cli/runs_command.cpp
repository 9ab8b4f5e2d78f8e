// hipq runs: run history with filters; table (default), CSV or JSON.
#include <iostream>

#include "cli/commands.h"
#include "cli/query_cli.h"
#include "spec/phases.h"

namespace hipq::cli {

using nlohmann::json;

namespace {


std::string short_text(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
  return s.substr(0, cut) + "…";
}

void print_runs(const json& runs, const std::string& format, bool print_header = true) {
  if (format == "json") {
    std::cout << runs.dump(1) << "\n";
    return;
  }
  if (format == "csv") {
    std::vector<std::string> header{"job", "batch", "state", "verdict", "model", "prompt", "tags", "seed", "repeat",
                                    "width", "height", "steps", "guidance", "sampler", "precision", "attempts",
                                    "worker", "host", "gpu", "arch", "build", "backend", "warm", "cosine", "max_abs",
                                    "rel_l2", "psnr", "peak_memory_bytes", "batch_size", "time", "total_ms"};
    for (const std::string& p : spec::job_phases()) {
      header.push_back(p + "_host_ms");
      header.push_back(p + "_gpu_ms");
    }
    header.push_back("error");
    if (print_header) std::cout << csv_line(header);
    for (const auto& r : runs) {
      std::string tags;
      for (const auto& t : r["tags"]) tags += (tags.empty() ? "" : ";") + t.get<std::string>();
      std::vector<std::string> f{fmt_text(r["job"]),     fmt_text(r["batch"]),   fmt_text(r["state"]),
                                 fmt_text(r["verdict"]), fmt_text(r["model"]),   fmt_text(r["prompt"]),
                                 tags,                   fmt_text(r["seed"]),    fmt_text(r["repeat"]),
                                 fmt_text(r["width"]),   fmt_text(r["height"]),  fmt_text(r["steps"]),
                                 fmt_text(r["guidance"]), fmt_text(r["sampler"]), fmt_text(r["precision"]),
                                 fmt_text(r["attempts"]), fmt_text(r["worker"]), fmt_text(r["host"]),
                                 fmt_text(r["gpu"]),     fmt_text(r["arch"]),    fmt_text(r["build"]),
                                 fmt_text(r["backend"]), fmt_text(r["warm"]),    fmt_text(r["cosine"]),
                                 fmt_text(r["max_abs"]), fmt_text(r["rel_l2"]),  fmt_text(r["psnr"]),
                                 fmt_text(r["peak_memory_bytes"]), fmt_text(r["batch_size"]), fmt_time(r["time"]),
                                 fmt_text(r["total_ms"])};
      for (const std::string& p : spec::job_phases()) {
        const json ph = r["phases"].contains(p) ? r["phases"][p] : json::object();
        f.push_back(ph.contains("host_ms") ? fmt_text(ph["host_ms"]) : "");
        f.push_back(ph.contains("gpu_ms") && !ph["gpu_ms"].is_null() ? fmt_text(ph["gpu_ms"]) : "");
      }
      f.push_back(r["error"].is_null() ? "" : fmt_text(r["error"]));
      for (auto& x : f) {
        if (x == "-") x.clear();
      }
      std::cout << csv_line(f);
    }
    return;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : runs) {
    std::string reason = r["error"].is_string() && r["state"] != "done" ? short_text(r["error"].get<std::string>(), 40) : "-";
    for (char& c : reason) {
      if (c == '\n' || c == '\t') c = ' ';
    }
    rows.push_back({fmt_text(r["job"]), fmt_text(r["batch"]), fmt_text(r["state"]), reason, fmt_text(r["verdict"]),
                    short_text(fmt_text(r["model"]), 24), short_text(fmt_text(r["prompt"]), 28), fmt_text(r["seed"]),
                    fmt_text(r["repeat"]), fmt_text(r["width"]) + "x" + fmt_text(r["height"]), fmt_text(r["steps"]),
                    fmt_text(r["precision"]), short_text(fmt_text(r["gpu"]), 22), fmt_text(r["host"]),
                    short_text(fmt_text(r["build"]), 10),
                    r["warm"].is_boolean() ? (r["warm"].get<bool>() ? "warm" : "cold") : "-",
                    fmt_fixed(r["cosine"], 5), fmt_gib(r["peak_memory_bytes"]), fmt_text(r["batch_size"]),
                    fmt_fixed(r["total_ms"], 1), fmt_time(r["time"])});
  }
  std::cout << format_table({"job", "batch", "state", "reason", "verdict", "model", "prompt", "seed", "rep", "size", "steps",
                             "prec", "gpu", "host", "build", "warmth", "cosine", "peak GiB", "shared", "total ms",
                             "time (UTC)"},
                            rows,
                            {true, true, false, false, false, false, false, true, true, false, true, false, false, false,
                             false, false, true, true, true, true, false});
  std::cout << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << "\n";
}

}  // namespace

void add_runs_command(CLI::App& app, int& exit_code) {
  struct Flags {
    QueryFlags query;
    FilterFlags filter;
    std::string format = "table";
    int64_t limit = 0;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("runs", "Run history: one line per job, with its worker, GPU, build and timings");
  add_query_flags(cmd, flags->query);
  add_filter_flags(cmd, flags->filter);
  cmd->add_option("--limit", flags->limit, "at most this many runs (0 = all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--format", flags->format, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}));
  cmd->callback([flags, &exit_code] {
    auto target = make_query_target(flags->query);
    if (!target.ok()) {
      exit_code = report_failure(target.status(), "runs");
      return;
    }
    json args = filter_args(flags->filter);
    if (flags->limit == 0 && flags->format == "csv") {
      // Every run, a page at a time: memory stays that of one page however
      // many jobs match (a batch may hold millions).
      constexpr int64_t kPage = 10000;
      args["limit"] = kPage;
      for (bool first = true;; first = false) {
        auto page = coordinator::run_query_at(*target, "runs", args);
        if (!page.ok()) {
          exit_code = report_failure(page.status(), "runs");
          return;
        }
        const json& rows = (*page)["runs"];
        if (!rows.empty() && args.contains("after") && rows.front()["job"].get<int64_t>() <= args["after"].get<int64_t>()) {
          exit_code = report_failure(Status::FailedPrecondition("the coordinator does not page runs (it ignores "
                                                                "\"after\"); use --limit or --db"),
                                     "runs");
          return;
        }
        print_runs(rows, flags->format, first);
        if (static_cast<int64_t>(rows.size()) < kPage) break;
        args["after"] = rows.back()["job"];
      }
      exit_code = kExitOk;
      return;
    }
    if (flags->limit > 0) args["limit"] = flags->limit;
    auto r = coordinator::run_query_at(*target, "runs", args);
    if (!r.ok()) {
      exit_code = report_failure(r.status(), "runs");
      return;
    }
    print_runs((*r)["runs"], flags->format);
    exit_code = kExitOk;
  });
}

}  // namespace hipq::cli
