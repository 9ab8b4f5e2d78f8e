// libFuzzer driver: HIPQ_FUZZ_ENTRY names the hipq::fuzz function this
// executable fuzzes (one executable per entry; see CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_entries.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hipq::fuzz::HIPQ_FUZZ_ENTRY(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
