// hipq submit MANIFEST: validate a manifest and queue it on a coordinator;
// --wait follows the batch to its end (cli/batch_progress.h).
#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/batch_progress.h"
#include "cli/commands.h"
#include "cli/queue_options.h"
#include "coordinator/client.h"
#include "coordinator/manifest.h"

namespace hipq::cli {

void add_submit_command(CLI::App& app, int& exit_code) {
  struct Flags {
    ConnectOptions conn;
    std::string manifest;
    bool wait = false;
    std::optional<int> priority;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("submit", "Validate a manifest and queue it on a coordinator");
  add_connect_options(cmd, flags->conn);
  cmd->add_option("manifest", flags->manifest, "manifest YAML")->required();
  cmd->add_flag("--wait", flags->wait, "follow the batch until it finishes");
  cmd->add_option("--priority", flags->priority, "override the manifest's priority");
  cmd->callback([flags, &exit_code] {
    // Validate here first: every problem with file:line:column, nothing sent.
    // The batch cap is the coordinator's setting (--max-batch-jobs): it says
    // so itself; here only the most it may be set to is checked.
    auto parsed = coordinator::parse_manifest(flags->manifest, coordinator::kMaxBatchJobsLimit);
    if (!parsed.ok()) {
      std::cerr << parsed.status().message() << "\n"
                << "hipq: " << flags->manifest << " is not valid; nothing was queued\n";
      exit_code = kExitUsage;
      return;
    }
    zmq::context_t ctx;
    auto client = connect_client(ctx, flags->conn);
    if (!client.ok()) return void(exit_code = client_failure(client.status()));
    auto reply = (*client)->submit(flags->manifest, flags->priority);
    if (!reply.ok()) return void(exit_code = client_failure(reply.status()));
    std::cout << "batch " << reply->batch_id() << " \"" << reply->name() << "\": " << reply->jobs()
              << " jobs queued\n";
    if (!flags->wait) return;
    auto final_status = wait_for_batch(**client, reply->batch_id(), isatty(STDOUT_FILENO), std::cout);
    if (!final_status.ok()) return void(exit_code = client_failure(final_status.status()));
    print_batch_table({*final_status}, std::cout);
    int64_t bad = count_of(final_status->by_state(), "failed") + count_of(final_status->by_state(), "dead");
    exit_code = bad > 0 ? kExitFailure : kExitOk;
  });
}

}  // namespace hipq::cli
