# Warning flags and sanitizers for every hipq target (hipq_target_defaults).
add_library(hipq_warnings INTERFACE)
target_compile_options(hipq_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${HIPQ_WERROR}>>:-Werror>)

if(HIPQ_SANITIZE)
  if(NOT HIPQ_SANITIZE MATCHES "^(address|undefined|thread|address,undefined)$")
    message(FATAL_ERROR "HIPQ_SANITIZE must be address, undefined, address,undefined or thread (got '${HIPQ_SANITIZE}')")
  endif()
  # Undefined behaviour aborts (a test fails) instead of printing and going on.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${HIPQ_SANITIZE}> $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${HIPQ_SANITIZE})
endif()

# hipq_target_defaults(<target>): warnings, include root.
function(hipq_target_defaults target)
  target_link_libraries(${target} PRIVATE hipq_warnings)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
endfunction()
