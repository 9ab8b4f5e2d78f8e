// hipq randn: torch-compatible initial noise written as safetensors.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "cli/commands.h"
#include "engine/rng.h"
#include "engine/safetensors.h"

namespace hipq::cli {
namespace {

Result<std::vector<int64_t>> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    int64_t v = 0;
    const auto* b = text.data() + start;
    const auto* e = text.data() + end;
    auto [ptr, ec] = std::from_chars(b, e, v);
    if (ec != std::errc() || ptr != e || v <= 0)
      return Status::InvalidArgument("--shape '" + text + "': dimension '" + std::string(b, e) +
                                     "' is not a positive integer (expected e.g. 1,4,128,128)");
    shape.push_back(v);
    start = end + 1;
  }
  if (shape.empty() || shape.size() > 6) return Status::InvalidArgument("--shape '" + text + "': 1 to 6 dimensions");
  int64_t n = 1;
  for (auto d : shape) {
    if (n > (int64_t{1} << 32) / d) return Status::InvalidArgument("--shape '" + text + "': more than 2^32 elements");
    n *= d;
  }
  return shape;
}

}  // namespace

void add_randn_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "randn", "Write torch.randn(shape) for a seed (CPU or CUDA generator) to a safetensors file (tensor \"noise\")");
  struct Opts {
    uint64_t seed = 0;
    std::string shape = "1,4,128,128";
    std::string rng = "torch-cpu";
    std::string dtype = "f32";
    std::string out;
  };
  auto opts = std::make_shared<Opts>();
  cmd->add_option("--seed", opts->seed, "generator seed")->required();
  cmd->add_option("--shape", opts->shape, "comma-separated shape")->capture_default_str();
  cmd->add_option("--rng", opts->rng, "torch-cpu | torch-cuda")->capture_default_str();
  cmd->add_option("--dtype", opts->dtype,
                  "dtype torch draws in (f32, f16, bf16): torch.randn(..., dtype=...) on the CPU generator is a "
                  "different sequence per dtype (stored as f32)")
      ->capture_default_str();
  cmd->add_option("--out", opts->out, "output .safetensors")->required();
  cmd->callback([opts, &exit_code] {
    auto kind = engine::parse_rng_kind(opts->rng);
    auto shape = parse_shape(opts->shape);
    for (const Status* s : {&kind.status(), &shape.status()}) {
      if (!s->ok()) {
        spdlog::error("{}", s->ToString());
        exit_code = kExitUsage;
        return;
      }
    }
    const auto dtype = kernels::parse_dtype(opts->dtype);
    if (!dtype || !(*dtype == kernels::DType::kF32 || *dtype == kernels::DType::kF16 ||
                    *dtype == kernels::DType::kBF16)) {
      spdlog::error("--dtype '{}': expected f32, f16 or bf16", opts->dtype);
      exit_code = kExitUsage;
      return;
    }
    int64_t n = 1;
    for (auto d : *shape) n *= d;
    auto values = engine::randn(*kind, opts->seed, n, *dtype);
    const auto tensor = engine::HostTensor::from_f32(std::move(values), *shape);
    const Status st = engine::write_safetensors(
        opts->out, {{"noise", tensor}},
        {{"seed", std::to_string(opts->seed)}, {"rng", std::string(engine::rng_kind_name(*kind))}, {"shape", opts->shape},
         {"dtype", std::string(kernels::dtype_name(*dtype))}});
    if (!st.ok()) {
      spdlog::error("{}", st.ToString());
      exit_code = kExitFailure;
      return;
    }
    exit_code = kExitOk;
  });
}

}  // namespace hipq::cli
