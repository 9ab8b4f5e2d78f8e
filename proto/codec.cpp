#include "proto/codec.h"

#include <limits>

namespace hipq::proto {
namespace {

constexpr size_t kMaxIdBytes = 256;
constexpr size_t kMaxPathBytes = 4096;

Status field_error(std::string_view message, std::string_view field, std::string_view what) {
  return Status::InvalidArgument(std::string(message) + "." + std::string(field) + ": " + std::string(what));
}

Status check_id(std::string_view message, std::string_view field, int64_t id) {
  if (id <= 0) return field_error(message, field, "must be a positive id, got " + std::to_string(id));
  return Status::Ok();
}

Status check_attempt(std::string_view message, int32_t attempt) {
  if (attempt <= 0) return field_error(message, "attempt", "must be >= 1, got " + std::to_string(attempt));
  return Status::Ok();
}

Status check_len(std::string_view message, std::string_view field, const std::string& s, size_t max) {
  if (s.size() > max) {
    return field_error(message, field, "is " + std::to_string(s.size()) + " bytes, limit " + std::to_string(max));
  }
  return Status::Ok();
}

// The jobs a hello or heartbeat says its worker runs (protocol 7): at most
// kMaxBatch (the cost of checking one stays bounded), each a lease (id > 0,
// attempt >= 1) named once, the first the single running_job_id field's
// when that is set. A list longer than kMaxBatch is refused before any entry
// is read.
Status validate_running(std::string_view message, int64_t running_job_id, int32_t running_attempt,
                        const google::protobuf::RepeatedPtrField<RunningJob>& running) {
  if (running_job_id < 0) return field_error(message, "running_job_id", "must be >= 0");
  if (running_job_id > 0) HIPQ_RETURN_IF_ERROR(check_attempt(message, running_attempt));
  if (running.size() > kMaxBatch) {
    return field_error(message, "running",
                       "names " + std::to_string(running.size()) + " jobs, at most " + std::to_string(kMaxBatch));
  }
  for (int i = 0; i < running.size(); ++i) {
    const RunningJob& r = running[i];
    HIPQ_RETURN_IF_ERROR(check_id(message, "running.job_id", r.job_id()));
    if (r.attempt() <= 0) {
      return field_error(message, "running.attempt", "must be >= 1, got " + std::to_string(r.attempt()));
    }
    for (int j = 0; j < i; ++j) {
      if (running[j].job_id() == r.job_id()) {
        return field_error(message, "running", "names job " + std::to_string(r.job_id()) + " twice");
      }
    }
  }
  if (running_job_id > 0 && !running.empty() &&
      (running[0].job_id() != running_job_id || running[0].attempt() != running_attempt)) {
    return field_error(message, "running_job_id", "must name the first of `running`");
  }
  return Status::Ok();
}

Status validate_hello(const WorkerHello& h) {
  if (h.worker_id().empty()) return field_error("hello", "worker_id", "must not be empty");
  HIPQ_RETURN_IF_ERROR(check_len("hello", "worker_id", h.worker_id(), kMaxIdBytes));
  HIPQ_RETURN_IF_ERROR(check_len("hello", "host", h.host(), kMaxIdBytes));
  if (h.device_index() < 0) return field_error("hello", "device_index", "must be >= 0");
  if (h.backend().empty()) return field_error("hello", "backend", "must not be empty");
  HIPQ_RETURN_IF_ERROR(validate_running("hello", h.running_job_id(), h.running_attempt(), h.running()));
  if (h.max_batch() < 0 || h.max_batch() > kMaxBatch) {
    return field_error("hello", "max_batch", "must be 0.." + std::to_string(kMaxBatch) + ", got " +
                                                 std::to_string(h.max_batch()));
  }
  return Status::Ok();
}

// A Ready alone (`message` "ready") or riding in a report ("result.next",
// "error.next"): the same bounds.
Status validate_ready(std::string_view message, const Ready& r) {
  if (r.credit() < 0 || r.credit() > 1024) {
    return field_error(message, "credit", "must be 0..1024, got " + std::to_string(r.credit()));
  }
  return Status::Ok();
}

Status validate_result(const JobResult& r) {
  HIPQ_RETURN_IF_ERROR(check_id("result", "job_id", r.job_id()));
  HIPQ_RETURN_IF_ERROR(check_attempt("result", r.attempt()));
  for (const auto& o : r.outputs()) {
    HIPQ_RETURN_IF_ERROR(check_len("result", "outputs.path", o.path(), kMaxPathBytes));
    if (o.bytes() < 0) return field_error("result", "outputs.bytes", "must be >= 0");
  }
  const std::string& v = r.parity().verdict();
  if (v != "PASS" && v != "FAIL" && v != "NO_GOLDEN" && v != "NON_FINITE") {
    return field_error("result", "parity.verdict", "unknown verdict \"" + v.substr(0, 32) + "\"");
  }
  if (r.batch_size() < 0 || r.batch_size() > kMaxBatch) {
    return field_error("result", "batch_size",
                       "must be 0.." + std::to_string(kMaxBatch) + ", got " + std::to_string(r.batch_size()));
  }
  if (r.has_next()) return validate_ready("result.next", r.next());
  return Status::Ok();
}

}  // namespace

std::string encode(Envelope envelope) {
  envelope.set_version(kProtocolVersion);
  return envelope.SerializeAsString();
}

Result<Envelope> decode(std::string_view bytes) {
  Envelope envelope;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !envelope.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption("message of " + std::to_string(bytes.size()) + " bytes is not a hipq Envelope");
  }
  if (envelope.version() != kProtocolVersion) {
    return Status::Corruption("protocol version " + std::to_string(envelope.version()) + ", this build speaks " +
                              std::to_string(kProtocolVersion));
  }
  if (envelope.body_case() == Envelope::BODY_NOT_SET) return Status::Corruption("envelope without a body");
  HIPQ_RETURN_IF_ERROR(validate(envelope));
  return envelope;
}

