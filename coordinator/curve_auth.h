// CurveAuth: the coordinator's ZAP handler (ZeroMQ RFC 27) for CURVE.
//
// A CURVE server without a ZAP handler admits any client that knows the
// server's public key, so the handler is what enforces the allow-list: it
// answers 200 with user id = the key's name for a listed public key and 400
// for anything else (other mechanisms included). The user id then travels
// with every frame of that connection ("User-Id" property) and is what the
// server authorises by.
//
// bind() must happen before any socket with curve_server binds in the same
// context (libzmq looks the handler up when a connection starts).
// Ownership: owns its REP socket on inproc://zeromq.zap.01, borrows the context.
// Thread safety: the server's poll thread only (the socket is polled there).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include <zmq.hpp>

#include "base/result.h"
#include "proto/curve_keys.h"

namespace hipq::coordinator {

class CurveAuth {
 public:
  static Result<std::unique_ptr<CurveAuth>> bind(zmq::context_t& context, proto::AuthorizedKeys keys);

  zmq::socket_t& socket() { return socket_; }
  // Answers every waiting ZAP request (non-blocking). Never throws.
  void handle_pending();
  // Role check for an authenticated identity ("worker" / "client").
  bool has_role(const std::string& user_id, const std::string& role) const;
  // The Z85 public key an authenticated identity stands for ("" when the
  // name is not listed).
  std::string public_key_of(const std::string& user_id) const;
  // The name of a listed Z85 public key ("" when it is not listed).
  std::string name_of(const std::string& public_key) const;

  int64_t admitted() const { return admitted_; }
  int64_t refused() const { return refused_; }

 private:
  CurveAuth(zmq::socket_t socket, proto::AuthorizedKeys keys);

  zmq::socket_t socket_;
  proto::AuthorizedKeys keys_;
  std::map<std::string, std::set<std::string>> roles_by_name_;  // user id -> roles of its one key
  std::map<std::string, std::string> key_by_name_;              // user id -> its Z85 public key
  int64_t admitted_ = 0;
  int64_t refused_ = 0;
};

}  // namespace hipq::coordinator
