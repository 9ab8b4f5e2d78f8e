// RawPeer: a bare ZeroMQ DEALER speaking hipq envelopes, for tests that must
// send what no hipq client or worker would: forged hellos, reports for other
// workers' jobs, garbage frames, SubmitRequests that skip client-side checks.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "proto/codec.h"
#include "proto/hipq.pb.h"
#include "proto/transport.h"

namespace hipq::testing {

class RawPeer {
 public:
  explicit RawPeer(const std::string& endpoint, const std::optional<proto::CurveClientKeys>& curve = std::nullopt)
      : socket_(context_, zmq::socket_type::dealer) {
    socket_.set(zmq::sockopt::linger, 0);
    if (curve) {
      EXPECT_TRUE(proto::apply_curve_client(socket_, *curve).ok());
    }
    socket_.connect(endpoint);
  }

  void send(proto::Envelope e, uint32_t version = proto::kProtocolVersion) {
    e.set_version(version);
    send_bytes(e.SerializeAsString());
  }
  void send_bytes(const std::string& bytes) { socket_.send(zmq::buffer(bytes), zmq::send_flags::none); }

  // The next envelope within `timeout` (of body `want` when set; others are
  // skipped), nullopt when none came.
  std::optional<proto::Envelope> recv(std::chrono::milliseconds timeout,
                                      proto::Envelope::BodyCase want = proto::Envelope::BODY_NOT_SET) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(20));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      zmq::message_t m;
      if (!socket_.recv(m, zmq::recv_flags::dontwait)) continue;
      auto e = proto::decode(m.to_string_view());
      if (!e.ok()) continue;
      if (want == proto::Envelope::BODY_NOT_SET || e->body_case() == want) return *e;
    }
    return std::nullopt;
  }

  // A client call: sends and waits for the reply with the same request id.
  std::optional<proto::Envelope> call(proto::Envelope e, std::chrono::milliseconds timeout) {
    e.set_request_id(++request_id_);
    send(e);
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      auto r = recv(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()));
      if (r && r->request_id() == e.request_id()) return r;
    }
    return std::nullopt;
  }

 private:
  zmq::context_t context_;
  zmq::socket_t socket_;
  uint64_t request_id_ = 1000;
};

// Envelopes a forger sends (RawPeer::send sets the version).
inline proto::Envelope hello(const std::string& worker_id, int64_t running_job = 0, int running_attempt = 0) {
  proto::Envelope e;
  auto* h = e.mutable_hello();
  h->set_worker_id(worker_id);
  h->set_host("raw");
  h->set_backend("sleep");
  h->set_device_name("nothing");
  h->set_running_job_id(running_job);
  h->set_running_attempt(running_attempt);
  return e;
}
inline proto::Envelope ready(int credit) {
  proto::Envelope e;
  e.mutable_ready()->set_credit(credit);
  return e;
}
inline proto::Envelope heartbeat(int64_t job = 0, int attempt = 0) {
  proto::Envelope e;
  e.mutable_heartbeat()->set_running_job_id(job);
  e.mutable_heartbeat()->set_running_attempt(attempt);
  return e;
}
inline proto::Envelope pass_result(int64_t job, int attempt, const std::string& output_path) {
  proto::Envelope e;
  auto* r = e.mutable_result();
  r->set_job_id(job);
  r->set_attempt(attempt);
  r->mutable_parity()->set_verdict("PASS");
  auto* o = r->add_outputs();
  o->set_kind("latent");
  o->set_path(output_path);
  o->set_sha256(std::string(64, '0'));
  o->set_bytes(1);
  return e;
}
inline proto::Envelope fatal_error(int64_t job, int attempt) {
  proto::Envelope e;
  e.mutable_error()->set_job_id(job);
  e.mutable_error()->set_attempt(attempt);
  e.mutable_error()->set_code("InvalidArgument");
  e.mutable_error()->set_message("forged");
  e.mutable_error()->set_retryable(false);
  return e;
}

}  // namespace hipq::testing
