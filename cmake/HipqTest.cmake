# hipq_add_test(NAME <name> SOURCES <files...> LIBS <targets...> LABELS <cpu|gpu|slow...>)
#
# One GoogleTest binary, registered with ctest test-by-test (gtest_discover_tests)
# and labelled so CI can select: `ctest -L cpu`, `ctest -LE slow`.
include(GoogleTest)
function(hipq_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS cpu)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  hipq_target_defaults(${T_NAME})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  hipq_link_gpu_runtime(${T_NAME})
  gtest_discover_tests(${T_NAME}
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
               ENVIRONMENT "HIPQ_SOURCE_DIR=${PROJECT_SOURCE_DIR};HIPQ_BINARY_DIR=${PROJECT_BINARY_DIR}"
    DISCOVERY_TIMEOUT 60)
endfunction()
