// hipq's HIP-on-NVIDIA compatibility header: half precision (native CUDA type).
#pragma once
#include <cuda_fp16.h>