std::optional<std::string> version_refusal(std::string_view bytes) {
  Envelope in;
  if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()) ||
      !in.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())) || in.version() == kProtocolVersion ||
      in.version() == 0) {
    return std::nullopt;
  }
  switch (in.body_case()) {
    case Envelope::kHello:
    case Envelope::kSubmit:
    case Envelope::kStatus:
    case Envelope::kCancelRequest:
    case Envelope::kWorkers:
    case Envelope::kDrainRequest:
    case Envelope::kQuery: break;
    default: return std::nullopt;
  }
  Envelope out;
  out.set_version(in.version());
  out.set_request_id(in.request_id());
  ErrorReply* err = out.mutable_error_reply();
  err->set_code("FailedPrecondition");
  err->set_message("refused: this peer speaks hipq protocol version " + std::to_string(in.version()) +
                   ", the coordinator speaks version " + std::to_string(kProtocolVersion) +
                   " (docs/protocol.md, \"Versions\"); run the same hipq release on every box");
  return out.SerializeAsString();
}

Status validate(const Envelope& e) {
  switch (e.body_case()) {
    case Envelope::kHello:
      return validate_hello(e.hello());
    case Envelope::kReady:
      return validate_ready("ready", e.ready());
    case Envelope::kAssignment:
      HIPQ_RETURN_IF_ERROR(check_id("assignment", "job_id", e.assignment().job_id()));
      HIPQ_RETURN_IF_ERROR(check_attempt("assignment", e.assignment().attempt()));
      if (e.assignment().model().empty()) return field_error("assignment", "model", "must not be empty");
      if (!e.assignment().has_settings()) return field_error("assignment", "settings", "must be present");
      for (const auto& ack : e.assignment().acks()) {
        HIPQ_RETURN_IF_ERROR(check_id("assignment", "acks.job_id", ack.job_id()));
        HIPQ_RETURN_IF_ERROR(check_attempt("assignment.acks", ack.attempt()));
      }
      return check_len("assignment", "output_dir", e.assignment().output_dir(), kMaxPathBytes);
    case Envelope::kHeartbeat:
      return validate_running("heartbeat", e.heartbeat().running_job_id(), e.heartbeat().running_attempt(),
                              e.heartbeat().running());
    case Envelope::kProgress:
      HIPQ_RETURN_IF_ERROR(check_id("progress", "job_id", e.progress().job_id()));
      HIPQ_RETURN_IF_ERROR(check_attempt("progress", e.progress().attempt()));
      if (e.progress().step() < 0 || e.progress().steps() < 0 || e.progress().step() > e.progress().steps()) {
        return field_error("progress", "step", "must satisfy 0 <= step <= steps");
      }
      return Status::Ok();
    case Envelope::kResult:
      return validate_result(e.result());
    case Envelope::kError:
      HIPQ_RETURN_IF_ERROR(check_id("error", "job_id", e.error().job_id()));
      HIPQ_RETURN_IF_ERROR(check_attempt("error", e.error().attempt()));
      if (e.error().has_next()) HIPQ_RETURN_IF_ERROR(validate_ready("error.next", e.error().next()));
      return check_len("error", "message", e.error().message(), 64 * 1024);
    case Envelope::kCancel:
      return check_id("cancel", "job_id", e.cancel().job_id());
    case Envelope::kSubmit:
      if (e.submit().manifest_path().empty()) return field_error("submit", "manifest_path", "must not be empty");
      HIPQ_RETURN_IF_ERROR(check_len("submit", "manifest_text", e.submit().manifest_text(), kMaxManifestBytes));
      return check_len("submit", "manifest_path", e.submit().manifest_path(), kMaxPathBytes);
    case Envelope::kStatus:
      if (e.status().batch_id() < 0) return field_error("status", "batch_id", "must be >= 0");
      return Status::Ok();
    case Envelope::kCancelRequest: {
      const auto& c = e.cancel_request();
      if ((c.batch_id() > 0) == (c.job_id() > 0) || c.batch_id() < 0 || c.job_id() < 0) {
        return field_error("cancel_request", "batch_id/job_id", "exactly one must be a positive id");
      }
      return Status::Ok();
    }
    case Envelope::kDrainRequest:
      return check_len("drain_request", "worker_id", e.drain_request().worker_id(), kMaxIdBytes);
    case Envelope::kQuery:
      if (e.query().kind().empty()) return field_error("query", "kind", "must not be empty");
      return check_len("query", "kind", e.query().kind(), kMaxIdBytes);
    case Envelope::BODY_NOT_SET:
      return Status::InvalidArgument("envelope without a body");
    default:
      return Status::Ok();
  }
}

