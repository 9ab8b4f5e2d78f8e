// hipq drain WORKER | --all: let a worker (or every worker) finish its job
// and leave.
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/queue_options.h"
#include "coordinator/client.h"

namespace hipq::cli {

void add_drain_command(CLI::App& app, int& exit_code) {
  struct Flags {
    ConnectOptions conn;
    std::string worker_id;
    bool all = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd = app.add_subcommand("drain", "Let a worker finish its job and leave (--all: every worker)");
  add_connect_options(cmd, flags->conn);
  cmd->add_option("worker", flags->worker_id, "worker id (see `hipq workers`)");
  cmd->add_flag("--all", flags->all, "drain every connected worker");
  cmd->callback([flags, &exit_code] {
    if (flags->worker_id.empty() != flags->all) {
      std::cerr << "hipq drain: give a worker id or --all\n";
      exit_code = kExitUsage;
      return;
    }
    zmq::context_t ctx;
    auto client = connect_client(ctx, flags->conn);
    if (!client.ok()) return void(exit_code = client_failure(client.status()));
    auto reply = (*client)->drain(flags->worker_id);
    if (!reply.ok()) return void(exit_code = client_failure(reply.status()));
    std::cout << reply->draining() << " worker(s) draining\n";
  });
}

}  // namespace hipq::cli
