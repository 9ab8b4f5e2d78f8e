// HIPQ_HOST_DEVICE: marks plain C++ functions that kernels call and host
// tests check, so that a test runs exactly the code the kernel runs
// (tf32_split.h, half_pairs.h). __host__ __device__ under a GPU compiler,
// nothing under a host one.
#pragma once

#if defined(__CUDACC__) || defined(__HIP__)
#define HIPQ_HOST_DEVICE __host__ __device__
#else
#define HIPQ_HOST_DEVICE
#endif
