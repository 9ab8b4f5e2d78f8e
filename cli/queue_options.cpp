#include "cli/queue_options.h"

#include <chrono>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"

namespace hipq::cli {

void add_connect_options(CLI::App* cmd, ConnectOptions& o) {
  if (const char* e = std::getenv("HIPQ_CONNECT")) o.endpoint = e;
  if (const char* e = std::getenv("HIPQ_KEY")) o.key_file = e;
  if (const char* e = std::getenv("HIPQ_SERVER_KEY")) o.server_key = e;
  cmd->add_option("--connect", o.endpoint, "coordinator endpoint (env HIPQ_CONNECT)")->capture_default_str();
  cmd->add_option("--key", o.key_file,
                  "CURVE key pair file of this client, from `hipq keygen` (env HIPQ_KEY)");
  cmd->add_option("--server-key", o.server_key,
                  "coordinator's public key file or Z85 key (env HIPQ_SERVER_KEY)");
  cmd->add_option("--timeout", o.timeout_s, "seconds to wait for the coordinator's answer")
      ->capture_default_str();
}

Result<std::optional<proto::CurveClientKeys>> curve_client_keys(const ConnectOptions& o) {
  if (o.key_file.empty() && o.server_key.empty()) return std::optional<proto::CurveClientKeys>();
  if (o.key_file.empty() || o.server_key.empty()) {
    return Status::InvalidArgument(
        "CURVE needs both --key (this client's key pair) and --server-key (the "
        "coordinator's public key)");
  }
  HIPQ_ASSIGN_OR_RETURN(proto::CurveKeyPair mine, proto::read_curve_key_file(o.key_file));
  if (mine.secret_key.empty()) {
    return Status::InvalidArgument(o.key_file + ": holds only a public key; --key wants the key pair file");
  }
  HIPQ_ASSIGN_OR_RETURN(std::string server, proto::read_public_key(o.server_key));
  return std::optional<proto::CurveClientKeys>(
      proto::CurveClientKeys{mine.public_key, mine.secret_key, server});
}

Result<std::unique_ptr<coordinator::Client>> connect_client(zmq::context_t& ctx, const ConnectOptions& o) {
  HIPQ_ASSIGN_OR_RETURN(auto keys, curve_client_keys(o));
  coordinator::ClientOptions co;
  co.endpoint = o.endpoint;
  co.curve = keys;
  co.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  return coordinator::Client::connect(ctx, co);
}

int client_failure(const Status& s) {
  std::cerr << "hipq: " << s.ToString() << "\n";
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kNotFound ? kExitUsage
                                                                                       : kExitFailure;
}

std::optional<int64_t> parse_id(const std::string& digits) {
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  int64_t id = std::stoll(digits);
  return id > 0 ? std::optional<int64_t>(id) : std::nullopt;
}

}  // namespace hipq::cli
