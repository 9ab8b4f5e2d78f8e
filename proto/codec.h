// Codec: Envelope <-> bytes, with the validation every received message goes
// through before a handler sees it.
//
// decode() never throws: a frame that does not parse, carries another
// protocol version, has no body, or fails validate() comes back as
// Corruption / InvalidArgument naming what was wrong; the caller counts and
// drops it (a bad message is never fatal). Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/result.h"
#include "base/status.h"
#include "proto/hipq.pb.h"
#include "proto/protocol.h"

namespace hipq::proto {

// Serialises with version = kProtocolVersion filled in.
std::string encode(Envelope envelope);
Result<Envelope> decode(std::string_view bytes);

// Field-level checks per body type (ids positive, counts sane, strings
// bounded). InvalidArgument naming the message and the field.
Status validate(const Envelope& envelope);

// "hello", "ready", "submit", ... for logs and counters ("none" when empty).
std::string_view body_name(const Envelope& envelope);

}  // namespace hipq::proto
