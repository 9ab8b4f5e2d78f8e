// hipq: batch diffusion jobs on GPUs. One binary, subcommands in cli/*.cpp.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/build_info.h"
#include "cli/commands.h"
#include "cli/conventions.h"

namespace {
void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("hipq");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%P] %v");
  spdlog::set_level(spdlog::level::from_str(level));
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hipq: batch text-to-image diffusion on GPUs, recorded and checked"};
  app.require_subcommand(1);
  // Options a subcommand does not know fall through to here, so
  // `hipq run --log-level debug X` works as `hipq --log-level debug run X`.
  app.fallthrough();
  std::string log_level = "info";
  if (const char* env = std::getenv("HIPQ_LOG")) log_level = env;
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error (env HIPQ_LOG)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.set_version_flag("--version", std::string("hipq ") + hipq::build_info::kVersion + " (" +
                                        hipq::build_info::kGitSha + ")");
  int exit_code = hipq::cli::kExitOk;

  hipq::cli::add_version_command(app, exit_code);
  hipq::cli::add_coordinator_command(app, exit_code);
  hipq::cli::add_worker_command(app, exit_code);
  hipq::cli::add_submit_command(app, exit_code);
  hipq::cli::add_status_command(app, exit_code);
  hipq::cli::add_cancel_command(app, exit_code);
  hipq::cli::add_workers_command(app, exit_code);
  hipq::cli::add_drain_command(app, exit_code);
  hipq::cli::add_run_command(app, exit_code);
  hipq::cli::add_keygen_command(app, exit_code);
  hipq::cli::add_check_command(app, exit_code);
  hipq::cli::add_weights_command(app, exit_code);
  hipq::cli::add_generate_command(app, exit_code);
  hipq::cli::add_golden_command(app, exit_code);
  hipq::cli::add_runs_command(app, exit_code);
  hipq::cli::add_stats_command(app, exit_code);
  hipq::cli::add_compare_command(app, exit_code);
  hipq::cli::add_report_command(app, exit_code);
  hipq::cli::add_tokenize_command(app, exit_code);
  hipq::cli::add_randn_command(app, exit_code);

  hipq::cli::add_help_examples(app);

  app.parse_complete_callback([&] { setup_logging(log_level); });
  std::vector<std::string> args(argv + 1, argv + argc);
  if (int code = hipq::cli::answer_before_parse(app, args); code >= 0) return code;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return hipq::cli::answer_parse_error(app, args, e);
  }
  return exit_code;
}
