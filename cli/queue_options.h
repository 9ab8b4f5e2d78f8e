// Options shared by the queue commands (worker, submit, status, cancel,
// workers, drain): where the coordinator is and the CURVE keys to reach it.
//   --connect tcp://HOST:PORT   (env HIPQ_CONNECT; default tcp://127.0.0.1:5555)
//   --key FILE                  this client's key pair (env HIPQ_KEY)
//   --server-key FILE|KEY       the coordinator's public key (env HIPQ_SERVER_KEY)
//   --timeout SECONDS           how long a client call waits for its answer (default 10)
// Both keys or neither. Thread safety: CLI parsing only.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "base/result.h"
#include "proto/curve_keys.h"
#include "proto/protocol.h"
#include "proto/transport.h"

namespace hipq::cli {

struct ConnectOptions {
  std::string endpoint = proto::kDefaultEndpoint;
  std::string key_file;
  std::string server_key;
  double timeout_s = 10;
};

inline void add_connect_options(CLI::App* cmd, ConnectOptions& o) {
  if (const char* e = std::getenv("HIPQ_CONNECT")) o.endpoint = e;
  if (const char* e = std::getenv("HIPQ_KEY")) o.key_file = e;
  if (const char* e = std::getenv("HIPQ_SERVER_KEY")) o.server_key = e;
  cmd->add_option("--connect", o.endpoint, "coordinator endpoint (env HIPQ_CONNECT)")->capture_default_str();
  cmd->add_option("--key", o.key_file, "CURVE key pair file of this client, from `hipq keygen` (env HIPQ_KEY)");
  cmd->add_option("--server-key", o.server_key, "coordinator's public key file or Z85 key (env HIPQ_SERVER_KEY)");
  cmd->add_option("--timeout", o.timeout_s, "seconds to wait for the coordinator's answer")->capture_default_str();
}

inline Result<std::optional<proto::CurveClientKeys>> curve_client_keys(const ConnectOptions& o) {
  if (o.key_file.empty() && o.server_key.empty()) return std::optional<proto::CurveClientKeys>();
  if (o.key_file.empty() || o.server_key.empty()) {
    return Status::InvalidArgument("CURVE needs both --key (this client's key pair) and --server-key (the "
                                   "coordinator's public key)");
  }
  HIPQ_ASSIGN_OR_RETURN(proto::CurveKeyPair mine, proto::read_curve_key_file(o.key_file));
  if (mine.secret_key.empty()) {
    return Status::InvalidArgument(o.key_file + ": holds only a public key; --key wants the key pair file");
  }
  HIPQ_ASSIGN_OR_RETURN(std::string server, proto::read_public_key(o.server_key));
  return std::optional<proto::CurveClientKeys>(proto::CurveClientKeys{mine.public_key, mine.secret_key, server});
}

}  // namespace hipq::cli