namespace {
template <typename M>
std::vector<RunningJob> running_of(const M& m) {
  if (!m.running().empty()) return {m.running().begin(), m.running().end()};
  if (m.running_job_id() <= 0) return {};
  RunningJob r;
  r.set_job_id(m.running_job_id());
  r.set_attempt(m.running_attempt());
  return {r};
}
template <typename M>
void set_running_of(M& m, const std::vector<RunningJob>& jobs) {
  m.clear_running();
  for (const auto& r : jobs) *m.add_running() = r;
  m.set_running_job_id(jobs.empty() ? 0 : jobs.front().job_id());
  m.set_running_attempt(jobs.empty() ? 0 : jobs.front().attempt());
}
}  // namespace

std::vector<RunningJob> running_jobs(const WorkerHello& hello) { return running_of(hello); }
std::vector<RunningJob> running_jobs(const Heartbeat& heartbeat) { return running_of(heartbeat); }
void set_running_jobs(WorkerHello& hello, const std::vector<RunningJob>& jobs) { set_running_of(hello, jobs); }
void set_running_jobs(Heartbeat& heartbeat, const std::vector<RunningJob>& jobs) { set_running_of(heartbeat, jobs); }

std::string_view body_name(const Envelope& e) {
  switch (e.body_case()) {
    case Envelope::kHello: return "hello";
    case Envelope::kWelcome: return "welcome";
    case Envelope::kReconnect: return "reconnect";
    case Envelope::kReady: return "ready";
    case Envelope::kAssignment: return "assignment";
    case Envelope::kHeartbeat: return "heartbeat";
    case Envelope::kProgress: return "progress";
    case Envelope::kResult: return "result";
    case Envelope::kError: return "error";
    case Envelope::kCancel: return "cancel";
    case Envelope::kDrain: return "drain";
    case Envelope::kGoodbye: return "goodbye";
    case Envelope::kReportAck: return "report_ack";
    case Envelope::kSubmit: return "submit";
    case Envelope::kSubmitReply: return "submit_reply";
    case Envelope::kStatus: return "status";
    case Envelope::kStatusReply: return "status_reply";
    case Envelope::kCancelRequest: return "cancel_request";
    case Envelope::kCancelReply: return "cancel_reply";
    case Envelope::kWorkers: return "workers";
    case Envelope::kWorkersReply: return "workers_reply";
    case Envelope::kDrainRequest: return "drain_request";
    case Envelope::kDrainReply: return "drain_reply";
    case Envelope::kQuery: return "query";
    case Envelope::kQueryReply: return "query_reply";
    case Envelope::kErrorReply: return "error_reply";
    case Envelope::BODY_NOT_SET: return "none";
  }
  return "unknown";
}

}  // namespace hipq::proto
