#include "coordinator/curve_auth.h"

#include <spdlog/spdlog.h>

#include <vector>

#include <zmq_addon.hpp>

namespace hipq::coordinator {

CurveAuth::CurveAuth(zmq::socket_t socket, proto::AuthorizedKeys keys)
    : socket_(std::move(socket)), keys_(std::move(keys)) {
  for (const auto& [key, who] : keys_) {
    roles_by_name_.emplace(who.name, who.roles);
    key_by_name_.emplace(who.name, key);
  }
}

Result<std::unique_ptr<CurveAuth>> CurveAuth::bind(zmq::context_t& context, proto::AuthorizedKeys keys) {
  try {
    zmq::socket_t s(context, zmq::socket_type::rep);
    s.set(zmq::sockopt::linger, 0);
    s.bind("inproc://zeromq.zap.01");
    return std::unique_ptr<CurveAuth>(new CurveAuth(std::move(s), std::move(keys)));
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("cannot bind the ZAP handler (another one in this process?): ") + e.what());
  }
}

bool CurveAuth::has_role(const std::string& user_id, const std::string& role) const {
  // read_authorized_keys() keeps names unique: the user id is one key.
  auto it = roles_by_name_.find(user_id);
  return it != roles_by_name_.end() && it->second.count(role) > 0;
}

std::string CurveAuth::public_key_of(const std::string& user_id) const {
  auto it = key_by_name_.find(user_id);
  return it == key_by_name_.end() ? std::string() : it->second;
}

std::string CurveAuth::name_of(const std::string& public_key) const {
  auto it = keys_.find(public_key);
  return it == keys_.end() ? std::string() : it->second.name;
}

void CurveAuth::handle_pending() {
  for (;;) {
    std::vector<zmq::message_t> req;
    try {
      auto n = zmq::recv_multipart(socket_, std::back_inserter(req), zmq::recv_flags::dontwait);
      if (!n) return;
    } catch (const zmq::error_t& e) {
      spdlog::error("ZAP: receive failed: {}", e.what());
      return;
    }
    // RFC 27: version, request id, domain, address, identity, mechanism, credentials...
    std::string request_id = req.size() > 1 ? req[1].to_string() : "";
    std::string status = "400";
    std::string text = "refused";
    std::string user_id;
    std::string address = req.size() > 3 ? req[3].to_string() : "?";
    if (req.size() >= 7 && req[0].to_string_view() == "1.0" && req[5].to_string_view() == "CURVE" &&
        req[6].size() == 32) {
      char z85[41] = {};
      zmq_z85_encode(z85, static_cast<const uint8_t*>(req[6].data()), 32);
      auto it = keys_.find(z85);
      if (it != keys_.end()) {
        status = "200";
        text = "OK";
        user_id = it->second.name;
      } else {
        text = "public key not in the authorized keys";
        spdlog::warn("ZAP: refused connection from {}: unknown public key {}", address, z85);
      }
    } else {
      text = "only CURVE is accepted";
      spdlog::warn("ZAP: refused connection from {}: not a CURVE handshake", address);
    }
    (status == "200" ? admitted_ : refused_)++;
    std::vector<zmq::const_buffer> reply = {zmq::str_buffer("1.0"), zmq::buffer(request_id), zmq::buffer(status),
                                            zmq::buffer(text), zmq::buffer(user_id), zmq::const_buffer()};
    try {
      zmq::send_multipart(socket_, reply);
    } catch (const zmq::error_t& e) {
      spdlog::error("ZAP: reply failed: {}", e.what());
    }
  }
}

}  // namespace hipq::coordinator
