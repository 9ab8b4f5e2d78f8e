// GenerationSettings on the wire: spec::GenerationSettings <-> the
// proto::GenerationSettings message of JobAssignment.settings, field for
// field (docs/protocol.md). from_proto does not validate: the worker calls
// spec::GenerationSettings::validate() and reports InvalidArgument.
// Thread safety: pure functions.
#pragma once

#include "proto/hipq.pb.h"
#include "spec/generation_settings.h"

namespace hipq::proto {

GenerationSettings to_proto(const spec::GenerationSettings& settings);
spec::GenerationSettings from_proto(const GenerationSettings& settings);

}  // namespace hipq::proto
