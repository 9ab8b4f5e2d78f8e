// Helpers of the GPU-flavour checks that read what command-line tools print
// (no_vendor_libs_test: ldd; amd_kernel_resources_test: objdump, objcopy,
// clang-offload-bundler, llvm-readelf).
#pragma once

#include <array>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace hipq::testing {

// The non-empty pieces of `s` between `sep`s.
inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Runs `cmd` through the shell: its standard output (add 2>&1 for the
// errors too), and its wait status in *status (-1: it could not start).
inline std::string command_output(const std::string& cmd, int* status) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  std::string out;
  if (!p) {
    *status = -1;
    return out;
  }
  std::array<char, 4096> buf;
  while (fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  *status = pclose(p.release());
  return out;
}

}  // namespace hipq::testing
