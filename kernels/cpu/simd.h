// Vector-width dispatch for the cpu backend's hot loops. Functions marked
// HIPQ_CPU_HOT are compiled twice on x86-64 with GCC/Clang — for the baseline
// ISA and for AVX2 — and the loader picks the one the running CPU supports,
// so binaries stay portable. Elsewhere the marker is empty. Only plain loops
// the compiler vectorises go under it. (Not "arch=haswell": that clone is
// chosen only on CPUs that identify as Haswell, not on newer ones.)
//
// Under ThreadSanitizer there are no clones: the dynamic loader runs the
// clones' ifunc resolvers before TSan has set itself up, and a resolver
// instrumented by TSan crashes there (every binary linking the cpu kernels
// died before main).
#pragma once

#if defined(__SANITIZE_THREAD__)
#define HIPQ_CPU_NO_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define HIPQ_CPU_NO_CLONES 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && defined(__ELF__) && \
    !defined(HIPQ_CPU_NO_CLONES)
#define HIPQ_CPU_HOT __attribute__((target_clones("avx2", "default")))
#define HIPQ_CPU_HAS_AVX2() __builtin_cpu_supports("avx2")
#else
#define HIPQ_CPU_HOT
#define HIPQ_CPU_HAS_AVX2() false
#endif
