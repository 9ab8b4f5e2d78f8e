// hipq keygen: a CURVE key pair for a coordinator, worker or client.
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/commands.h"
#include "proto/curve_keys.h"

namespace hipq::cli {

void add_keygen_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("keygen", "Make a CURVE key pair: FILE (secret, mode 0600) and FILE.pub");
  static std::string path;
  static bool force = false;
  cmd->add_option("file", path, "key pair file to write (the public key goes to FILE.pub)")->required();
  cmd->add_flag("--force", force, "replace existing key files");
  cmd->callback([&exit_code] {
    auto keys = proto::generate_curve_key_pair();
    if (!keys.ok()) {
      spdlog::error("{}", keys.status().ToString());
      exit_code = kExitFailure;
      return;
    }
    Status s = proto::write_curve_key_files(path, *keys, force);
    if (!s.ok()) {
      spdlog::error("{}", s.ToString());
      exit_code = s.code() == StatusCode::kAlreadyExists ? kExitUsage : kExitFailure;
      return;
    }
    std::cout << "key pair: " << path << " (keep secret)\npublic key: " << path << ".pub\n"
              << keys->public_key << "\n"
              << "authorize it on the coordinator with a line in its --authorized-keys file:\n  "
              << keys->public_key << " NAME worker,client\n";
  });
}

}  // namespace hipq::cli
