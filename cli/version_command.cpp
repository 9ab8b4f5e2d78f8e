#include <fmt/format.h>
#include <google/protobuf/stubs/common.h>
#include <png.h>
#include <spdlog/version.h>
#include <sqlite3.h>
#include <yaml-cpp/yaml.h>
#include <zmq.h>

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/build_info.h"
#include "cli/commands.h"
#include "kernels/backend.h"
#include "kernels/f16_math.h"
#include "kernels/fp32_math.h"

namespace hipq::cli {
namespace {

// How the build's hip backend computes fp32 GEMM products under the current
// HIPQ_FP32_MATH (kernels/fp32_math.h); no device is opened, so NVIDIA builds
// name what sm_80+ devices get and what older ones fall back to.
std::string fp32_products_line(std::string_view gpu_flavour) {
  auto mode = kernels::fp32_math_from_env();
  if (!mode.ok()) return mode.status().message();
  const bool tensor_cores = gpu_flavour == "nvidia";
  const std::string hip = kernels::fp32_products(*mode, tensor_cores);
  if (!tensor_cores) return hip;
  if (*mode == kernels::Fp32Math::kFma)
    return hip + " (HIPQ_FP32_MATH=fma; unset, sm_80+ devices take split tensor-core products, faster)";
  return hip + " on sm_80+ devices, fp32 FMA on older ones (HIPQ_FP32_MATH=fma: fp32 FMA everywhere)";
}

// How the build's hip backend computes f16 products under the current
// HIPQ_DOT2 (kernels/f16_math.h); no device is opened.
std::string f16_products_line(std::string_view gpu_flavour) {
  if (gpu_flavour == "amd") {
    if (!kernels::dot2_f16_from_env(/*amd=*/true))
      return "fp32 FMA (HIPQ_DOT2=1: packed-half dot2 kernels, v_dot2_f32_f16 on RDNA2, not yet run on a GPU)";
    return kernels::f16_products(true, false, false) + " (v_dot2_f32_f16 on RDNA2; bf16: fp32 FMA)";
  }
  if (gpu_flavour == "nvidia") {
    if (kernels::dot2_f16_from_env(/*amd=*/false))
      return kernels::f16_products(true, true, false) + " (HIPQ_DOT2=1: the AMD kernels, to check them here)";
    return "tensor cores, fp32 accumulate (wgmma on sm_90a, mma.sync on sm_80+; fp32 FMA on older devices)";
  }
  return "fp32 (cpu backend)";
}

}  // namespace

void add_version_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("version", "Print the build: git sha, compiler, GPU flavour, dependency versions");
  cmd->callback([&exit_code] {
    namespace bi = hipq::build_info;
    int zmaj, zmin, zpat;
    zmq_version(&zmaj, &zmin, &zpat);
    fmt::print("hipq {}\n", bi::kVersion);
    fmt::print("  git sha        {}\n", bi::kGitSha);
    fmt::print("  build type     {}\n", bi::kBuildType);
    fmt::print("  compiler       {}\n", bi::kCxxCompiler);
    fmt::print("  gpu flavour    {}\n", bi::kGpuFlavour);
    fmt::print("  gpu targets    {}\n", *bi::kGpuTargets ? bi::kGpuTargets : "-");
    fmt::print("  gpu compiler   {}\n", *bi::kGpuCompiler ? bi::kGpuCompiler : "-");
    fmt::print("  sanitizer      {}\n", *bi::kSanitizer ? bi::kSanitizer : "-");
    std::string backends;
    for (const auto& b : kernels::available_backends()) backends += (backends.empty() ? "" : ", ") + b;
    fmt::print("  backends       {}\n", backends);
    fmt::print("  fp32 products  {}\n", fp32_products_line(bi::kGpuFlavour));
    fmt::print("  f16 products   {}\n", f16_products_line(bi::kGpuFlavour));
    fmt::print("  dependencies   zeromq {}.{}.{} (curve {}), protobuf {}, sqlite {}, spdlog {}.{}.{}, fmt {}, "
               "nlohmann_json {}.{}.{}, libpng {}\n",
               zmaj, zmin, zpat, zmq_has("curve") ? "yes" : "no",
               google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION), sqlite3_libversion(),
               SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH, FMT_VERSION, NLOHMANN_JSON_VERSION_MAJOR,
               NLOHMANN_JSON_VERSION_MINOR, NLOHMANN_JSON_VERSION_PATCH, png_get_libpng_ver(nullptr));
    exit_code = kExitOk;
  });
}

}  // namespace hipq::cli
