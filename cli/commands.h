// Subcommands of the `hipq` binary. Each add_*_command registers one
// subcommand (and its flags) on the app; its callback runs it and returns the
// process exit code through `exit_code`. One file per subcommand,
// cli/<name>_command.cpp, its flags in one struct (docs/checklists.md,
// "Adding a CLI subcommand").
#pragma once

#include <CLI/CLI.hpp>

namespace hipq::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed
inline constexpr int kExitUsage = 2;    // bad flags or input

void add_version_command(CLI::App& app, int& exit_code);
void add_weights_command(CLI::App& app, int& exit_code);
void add_generate_command(CLI::App& app, int& exit_code);
void add_golden_command(CLI::App& app, int& exit_code);
// History and statistics (cli/runs_command.cpp, stats_command.cpp,
// compare_command.cpp, report_command.cpp; shared flags in cli/query_cli.h).
void add_runs_command(CLI::App& app, int& exit_code);
void add_stats_command(CLI::App& app, int& exit_code);
void add_compare_command(CLI::App& app, int& exit_code);
void add_report_command(CLI::App& app, int& exit_code);
void add_coordinator_command(CLI::App& app, int& exit_code);
void add_worker_command(CLI::App& app, int& exit_code);
// Calls to a coordinator (cli/submit_command.cpp, status_command.cpp,
// cancel_command.cpp, workers_command.cpp, drain_command.cpp; shared flags in
// cli/queue_options.h).
void add_submit_command(CLI::App& app, int& exit_code);
void add_status_command(CLI::App& app, int& exit_code);
void add_cancel_command(CLI::App& app, int& exit_code);
void add_workers_command(CLI::App& app, int& exit_code);
void add_drain_command(CLI::App& app, int& exit_code);
void add_run_command(CLI::App& app, int& exit_code);
void add_keygen_command(CLI::App& app, int& exit_code);
void add_check_command(CLI::App& app, int& exit_code);  // validate a manifest
void add_tokenize_command(CLI::App& app, int& exit_code);
void add_randn_command(CLI::App& app, int& exit_code);

}  // namespace hipq::cli
