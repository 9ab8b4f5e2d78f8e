#include "coordinator/client.h"

#include "coordinator/manifest.h"

#include "base/fs.h"
#include "proto/codec.h"

namespace hipq::coordinator {

Status status_from_wire(const std::string& code, const std::string& message) {
  for (int c = static_cast<int>(StatusCode::kInvalidArgument); c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (status_code_name(static_cast<StatusCode>(c)) == code) return Status(static_cast<StatusCode>(c), message);
  }
  return Status::Internal(code + ": " + message);
}

Result<std::unique_ptr<Client>> Client::connect(zmq::context_t& context, ClientOptions options) {
  try {
    zmq::socket_t s(context, zmq::socket_type::dealer);
    proto::apply_socket_limits(s);
    if (options.curve) HIPQ_RETURN_IF_ERROR(proto::apply_curve_client(s, *options.curve));
    s.connect(options.endpoint);
    return std::unique_ptr<Client>(new Client(std::move(s), std::move(options)));
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to \"" + options.endpoint + "\": " + e.what() +
                                   " (want tcp://HOST:PORT)");
  }
}

Result<proto::Envelope> Client::call(proto::Envelope request, proto::Envelope::BodyCase expected) {
  uint64_t id = next_request_id_++;
  request.set_request_id(id);
  std::string bytes = proto::encode(std::move(request));
  auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  try {
    // A DEALER with no connection yet queues the message; block only as long
    // as our own deadline allows.
    socket_.set(zmq::sockopt::sndtimeo, static_cast<int>(options_.timeout.count()));
    if (!socket_.send(zmq::buffer(bytes), zmq::send_flags::none)) {
      return Status::Unavailable("could not send to the coordinator at " + options_.endpoint);
    }
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      zmq::pollitem_t item{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, left);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      auto frame = proto::recv_frame(socket_);
      if (!frame.ok() || !frame->has_value()) continue;
      auto env = proto::decode(**frame);
      if (!env.ok() || env->request_id() != id) continue;  // stale reply to an earlier call
      if (env->body_case() == proto::Envelope::kErrorReply) {
        return status_from_wire(env->error_reply().code(), env->error_reply().message());
      }
      if (env->body_case() != expected) {
        return Status::Corruption("coordinator answered with " + std::string(proto::body_name(*env)));
      }
      return std::move(*env);
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("talking to the coordinator at " + options_.endpoint + ": " + e.what());
  }
  return Status::Unavailable("no answer from a coordinator at " + options_.endpoint + " within " +
                             std::to_string(options_.timeout.count() / 1000.0).substr(0, 4) +
                             " s: is `hipq coordinator` running there (--connect)? With CURVE, is this "
                             "client's public key in its authorized keys?");
}

static_assert(kMaxManifestBytes == proto::kMaxManifestBytes, "the manifest limit is the wire's");

Result<proto::SubmitReply> Client::submit(const std::filesystem::path& manifest, std::optional<int> priority) {
  std::filesystem::path abs = std::filesystem::absolute(manifest);
  // The coordinator refuses a bigger one; say so here rather than let the
  // request vanish at the socket limit.
  HIPQ_ASSIGN_OR_RETURN(std::string text, read_regular_file(abs, kMaxManifestBytes));
  proto::Envelope e;
  auto* s = e.mutable_submit();
  s->set_manifest_path(abs.string());
  s->set_manifest_text(std::move(text));
  if (priority) {
    s->set_has_priority_override(true);
    s->set_priority_override(*priority);
  }
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kSubmitReply));
  return r.submit_reply();
}

Result<proto::StatusReply> Client::status(int64_t batch_id, bool active_only) {
  proto::Envelope e;
  e.mutable_status()->set_batch_id(batch_id);
  e.mutable_status()->set_active_only(active_only);
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kStatusReply));
  return r.status_reply();
}

Result<proto::CancelReply> Client::cancel_batch(int64_t batch_id) {
  proto::Envelope e;
  e.mutable_cancel_request()->set_batch_id(batch_id);
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kCancelReply));
  return r.cancel_reply();
}

Result<proto::CancelReply> Client::cancel_job(int64_t job_id) {
  proto::Envelope e;
  e.mutable_cancel_request()->set_job_id(job_id);
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kCancelReply));
  return r.cancel_reply();
}

Result<proto::WorkersReply> Client::workers() {
  proto::Envelope e;
  e.mutable_workers();
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kWorkersReply));
  return r.workers_reply();
}

Result<proto::DrainReply> Client::drain(const std::string& worker_id) {
  proto::Envelope e;
  e.mutable_drain_request()->set_worker_id(worker_id);
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kDrainReply));
  return r.drain_reply();
}

Result<nlohmann::json> Client::query(const std::string& kind, const nlohmann::json& args) {
  proto::Envelope e;
  e.mutable_query()->set_kind(kind);
  e.mutable_query()->set_args_json(args.dump());
  HIPQ_ASSIGN_OR_RETURN(proto::Envelope r, call(std::move(e), proto::Envelope::kQueryReply));
  if (!r.query_reply().ok()) return Status::InvalidArgument("query \"" + kind + "\": " + r.query_reply().error());
  try {
    return nlohmann::json::parse(r.query_reply().result_json());
  } catch (const nlohmann::json::exception& ex) {
    return Status::Corruption(std::string("query reply is not JSON: ") + ex.what());
  }
}

}  // namespace hipq::coordinator
