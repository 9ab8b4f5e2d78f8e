// hipq report --html FILE [--batch N]: one self-contained HTML page (no
// network fetches) with the batch summary, distributions, step traces, the
// parity table and thumbnails. Written atomically.
#include <iostream>

#include "base/fs.h"
#include "cli/commands.h"
#include "cli/query_cli.h"
#include "coordinator/report/html_report.h"

namespace hipq::cli {

using nlohmann::json;

void add_report_command(CLI::App& app, int& exit_code) {
  struct Flags {
    QueryFlags query;
    std::string html;
    int64_t batch = 0;
    int thumbnails = 24;
    int thumbnail_px = 160;
    int resamples = 2000;
    int runs_table = 1000;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("report", "Write a self-contained HTML report of a batch");
  add_query_flags(cmd, flags->query);
  cmd->add_option("--html", flags->html, "the HTML file to write")->required();
  cmd->add_option("--batch", flags->batch, "batch id (default: the newest)")->check(CLI::PositiveNumber);
  cmd->add_option("--thumbnails", flags->thumbnails, "at most this many image thumbnails (0 = none)")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--thumbnail-px", flags->thumbnail_px, "longer side of a thumbnail")->check(CLI::Range(16, 1024));
  cmd->add_option("--runs-table", flags->runs_table,
                  "list every run up to this many; past it, half as many worst by parity and half slowest")
      ->check(CLI::Range(2, 1000000));
  cmd->add_option("--resamples", flags->resamples, "bootstrap resamples")->check(CLI::Range(1, 1000000));
  cmd->callback([flags, &exit_code] {
    auto target = make_query_target(flags->query);
    if (!target.ok()) {
      exit_code = report_failure(target.status(), "report");
      return;
    }
    json args{{"thumbnails", flags->thumbnails}, {"thumbnail_px", flags->thumbnail_px},
              {"resamples", flags->resamples}, {"runs_table", flags->runs_table}};
    if (flags->batch > 0) args["batch"] = flags->batch;
    auto data = coordinator::run_query_at(*target, "report-data", args);
    if (!data.ok()) {
      exit_code = report_failure(data.status(), "report");
      return;
    }
    auto html = coordinator::report::render_html_report(*data);
    if (!html.ok()) {
      exit_code = report_failure(html.status(), "report");
      return;
    }
    Status w = write_file_atomic(flags->html, *html);
    if (!w.ok()) {
      exit_code = report_failure(w, "report");
      return;
    }
    std::cout << "wrote " << flags->html << " (batch " << (*data)["batch"]["id"] << ", "
              << (*data)["batch"].value("total", int64_t{0}) << " runs"
              << ((*data).contains("runs_table") ? std::string(", ") + std::to_string((*data)["runs"].size()) + " in its table" : "")
              << ", " << (*data)["thumbnails"].size() << " thumbnails, "
              << html->size() / 1024 << " KiB)\n";
    exit_code = kExitOk;
  });
}

}  // namespace hipq::cli
