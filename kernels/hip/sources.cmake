# hip backend sources (one op per file). Included from kernels/CMakeLists.txt when HIPQ_GPU != none.
hipq_gpu_sources(hipq_kernels
  ${CMAKE_CURRENT_LIST_DIR}/hip_backend_placeholder.hip
)
