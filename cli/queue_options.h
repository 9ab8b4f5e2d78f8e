// Options shared by the queue commands (worker, submit, status, cancel,
// workers, drain): where the coordinator is and the CURVE keys to reach it.
//   --connect tcp://HOST:PORT   (env HIPQ_CONNECT; default tcp://127.0.0.1:5555)
//   --key FILE                  this client's key pair (env HIPQ_KEY)
//   --server-key FILE|KEY       the coordinator's public key (env HIPQ_SERVER_KEY)
//   --timeout SECONDS           how long a client call waits for its answer (default 10)
// Both keys or neither. Also what the client commands share when they call a
// coordinator: connecting, batch and job ids, and the exit code of an error.
// Thread safety: CLI parsing only.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/result.h"
#include "coordinator/client.h"
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

// Adds the four flags above to `cmd`; the env values are read here, as defaults.
void add_connect_options(CLI::App* cmd, ConnectOptions& o);

// The CURVE keys the options name; nullopt when neither key is given.
// InvalidArgument when only one is, or --key holds only a public key.
Result<std::optional<proto::CurveClientKeys>> curve_client_keys(const ConnectOptions& o);

// A client of the coordinator the options name (coordinator/client.h).
Result<std::unique_ptr<coordinator::Client>> connect_client(zmq::context_t& ctx, const ConnectOptions& o);

// Prints "hipq: <status>" to stderr; returns kExitUsage for InvalidArgument
// and NotFound (a wrong id or flag), kExitFailure otherwise.
int client_failure(const Status& s);

// A positive decimal id ("12"), or nullopt.
std::optional<int64_t> parse_id(const std::string& digits);

}  // namespace hipq::cli
