// hipq's HIP-on-NVIDIA compatibility header: bfloat16 (native CUDA type).
#pragma once
#include <cuda_bf16.h>
