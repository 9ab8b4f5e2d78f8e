// `hipq weights export <source> --out DIR`: writes any model source (diffusers
// folder, single-file checkpoint, synthetic:NAME[@SEED]) as a diffusers folder
// that diffusers' from_pretrained loads unchanged (engine/export.h).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "engine/export.h"
#include "engine/model_files.h"
#include "kernels/dtype.h"

namespace hipq::cli {

namespace {
struct ExportArgs {
  std::string source;
  std::string out;
  std::string dtype = "f32";
  std::vector<std::string> components;
};

int run_export(const ExportArgs& a) {
  const auto dtype = kernels::parse_dtype(a.dtype);
  if (!dtype || !kernels::is_float(*dtype) || *dtype == kernels::DType::kF64) {
    fmt::print(stderr, "hipq weights export: --dtype '{}' is not one of f32, f16, bf16\n", a.dtype);
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  auto model = engine::open_model(a.source);
  if (!model.ok()) {
    fmt::print(stderr, "hipq weights export: cannot open model '{}': {}\n", a.source, model.status().ToString());
    return kExitFailure;
  }
  for (const std::string& w : model->warnings) fmt::print(stderr, "hipq weights export: warning: {}\n", w);
  engine::ExportOptions options;
  options.dtype = *dtype;
  options.components = a.components;
  Status st = engine::export_diffusers_folder(*model, a.out, options);
  if (!st.ok()) {
    fmt::print(stderr, "hipq weights export: {}\n", st.ToString());
    return kExitFailure;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("exported {} (weights sha256 {}) to {} in {:.1f} s", model->spec, model->weights_sha256, a.out, secs);
  fmt::print("{}\n", a.out);
  return kExitOk;
}
}  // namespace

void add_weights_command(CLI::App& app, int& exit_code) {
  auto* weights = app.add_subcommand("weights", "Model weights: export as a diffusers folder");
  weights->require_subcommand(1);
  auto args = std::make_shared<ExportArgs>();
  auto* exp = weights->add_subcommand(
      "export", "Write a model (folder, .safetensors checkpoint or synthetic:NAME[@SEED]) as a diffusers folder");
  exp->add_option("source", args->source, "Model: diffusers folder, checkpoint .safetensors, synthetic:NAME[@SEED]")
      ->required();
  exp->add_option("--out", args->out, "Output folder (created; files are replaced atomically)")->required();
  exp->add_option("--dtype", args->dtype, "Tensor dtype written: f32 (default), f16, bf16");
  exp->add_option("--components", args->components,
                  "Only these components (text_encoder, text_encoder_2, unet, vae); tokenizers, scheduler and "
                  "model_index are always written")
      ->delimiter(',');
  exp->callback([args, &exit_code] { exit_code = run_export(*args); });
}

}  // namespace hipq::cli
