# Build facts for `hipq version`: git sha, build type, compiler, GPU flavour.
find_package(Git QUIET)
set(HIPQ_GIT_SHA "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _sha
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE _rc)
  if(_rc EQUAL 0 AND _sha)
    set(HIPQ_GIT_SHA "${_sha}")
    execute_process(COMMAND ${GIT_EXECUTABLE} status --porcelain --untracked-files=no
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE _dirty ERROR_QUIET)
    if(_dirty)
      set(HIPQ_GIT_SHA "${HIPQ_GIT_SHA}-dirty")
    endif()
  endif()
endif()
set(HIPQ_GPU_COMPILER "")
if(HIPQ_GPU STREQUAL "amd")
  set(HIPQ_GPU_COMPILER "${CMAKE_HIP_COMPILER_ID} ${CMAKE_HIP_COMPILER_VERSION}")
elseif(HIPQ_GPU STREQUAL "nvidia")
  set(HIPQ_GPU_COMPILER "${CMAKE_CUDA_COMPILER_ID} ${CMAKE_CUDA_COMPILER_VERSION}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/base/build_info.h.in ${PROJECT_BINARY_DIR}/generated/base/build_info.h @ONLY)
