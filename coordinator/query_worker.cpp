#include "coordinator/query_worker.h"

#include <spdlog/spdlog.h>

#include <vector>

#include <zmq_addon.hpp>

#include "coordinator/query_service.h"
#include "db/database.h"
#include "proto/codec.h"

namespace hipq::coordinator {

QueryWorker::QueryWorker(zmq::context_t& context, std::filesystem::path db_path)
    : context_(context), db_path_(std::move(db_path)), pipe_(context, zmq::socket_type::pair) {}

Result<std::unique_ptr<QueryWorker>> QueryWorker::start(zmq::context_t& context, const std::filesystem::path& db_path) {
  std::unique_ptr<QueryWorker> w(new QueryWorker(context, db_path));
  // Opened here so a database it cannot read fails the coordinator's start.
  db::Database::Options o;
  o.read_only = true;
  o.must_exist = true;
  auto probe = db::Database::open(db_path, o);
  if (!probe.ok()) return probe.status().WithContext("query connection");
  std::string endpoint = "inproc://hipq-queries-" + std::to_string(reinterpret_cast<uintptr_t>(w.get()));
  try {
    w->pipe_.set(zmq::sockopt::linger, 0);
    w->pipe_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Internal(std::string("query pipe: ") + e.what());
  }
  w->thread_ = std::make_unique<std::thread>([raw = w.get(), endpoint] { raw->thread_main(endpoint); });
  return w;
}

QueryWorker::~QueryWorker() {
  if (thread_) {
    try {
      pipe_.send(zmq::const_buffer(), zmq::send_flags::none);  // quit
    } catch (const zmq::error_t&) {
    }
    thread_->join();
  }
}

bool QueryWorker::submit(const std::string& routing_id, const proto::Envelope& request) {
  if (pending_ >= kMaxPending) return false;
  std::string bytes = proto::encode(request);
  try {
    pipe_.send(zmq::buffer(routing_id), zmq::send_flags::sndmore);
    pipe_.send(zmq::buffer(bytes), zmq::send_flags::none);
  } catch (const zmq::error_t& e) {
    spdlog::error("query pipe: {}", e.what());
    return false;
  }
  ++pending_;
  return true;
}

std::optional<std::pair<std::string, std::string>> QueryWorker::next_reply() {
  std::vector<zmq::message_t> frames;
  try {
    auto n = zmq::recv_multipart(pipe_, std::back_inserter(frames), zmq::recv_flags::dontwait);
    if (!n || frames.size() != 2) return std::nullopt;
  } catch (const zmq::error_t&) {
    return std::nullopt;
  }
  --pending_;
  return std::make_pair(frames[0].to_string(), frames[1].to_string());
}

void QueryWorker::thread_main(std::string endpoint) {
  zmq::socket_t pipe(context_, zmq::socket_type::pair);
  pipe.set(zmq::sockopt::linger, 0);
  pipe.connect(endpoint);
  db::Database::Options o;
  o.read_only = true;
  o.must_exist = true;
  auto db = db::Database::open(db_path_, o);
  for (;;) {
    std::vector<zmq::message_t> frames;
    try {
      if (!zmq::recv_multipart(pipe, std::back_inserter(frames))) continue;
    } catch (const zmq::error_t&) {
      return;
    }
    if (frames.size() == 1 && frames[0].size() == 0) return;
    if (frames.size() != 2) continue;
    proto::Envelope reply;
    auto request = proto::decode(frames[1].to_string_view());
    auto* r = reply.mutable_query_reply();
    if (!request.ok() || !request->has_query()) {
      r->set_ok(false);
      r->set_error("not a query");
    } else if (!db.ok()) {
      r->set_ok(false);
      r->set_error(db.status().ToString());
    } else {
      reply.set_request_id(request->request_id());
      const proto::QueryRequest& m = request->query();
      try {
        nlohmann::json args = m.args_json().empty() ? nlohmann::json::object() : nlohmann::json::parse(m.args_json());
        auto result = run_query(**db, m.kind(), args);
        if (!result.ok()) {
          r->set_ok(false);
          r->set_error(result.status().ToString());
        } else {
          r->set_ok(true);
          r->set_result_json(result->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
        }
      } catch (const std::exception& e) {
        r->set_ok(false);
        r->set_error(std::string("query failed: ") + e.what());
      }
    }
    std::string bytes = proto::encode(std::move(reply));
    try {
      pipe.send(zmq::buffer(frames[0].data(), frames[0].size()), zmq::send_flags::sndmore);
      pipe.send(zmq::buffer(bytes), zmq::send_flags::none);
    } catch (const zmq::error_t&) {
      return;
    }
  }
}

}  // namespace hipq::coordinator
