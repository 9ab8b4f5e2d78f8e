// The cpu backend: C++ implementations of every op on host memory (hot loops
// tiled and compiled for AVX2 as well as the baseline ISA), the backend CPU-only
// CI runs the whole pipeline on. Like the hip backend it is checked against the
// plain fp64 references in tests/kernels/parity/reference_ops.cpp.
//
// make_cpu_backend() returns a Backend whose memory is host memory from a
// size-class pool (64-byte aligned), whose copies are memcpy, whose events
// read the host steady clock and whose ops (kernels/cpu/<op>.cpp) run on a
// process-wide thread pool sized by env HIPQ_CPU_THREADS (default: all
// hardware threads). Tensors it works on carry Location::kHost.
// Thread safety: as Backend (one thread per backend object).
#pragma once

#include <memory>

#include "base/result.h"
#include "kernels/backend.h"

namespace hipq::kernels {
Result<std::unique_ptr<Backend>> make_cpu_backend();
}  // namespace hipq::kernels
