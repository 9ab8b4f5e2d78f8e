// Codec: Envelope <-> bytes, with the validation every received message goes
// through before a handler sees it.
//
// decode() never throws: a frame that does not parse, carries another
// protocol version ("protocol version 1, this build speaks 2"; see
// version_refusal), has no body, or fails validate() comes back as
// Corruption / InvalidArgument naming what was wrong; the caller counts and
// drops it (a bad message is never fatal). Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/status.h"
#include "proto/hipq.pb.h"
#include "proto/protocol.h"

namespace hipq::proto {

// Serialises with version = kProtocolVersion filled in.
std::string encode(Envelope envelope);
Result<Envelope> decode(std::string_view bytes);

// For a frame that parses as an Envelope of another protocol version and
// opens a conversation (hello, or a client request): the bytes of the answer
// that tells that peer why it is refused, written in the peer's own version
// so an older peer can read it (an ErrorReply with code FailedPrecondition,
// the request id echoed). nullopt for anything else (drop it as before).
std::optional<std::string> version_refusal(std::string_view bytes);

// Field-level checks per body type (ids positive, counts sane, strings
// bounded). InvalidArgument naming the message and the field.
Status validate(const Envelope& envelope);

// The jobs a validated hello or heartbeat says its worker runs: `running`,
// or the single running_job_id/running_attempt when `running` is empty (a
// peer that names one job the old way); empty when it runs none.
std::vector<RunningJob> running_jobs(const WorkerHello& hello);
std::vector<RunningJob> running_jobs(const Heartbeat& heartbeat);
// Fills `running` and the single fields (the first job) of a hello or
// heartbeat from `jobs`.
void set_running_jobs(WorkerHello& hello, const std::vector<RunningJob>& jobs);
void set_running_jobs(Heartbeat& heartbeat, const std::vector<RunningJob>& jobs);

// "hello", "ready", "submit", ... for logs and counters ("none" when empty).
std::string_view body_name(const Envelope& envelope);

}  // namespace hipq::proto
