# cpu backend sources (one op per file). Included from kernels/CMakeLists.txt.
target_sources(hipq_kernels PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cpu_backend_placeholder.cpp
)
