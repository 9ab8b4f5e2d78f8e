// hipq cancel TARGET: cancel a batch (ID, batch:ID or its name: its active
// batches) or one job (job:ID) on a coordinator.
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/queue_options.h"
#include "coordinator/client.h"

namespace hipq::cli {

void add_cancel_command(CLI::App& app, int& exit_code) {
  struct Flags {
    ConnectOptions conn;
    std::string target;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("cancel", "Cancel a batch (ID, batch:ID or its name) or one job (job:ID)");
  add_connect_options(cmd, flags->conn);
  cmd->add_option("target", flags->target, "batch id, batch:ID, batch name or job:ID")->required();
  cmd->callback([flags, &exit_code] {
    const std::string& target = flags->target;
    bool is_job = target.rfind("job:", 0) == 0;
    bool is_batch = target.rfind("batch:", 0) == 0;
    std::optional<int64_t> id = parse_id(is_job ? target.substr(4) : (is_batch ? target.substr(6) : target));
    if (!id && (is_job || is_batch || target.empty())) {
      std::cerr << "hipq cancel: \"" << target << "\" is not ID, batch:ID, a batch name or job:ID\n";
      exit_code = kExitUsage;
      return;
    }
    zmq::context_t ctx;
    auto client = connect_client(ctx, flags->conn);
    if (!client.ok()) return void(exit_code = client_failure(client.status()));
    std::vector<int64_t> batches;
    if (id && !is_job) batches.push_back(*id);
    if (!id) {
      // A batch name: its active batches.
      auto all = (*client)->status(0, true);
      if (!all.ok()) return void(exit_code = client_failure(all.status()));
      for (const auto& b : all->batches()) {
        if (b.name() == target) batches.push_back(b.batch_id());
      }
      if (batches.empty()) {
        std::cerr << "hipq cancel: no active batch named \"" << target << "\"\n";
        return void(exit_code = kExitUsage);
      }
    }
    int64_t cancelled = 0, notified = 0;
    if (is_job) {
      auto reply = (*client)->cancel_job(*id);
      if (!reply.ok()) return void(exit_code = client_failure(reply.status()));
      cancelled = reply->cancelled();
      notified = reply->running_notified();
    }
    for (int64_t b : batches) {
      auto reply = (*client)->cancel_batch(b);
      if (!reply.ok()) return void(exit_code = client_failure(reply.status()));
      cancelled += reply->cancelled();
      notified += reply->running_notified();
    }
    std::cout << "cancelled " << cancelled << " job(s); " << notified << " running job(s) told to stop\n";
  });
}

}  // namespace hipq::cli
