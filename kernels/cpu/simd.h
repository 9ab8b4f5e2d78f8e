// Vector-width dispatch for the cpu backend's hot loops. Functions marked
// HIPQ_CPU_HOT are compiled twice on x86-64 with GCC/Clang — for the baseline
// ISA and for AVX2 — and the loader picks the one the running CPU supports,
// so binaries stay portable. Elsewhere the marker is empty. Only plain loops
// the compiler vectorises go under it. (Not "arch=haswell": that clone is
// chosen only on CPUs that identify as Haswell, not on newer ones.)
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__)
#define HIPQ_CPU_HOT __attribute__((target_clones("avx2", "default")))
#define HIPQ_CPU_HAS_AVX2() __builtin_cpu_supports("avx2")
#else
#define HIPQ_CPU_HOT
#define HIPQ_CPU_HAS_AVX2() false
#endif
