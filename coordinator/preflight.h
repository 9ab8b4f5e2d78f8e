// Preflight: what can be checked about a valid manifest before any GPU time
// is spent, on this machine's filesystem. `hipq check`, `hipq submit` (the
// client, and the coordinator again on its own filesystem) and `hipq run`
// call it after parse_manifest; a manifest that fails it queues nothing.
//
// Checks: the output root exists as a writable directory, or can be created
// (its nearest existing ancestor is a directory this process can create
// entries in). Both are probed for real (a temporary file is created and
// removed), so a read-only mount or missing permission is caught even for
// root. Nothing else is left behind: a missing root is not created here.
// Path validity (NUL bytes, components over 255 bytes) and the model
// (synthetic names known, paths existing) are checked by parse_manifest.
//
// Errors: FailedPrecondition naming the path and the OS reason.
// Thread safety: pure apart from the probe file.
#pragma once

#include <filesystem>

#include "base/status.h"
#include "coordinator/manifest.h"

namespace hipq::coordinator {

Status preflight(const Manifest& manifest);
// The output-root part of preflight, for any directory.
Status check_output_root(const std::filesystem::path& root);

}  // namespace hipq::coordinator
