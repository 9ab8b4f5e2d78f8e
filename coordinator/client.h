// Client: the calls `hipq submit/status/cancel/workers/drain/query` make to a
// coordinator, over one DEALER socket (request id echoed in the reply).
//
// Each call sends one request and waits up to `timeout` for its reply;
// replies to earlier, timed-out requests are recognised by id and skipped.
// Errors: Unavailable when no coordinator answers in time (the message names
// the endpoint and what to check); the coordinator's own errors come back
// with their code (InvalidArgument for a manifest it refused, NotFound for
// an unknown batch/job/worker, FailedPrecondition for cancelling a finished
// batch).
// Ownership: owns its socket, borrows the context. Thread safety: one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "base/result.h"
#include "proto/hipq.pb.h"
#include "proto/protocol.h"
#include "proto/transport.h"

namespace hipq::coordinator {

struct ClientOptions {
  std::string endpoint = proto::kDefaultEndpoint;
  std::optional<proto::CurveClientKeys> curve;
  std::chrono::milliseconds timeout{10000};
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> connect(zmq::context_t& context, ClientOptions options);

  // Sends the manifest's verbatim text and absolute path (the coordinator
  // parses it again and queues it whole).
  Result<proto::SubmitReply> submit(const std::filesystem::path& manifest, std::optional<int> priority = std::nullopt);
  // batch_id 0 = every batch.
  Result<proto::StatusReply> status(int64_t batch_id = 0, bool active_only = false);
  Result<proto::CancelReply> cancel_batch(int64_t batch_id);
  Result<proto::CancelReply> cancel_job(int64_t job_id);
  Result<proto::WorkersReply> workers();
  // worker_id "" = every worker.
  Result<proto::DrainReply> drain(const std::string& worker_id);
  Result<nlohmann::json> query(const std::string& kind, const nlohmann::json& args);

  const std::string& endpoint() const { return options_.endpoint; }

 private:
  Client(zmq::socket_t socket, ClientOptions options) : socket_(std::move(socket)), options_(std::move(options)) {}
  Result<proto::Envelope> call(proto::Envelope request, proto::Envelope::BodyCase expected);

  zmq::socket_t socket_;
  ClientOptions options_;
  uint64_t next_request_id_ = 1;
};

// Maps a code name from an ErrorReply ("InvalidArgument") back to a Status.
Status status_from_wire(const std::string& code, const std::string& message);

}  // namespace hipq::coordinator
