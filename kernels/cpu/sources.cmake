# cpu backend sources (one op per file). Included from kernels/CMakeLists.txt.
target_sources(hipq_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cpu_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/thread_pool.cpp
  ${CMAKE_CURRENT_LIST_DIR}/op_checks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tensor_io.cpp
  ${CMAKE_CURRENT_LIST_DIR}/e4m3_decode.cpp
  # ops
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cpp
  ${CMAKE_CURRENT_LIST_DIR}/matmul_fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/quantize_fp8_rows.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv2d.cpp
  ${CMAKE_CURRENT_LIST_DIR}/conv2d_fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/group_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer_norm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer_norm_fp8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/geglu.cpp
  ${CMAKE_CURRENT_LIST_DIR}/binary.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scale.cpp
  ${CMAKE_CURRENT_LIST_DIR}/lora_merge.cpp
  ${CMAKE_CURRENT_LIST_DIR}/concat.cpp
  ${CMAKE_CURRENT_LIST_DIR}/upsample_nearest2x.cpp
  ${CMAKE_CURRENT_LIST_DIR}/timestep_embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/copy.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fill.cpp
  ${CMAKE_CURRENT_LIST_DIR}/parity_sums.cpp
)
# The cpu backend spreads rows over threads.
find_package(Threads REQUIRED)
target_link_libraries(hipq_kernels PUBLIC Threads::Threads)
