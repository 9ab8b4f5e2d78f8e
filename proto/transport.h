// Transport: the few things every hipq ZeroMQ socket does the same way —
// limits, CURVE client setup, and sending/receiving one Envelope per frame.
//
// Every socket gets ZMQ_MAXMSGSIZE (kMaxMessageBytes: a bigger message
// closes that peer's connection inside libzmq, it never reaches us) and
// linger 0 (a closing process never blocks on a vanished peer).
// Sends never block: a full or peer-less socket returns Unavailable and the
// caller decides (heartbeats are simply re-sent; reports are kept until
// acknowledged). cppzmq exceptions are caught here and returned as Status.
// Thread safety: a zmq socket belongs to one thread; these are free functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <zmq.hpp>

#include "base/result.h"
#include "base/status.h"
#include "proto/hipq.pb.h"

namespace hipq::proto {

void apply_socket_limits(zmq::socket_t& socket);

// CURVE client side: our key pair and the server's public key (Z85 text).
struct CurveClientKeys {
  std::string public_key;
  std::string secret_key;
  std::string server_public_key;
};
Status apply_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys);

// DEALER side: one frame, the encoded envelope.
Status send_envelope(zmq::socket_t& socket, const Envelope& envelope);
// ROUTER side: [routing id][envelope].
Status send_envelope_to(zmq::socket_t& router, std::string_view routing_id, const Envelope& envelope);

// One message received from a ROUTER socket.
struct RoutedMessage {
  std::string routing_id;
  std::string user_id;       // ZAP user id (CURVE identity); "" without ZAP
  std::string bytes;         // the envelope frame
  bool well_formed = true;   // false: not [routing id][one frame]
};
// Non-blocking; nullopt when nothing is waiting.
Result<std::optional<RoutedMessage>> recv_routed(zmq::socket_t& router);
// DEALER side, non-blocking; nullopt when nothing is waiting. A message that
// is not one frame comes back as Corruption (its frames are consumed).
Result<std::optional<std::string>> recv_frame(zmq::socket_t& socket);

}  // namespace hipq::proto
