// InputDigests on the wire: spec::InputDigests <-> the proto::InputDigests
// message of JobAssignment.inputs, field for field (docs/protocol.md).
// from_proto does not validate: the worker checks the digests against the
// settings (spec::InputDigests::check_against) and the files.
// Thread safety: pure functions.
#pragma once

#include "proto/hipq.pb.h"
#include "spec/input_digests.h"

namespace hipq::proto {

InputDigests to_proto(const spec::InputDigests& digests);
spec::InputDigests from_proto(const InputDigests& digests);

}  // namespace hipq::proto
