// AMD flavour: every kernel of hipq_kernels, in the code object of every
// build target (gfx1030 by default), keeps its data in registers: no scratch
// memory (private segment) and no register spills. Needs no device: it reads
// the objects the build made (HIPQ_AMD_OBJECTS, ','-separated), takes the
// GPU code object out of each (.hip_fatbin section, clang-offload-bundler)
// and reads its kernel metadata (llvm-readelf --notes).
//
// Why: a kernel whose arrays the compiler cannot keep in registers still
// compiles and gives right answers, only many times slower, and no AMD GPU
// runs in CI to notice. It happened: clang 15 declined to unroll the SIMT
// GEMM's epilogue loop, its accumulator array was indexed at run time and
// lived in scratch memory for the whole kernel, one load and one store per
// product (kernels/hip/gemm/micro_tile.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/kernels/gpu/command_output.h"

namespace {

using hipq::testing::command_output;
using hipq::testing::split;

struct KernelResources {
  long private_bytes = -1, vgpr_spills = -1, sgpr_spills = -1;
};

// Kernel name -> resources from `llvm-readelf --notes` of an AMDGPU code
// object: the kernel-level keys of amdhsa.kernels entries share one indent
// (arguments' keys sit deeper), `.name` before the counts.
std::map<std::string, KernelResources> parse_notes(const std::string& notes) {
  std::map<std::string, KernelResources> out;
  std::istringstream in(notes);
  std::string line, name;
  size_t name_indent = std::string::npos;
  while (std::getline(in, line)) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent == std::string::npos) continue;
    const std::string body = line.substr(indent);
    auto value = [&](const char* key) -> std::string {
      const std::string k = std::string(key) + ":";
      if (body.rfind(k, 0) != 0) return "";
      const size_t v = body.find_first_not_of(' ', k.size());
      return v == std::string::npos ? "" : body.substr(v);
    };
    if (std::string n = value(".name"); !n.empty() && n.rfind("_Z", 0) == 0) {
      name = n;
      name_indent = indent;
      out[name];
      continue;
    }
    if (name.empty() || indent != name_indent) continue;
    if (std::string v = value(".private_segment_fixed_size"); !v.empty()) out[name].private_bytes = std::stol(v);
    if (std::string v = value(".vgpr_spill_count"); !v.empty()) out[name].vgpr_spills = std::stol(v);
    if (std::string v = value(".sgpr_spill_count"); !v.empty()) out[name].sgpr_spills = std::stol(v);
  }
  return out;
}

TEST(AmdKernelResources, NotesOfAKernelAreRead) {
  // The layout llvm-readelf 15 prints (kernel-level keys two spaces in,
  // arguments' keys deeper, some with a name of their own).
  const std::string notes =
      "amdhsa.kernels:\n"
      "  - .args:\n"
      "      - .name:           a\n"
      "        .offset:         0\n"
      "        .private_segment_fixed_size: 9\n"
      "    .group_segment_fixed_size: 16384\n"
      "    .name:           _Z1kv\n"
      "    .private_segment_fixed_size: 272\n"
      "    .sgpr_spill_count: 0\n"
      "    .symbol:         _Z1kv.kd\n"
      "    .vgpr_spill_count: 3\n"
      "  - .args:\n"
      "      - .offset:         0\n"
      "    .name:           _Z1jv\n"
      "    .private_segment_fixed_size: 0\n"
      "amdhsa.target:   amdgcn-amd-amdhsa--gfx1030\n";
  const auto k = parse_notes(notes);
  ASSERT_EQ(k.size(), 2u);
  EXPECT_EQ(k.at("_Z1kv").private_bytes, 272);
  EXPECT_EQ(k.at("_Z1kv").vgpr_spills, 3);
  EXPECT_EQ(k.at("_Z1kv").sgpr_spills, 0);
  EXPECT_EQ(k.at("_Z1jv").private_bytes, 0);
}

TEST(AmdKernelResources, NoKernelUsesScratchOrSpills) {
  std::string objects_list, targets_list;
  if (const char* env = std::getenv("HIPQ_AMD_OBJECTS")) objects_list = env;
  if (const char* env = std::getenv("HIPQ_AMD_TARGETS")) targets_list = env;
#ifdef HIPQ_AMD_OBJECTS
  if (objects_list.empty()) objects_list = HIPQ_AMD_OBJECTS;
#endif
#ifdef HIPQ_AMD_TARGETS
  if (targets_list.empty()) targets_list = HIPQ_AMD_TARGETS;
#endif
  const auto objects = split(objects_list, ',');
  const auto targets = split(targets_list, ',');
  ASSERT_FALSE(objects.empty()) << "no objects to read: set HIPQ_AMD_OBJECTS";
  ASSERT_FALSE(targets.empty()) << "no GPU targets: set HIPQ_AMD_TARGETS";
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("hipq-amd-resources-" + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  int kernels = 0;
  for (const std::string& obj : objects) {
    ASSERT_TRUE(std::filesystem::exists(obj)) << obj << " not found: build hipq_kernels first";
    int status = 0;
    const std::string sections = command_output("objdump -h '" + obj + "' 2>&1", &status);
    ASSERT_EQ(status, 0) << "objdump -h " << obj << ": " << sections;
    if (sections.find(".hip_fatbin") == std::string::npos) continue;  // host-only object
    const std::string fatbin = (tmp / "fatbin").string();
    std::string out = command_output(
        "objcopy -O binary --only-section=.hip_fatbin '" + obj + "' '" + fatbin + "' 2>&1", &status);
    ASSERT_EQ(status, 0) << "objcopy " << obj << ": " << out;
    for (const std::string& target : targets) {
      const std::string co = (tmp / "code.o").string();
      out = command_output("clang-offload-bundler-15 --unbundle --type=o --targets=hipv4-amdgcn-amd-amdhsa--" + target +
                    " --input='" + fatbin + "' --output='" + co + "' 2>&1",
                &status);
      ASSERT_EQ(status, 0) << "no " << target << " code object in " << obj << ": " << out;
      const std::string notes = command_output("llvm-readelf-15 --notes '" + co + "' 2>&1", &status);
      ASSERT_EQ(status, 0) << "llvm-readelf --notes " << obj << " (" << target << "): " << notes;
      for (const auto& [name, r] : parse_notes(notes)) {
        ++kernels;
        EXPECT_EQ(r.private_bytes, 0) << target << " " << name << " in " << obj << " uses " << r.private_bytes
                                      << " bytes of scratch memory a lane";
        EXPECT_EQ(r.vgpr_spills, 0) << target << " " << name << " spills VGPRs";
        EXPECT_EQ(r.sgpr_spills, 0) << target << " " << name << " spills SGPRs";
      }
    }
  }
  std::filesystem::remove_all(tmp);
  EXPECT_GT(kernels, 20) << "too few kernels found in the objects: are they the AMD build's?";
  std::printf("checked %d kernels in %zu objects for %zu target(s)\n", kernels, objects.size(), targets.size());
}

}  // namespace
