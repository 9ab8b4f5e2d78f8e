# GPU flavour selection: HIPQ_GPU = none | amd | nvidia.
#
#  amd    : .hip sources compiled as the HIP language by Debian's clang++-15
#           (ROCm 5.2.3) and linked against libamdhip64.  CMake 3.25 does not
#           find Debian's multiarch hip-lang package; the block below points it
#           there (a private ROCm root in the build tree) without touching /usr.
#  nvidia : the same .hip sources compiled as CUDA by nvcc, through the
#           project's own HIP compatibility header (kernels/hip/vendors/nvidia), because
#           Debian's hip/nvidia_detail headers do not compile against CUDA 13.
#
# Defines:
#   HIPQ_HAVE_GPU             ON when a GPU flavour is enabled
#   hipq_gpu_sources(t f...)  adds GPU sources to target t in the right language
#   hipq_link_gpu_runtime(t)  links the GPU runtime into an executable
if(NOT HIPQ_GPU MATCHES "^(none|amd|nvidia)$")
  message(FATAL_ERROR "HIPQ_GPU must be none, amd or nvidia (got '${HIPQ_GPU}')")
endif()

set(HIPQ_HAVE_GPU OFF)

if(HIPQ_GPU STREQUAL "amd")
  if(NOT HIPQ_GPU_TARGETS)
    set(HIPQ_GPU_TARGETS "gfx1030" CACHE STRING "" FORCE)
  endif()
  find_program(HIPQ_CLANG15 NAMES clang++-15)
  if(NOT HIPQ_CLANG15)
    message(FATAL_ERROR "HIPQ_GPU=amd needs clang++-15 (Debian: scripts/setup --amd installs hipcc, libamdhip64-dev, rocm-device-libs)")
  endif()
  set(_hipq_multiarch "/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}")
  if(NOT CMAKE_LIBRARY_ARCHITECTURE)
    set(_hipq_multiarch "/usr/lib/x86_64-linux-gnu")
  endif()
  set(_hipq_bitcode "${_hipq_multiarch}/amdgcn/bitcode")
  if(NOT EXISTS "${_hipq_multiarch}/cmake/hip-lang/hip-lang-config.cmake")
    message(FATAL_ERROR "hip-lang CMake package not found under ${_hipq_multiarch}/cmake/hip-lang: install libamdhip64-dev (scripts/setup --amd)")
  endif()
  if(NOT EXISTS "${_hipq_bitcode}")
    message(FATAL_ERROR "ROCm device libraries not found at ${_hipq_bitcode}: install rocm-device-libs (scripts/setup --amd)")
  endif()
  # CMake 3.25 expects <root>/lib/cmake/hip-lang; Debian has it under the multiarch dir.
  set(_hipq_root "${CMAKE_BINARY_DIR}/_rocm_root")
  file(MAKE_DIRECTORY "${_hipq_root}/lib/cmake")
  file(CREATE_LINK "${_hipq_multiarch}/cmake/hip-lang" "${_hipq_root}/lib/cmake/hip-lang" SYMBOLIC)
  set(CMAKE_HIP_COMPILER "${HIPQ_CLANG15}" CACHE FILEPATH "" FORCE)
  set(CMAKE_HIP_COMPILER_ROCM_ROOT "${_hipq_root}" CACHE PATH "" FORCE)
  set(CMAKE_HIP_FLAGS_INIT "--rocm-path=/usr --rocm-device-lib-path=${_hipq_bitcode}")
  set(CMAKE_HIP_ARCHITECTURES "${HIPQ_GPU_TARGETS}" CACHE STRING "" FORCE)
  set(amd_comgr_DIR "${_hipq_multiarch}/cmake/amd_comgr" CACHE PATH "")
  set(hsa-runtime64_DIR "${_hipq_multiarch}/cmake/hsa-runtime64" CACHE PATH "")
  set(AMDDeviceLibs_DIR "/usr/lib/cmake/AMDDeviceLibs" CACHE PATH "")
  file(GLOB _hipq_builtins "/usr/lib/llvm-15/lib/clang/*/lib/linux/libclang_rt.builtins-x86_64.a")
  if(_hipq_builtins)
    list(GET _hipq_builtins 0 _hipq_builtin)
    set(CLANGRT_BUILTINS "${_hipq_builtin}" CACHE FILEPATH "")
  endif()
  list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES
       amd_comgr_DIR hsa-runtime64_DIR AMDDeviceLibs_DIR CLANGRT_BUILTINS CMAKE_HIP_COMPILER_ROCM_ROOT)
  enable_language(HIP)
  set(CMAKE_HIP_STANDARD 20)
  set(CMAKE_HIP_STANDARD_REQUIRED ON)
  set(HIPQ_HAVE_GPU ON)
  set(HIPQ_GPU_LANGUAGE HIP)
elseif(HIPQ_GPU STREQUAL "nvidia")
  if(NOT HIPQ_GPU_TARGETS)
    set(HIPQ_GPU_TARGETS "90a" CACHE STRING "" FORCE)
  endif()
  # 90a: Hopper with its arch-specific instructions (wgmma); the kernels that
  # use them compile only there, and the backend turns them on at run time.
  if(HIPQ_GPU_TARGETS MATCHES "(^|;)90a($|;)")
    add_compile_definitions(HIPQ_HAVE_SM90A=1)
  endif()
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "")
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${HIPQ_GPU_TARGETS}" CACHE STRING "" FORCE)
  enable_language(CUDA)
  # CMake 3.25 predates nvcc 13 and does not know its C++20 flag.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
  set(HIPQ_HAVE_GPU ON)
  set(HIPQ_GPU_LANGUAGE CUDA)
endif()

function(hipq_gpu_sources target)
  if(NOT HIPQ_HAVE_GPU)
    return()
  endif()
  set_source_files_properties(${ARGN} PROPERTIES LANGUAGE ${HIPQ_GPU_LANGUAGE})
  target_sources(${target} PRIVATE ${ARGN})
  if(HIPQ_GPU STREQUAL "nvidia")
    target_include_directories(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${PROJECT_SOURCE_DIR}/kernels/hip/vendors/nvidia>)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr>)
  endif()
endfunction()

# Host C++ files that call the HIP runtime API (hipMalloc...) need its headers.
function(hipq_gpu_host_includes target)
  if(HIPQ_GPU STREQUAL "nvidia")
    find_package(CUDAToolkit REQUIRED)
    target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/kernels/hip/vendors/nvidia)
    target_link_libraries(${target} PRIVATE CUDA::cudart_static)
  elseif(HIPQ_GPU STREQUAL "amd")
    target_compile_definitions(${target} PRIVATE __HIP_PLATFORM_AMD__=1)
    target_link_libraries(${target} PRIVATE hip::host)
  endif()
endfunction()

function(hipq_link_gpu_runtime target)
  if(HIPQ_GPU STREQUAL "nvidia")
    find_package(CUDAToolkit REQUIRED)
    target_link_libraries(${target} PRIVATE CUDA::cudart_static)
  elseif(HIPQ_GPU STREQUAL "amd")
    set_target_properties(${target} PROPERTIES LINKER_LANGUAGE HIP)
  endif()
endfunction()

if(HIPQ_HAVE_GPU)
  message(STATUS "hipq GPU flavour: ${HIPQ_GPU}, targets: ${HIPQ_GPU_TARGETS}")
else()
  message(STATUS "hipq GPU flavour: none (CPU backend only)")
endif()
