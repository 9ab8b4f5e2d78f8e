// ParityGate on the wire: spec::ParityGate <-> the proto::ParityGate message
// of JobAssignment.parity_gate, field for field (docs/protocol.md). from_proto
// does not validate: the worker calls spec::ParityGate::validate() and reports
// InvalidArgument.
// Thread safety: pure functions.
#pragma once

#include "proto/hipq.pb.h"
#include "spec/parity_gate.h"

namespace hipq::proto {

ParityGate to_proto(const spec::ParityGate& gate);
spec::ParityGate from_proto(const ParityGate& gate);

}  // namespace hipq::proto
