// hipq status [BATCH]: jobs per batch by state and verdict, with the first
// failure's reason, as a coordinator counts them; table or JSON.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/batch_progress.h"
#include "cli/commands.h"
#include "cli/queue_options.h"
#include "coordinator/client.h"

namespace hipq::cli {

namespace {

nlohmann::json batch_json(const proto::BatchStatus& b) {
  nlohmann::json j = {{"batch_id", b.batch_id()},
                      {"name", b.name()},
                      {"state", b.state()},
                      {"priority", b.priority()},
                      {"total", b.total()},
                      {"created_at", b.created_at()},
                      {"by_state", nlohmann::json::object()},
                      {"by_verdict", nlohmann::json::object()}};
  if (b.finished_at() > 0) j["finished_at"] = b.finished_at();
  j["reason"] = b.reason();
  for (const auto& e : b.by_state()) j["by_state"][e.key()] = e.count();
  for (const auto& e : b.by_verdict()) j["by_verdict"][e.key()] = e.count();
  return j;
}

}  // namespace

void add_status_command(CLI::App& app, int& exit_code) {
  struct Flags {
    ConnectOptions conn;
    std::string batch;
    std::string format = "table";
    bool active = false;
  };
  auto flags = std::make_shared<Flags>();
  auto* cmd =
      app.add_subcommand("status", "Jobs per batch by state and verdict, with the first failure's reason");
  add_connect_options(cmd, flags->conn);
  cmd->add_option("batch", flags->batch, "batch id, batch:ID or batch name (default: every batch)");
  cmd->add_option("--format", flags->format, "table | json")->check(CLI::IsMember({"table", "json"}));
  cmd->add_flag("--active", flags->active, "only batches still running");
  cmd->callback([flags, &exit_code] {
    const std::string& batch = flags->batch;
    zmq::context_t ctx;
    auto client = connect_client(ctx, flags->conn);
    if (!client.ok()) return void(exit_code = client_failure(client.status()));
    std::optional<int64_t> id;
    if (!batch.empty()) id = parse_id(batch.rfind("batch:", 0) == 0 ? batch.substr(6) : batch);
    auto reply = (*client)->status(id.value_or(0), flags->active);
    if (!reply.ok()) return void(exit_code = client_failure(reply.status()));
    if (!batch.empty() && !id) {
      // A name: every batch of that name, oldest first.
      proto::StatusReply named;
      for (const auto& b : reply->batches()) {
        if (b.name() == batch) *named.add_batches() = b;
      }
      if (named.batches_size() == 0) {
        std::cerr << "hipq status: no batch named \"" << batch
                  << "\" (a batch id, batch:ID or a batch name)\n";
        return void(exit_code = kExitUsage);
      }
      *reply = named;
    }
    if (flags->format == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& b : reply->batches()) j.push_back(batch_json(b));
      std::cout << nlohmann::json{{"batches", j}}.dump(2) << "\n";
    } else {
      print_batch_table({reply->batches().begin(), reply->batches().end()}, std::cout);
    }
  });
}

}  // namespace hipq::cli
