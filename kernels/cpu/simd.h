// Vector-width dispatch for the cpu backend's hot loops. Functions marked
// HIPQ_CPU_HOT are compiled twice on x86-64 with GCC/Clang — for the baseline
// ISA and for Haswell-class CPUs (AVX2 + FMA) — and the loader picks the one
// the running CPU supports, so binaries stay portable. Elsewhere the marker is
// empty. Only plain loops the compiler vectorises go under it.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__)
#define HIPQ_CPU_HOT __attribute__((target_clones("arch=haswell", "default")))
#else
#define HIPQ_CPU_HOT
#endif
