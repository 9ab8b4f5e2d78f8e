#include "proto/transport.h"

#include <zmq_addon.hpp>

#include "proto/codec.h"
#include "proto/protocol.h"

namespace hipq::proto {
namespace {
Status zmq_status(const zmq::error_t& e, std::string_view what) {
  return Status::Unavailable(std::string(what) + ": " + e.what());
}
}  // namespace

void apply_socket_limits(zmq::socket_t& socket) {
  socket.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
  socket.set(zmq::sockopt::linger, 0);
}

Status apply_curve_client(zmq::socket_t& socket, const CurveClientKeys& keys) {
  try {
    socket.set(zmq::sockopt::curve_serverkey, keys.server_public_key);
    socket.set(zmq::sockopt::curve_publickey, keys.public_key);
    socket.set(zmq::sockopt::curve_secretkey, keys.secret_key);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument(std::string("CURVE keys rejected by ZeroMQ (expected 40-character Z85 keys): ") +
                                   e.what());
  }
  return Status::Ok();
}

Status send_envelope(zmq::socket_t& socket, const Envelope& envelope) {
  std::string bytes = encode(envelope);
  try {
    auto sent = socket.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    if (!sent) return Status::Unavailable("send would block (no peer or queue full)");
  } catch (const zmq::error_t& e) {
    return zmq_status(e, "send");
  }
  return Status::Ok();
}

Status send_envelope_to(zmq::socket_t& router, std::string_view routing_id, const Envelope& envelope) {
  std::string bytes = encode(envelope);
  try {
    auto a = router.send(zmq::buffer(routing_id), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!a) return Status::Unavailable("send would block");
    auto b = router.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    if (!b) return Status::Unavailable("send would block");
  } catch (const zmq::error_t& e) {
    return zmq_status(e, "send");
  }
  return Status::Ok();
}

Result<std::optional<RoutedMessage>> recv_routed(zmq::socket_t& router) {
  std::vector<zmq::message_t> frames;
  try {
    auto n = zmq::recv_multipart(router, std::back_inserter(frames), zmq::recv_flags::dontwait);
    if (!n) return std::optional<RoutedMessage>();
  } catch (const zmq::error_t& e) {
    return zmq_status(e, "recv");
  }
  RoutedMessage m;
  m.routing_id = frames.front().to_string();
  if (frames.size() != 2) {
    m.well_formed = false;
    return std::optional<RoutedMessage>(std::move(m));
  }
  m.bytes = frames[1].to_string();
  // The ZAP user id travels as a property of each frame of the connection.
  try {
    const char* uid = frames[1].gets("User-Id");
    if (uid) m.user_id = uid;
  } catch (const zmq::error_t&) {
    // No ZAP on this connection: no authenticated identity.
  }
  return std::optional<RoutedMessage>(std::move(m));
}

Result<std::optional<std::string>> recv_frame(zmq::socket_t& socket) {
  std::vector<zmq::message_t> frames;
  try {
    auto n = zmq::recv_multipart(socket, std::back_inserter(frames), zmq::recv_flags::dontwait);
    if (!n) return std::optional<std::string>();
  } catch (const zmq::error_t& e) {
    return zmq_status(e, "recv");
  }
  if (frames.size() != 1) {
    return Status::Corruption("message of " + std::to_string(frames.size()) + " frames, expected 1");
  }
  return std::optional<std::string>(frames[0].to_string());
}

}  // namespace hipq::proto
