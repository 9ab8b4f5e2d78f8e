// hipq generate: one image from a prompt and a seed, the single-shot command a
// user tries first. Everything that can be checked is checked before any
// device work: flags and settings, the output directory (created, and proven
// writable), the model files, the backend, and the golden when one is named.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "base/fs.h"
#include "cli/commands.h"
#include "spec/generation_settings.h"
#include "engine/golden.h"
#include "spec/png.h"
#include "engine/image_parameters.h"
#include "engine/model_files.h"
#include "engine/parity.h"
#include "engine/phase_timer.h"
#include "engine/pipeline.h"
#include "kernels/backend.h"

namespace hipq::cli {
namespace {

namespace fs = std::filesystem;

struct GenerateArgs {
  std::string model;
  spec::GenerationSettings settings;
  std::string backend = "auto";
  int device = 0;
  std::string out;
  std::string golden;  // a golden file, or a directory of <key>.safetensors
  std::string gate;    // JSON, e.g. {"cosine_min":0.9999}
  bool allow_unpinned = false;
  bool no_progress = false;
};

std::atomic<bool> g_cancel{false};
extern "C" void on_sigint(int) { g_cancel.store(true); }

// A progress bar over steps on a terminal; one plain line per step otherwise.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0) {}
  void operator()(int step, int steps) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (step == 1) start_ = now;
    double elapsed = std::chrono::duration<double>(now - start_).count();
    if (!tty_) {
      std::fprintf(stderr, "step %d/%d\n", step, steps);
      return;
    }
    const int width = 30;
    int filled = steps > 0 ? step * width / steps : width;
    std::string bar(filled, '#');
    bar.append(width - filled, '.');
    double per = step > 1 ? elapsed / (step - 1) : 0.0;
    std::fprintf(stderr, "\r  denoise [%s] %d/%d  %.2f s/step ", bar.c_str(), step, steps, per);
    if (step == steps) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  bool tty_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

int fail(int code, const std::string& message) {
  spdlog::error("generate: {}", message);
  return code;
}

// Flag-level checks, each naming its flag, before anything else.
Status check_flags(const GenerateArgs& a) {
  const auto& s = a.settings;
  if (s.width < 8 || s.width % 8 != 0)
    return Status::InvalidArgument(fmt::format("--width {}: must be a positive multiple of 8", s.width));
  if (s.height < 8 || s.height % 8 != 0)
    return Status::InvalidArgument(fmt::format("--height {}: must be a positive multiple of 8", s.height));
  if (s.steps < 1) return Status::InvalidArgument(fmt::format("--steps {}: must be at least 1", s.steps));
  auto one_of = [](const char* flag, const std::string& value, const std::vector<std::string>& known) -> Status {
    for (const auto& k : known)
      if (k == value) return Status::Ok();
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return Status::InvalidArgument(fmt::format("{} {}: unknown; known: {}", flag, value, list));
  };
  HIPQ_RETURN_IF_ERROR(one_of("--sampler", s.sampler, spec::known_samplers()));
  HIPQ_RETURN_IF_ERROR(one_of("--precision", s.precision, spec::known_precisions()));
  HIPQ_RETURN_IF_ERROR(one_of("--rng", s.rng, spec::known_rngs()));
  if (Status v = s.validate(); !v.ok()) return v;
  if (a.device < 0) return Status::InvalidArgument(fmt::format("--device {}: must be >= 0", a.device));
  return Status::Ok();
}

std::string resolve_backend(const std::string& requested) {
  if (requested != "auto") return requested;
  for (const auto& b : kernels::available_backends())
    if (b == "hip" && kernels::gpu_device_count() > 0) return "hip";
  return "cpu";
}

int run_generate(const GenerateArgs& a) {
  if (Status st = check_flags(a); !st.ok()) return fail(kExitUsage, st.message());
  std::optional<engine::ParityGate> gate;
  if (!a.gate.empty()) {
    nlohmann::json gj;
    try {
      gj = nlohmann::json::parse(a.gate);
    } catch (const nlohmann::json::exception& e) {
      return fail(kExitUsage, std::string("--gate: not valid JSON: ") + e.what());
    }
    auto g = engine::ParityGate::from_json(gj);
    if (!g.ok()) return fail(kExitUsage, "--gate: " + g.status().message());
    gate = *g;
  }
  const fs::path out_dir = a.out;
  if (Status st = check_writable_directory(out_dir); !st.ok())
    return fail(kExitFailure, "--out " + out_dir.string() + ": output directory is not writable: " + st.message());

  const bool synthetic = a.model.rfind("synthetic:", 0) == 0;
  if (!synthetic) {
    std::error_code ec;
    if (!fs::exists(a.model, ec)) return fail(kExitFailure, "--model " + a.model + ": no such file or directory");
  }
  auto model = engine::open_model(a.model);
  if (!model.ok()) return fail(kExitFailure, "--model " + a.model + ": " + model.status().message());
  for (const std::string& w : model->warnings) spdlog::warn("generate: {}", w);
  const std::string weights_sha = model->weights_sha256;

  // The golden, when named, is read (and its hash checked) before device work.
  std::optional<engine::Golden> golden;
  bool golden_missing = false;
  if (!a.golden.empty()) {
    fs::path gp = a.golden;
    std::error_code ec;
    const std::string key = spec::golden_key(weights_sha, a.settings);
    if (fs::is_directory(gp, ec)) {
      auto found = spec::find_golden_file(gp, key);
      if (found.ok()) gp = *found;
      else golden_missing = true;
    } else if (!fs::exists(gp, ec)) {
      return fail(kExitFailure, "--golden " + gp.string() + ": no such file or directory");
    }
    if (!golden_missing) {
      engine::GoldenReadOptions ro;
      ro.allow_unpinned = a.allow_unpinned;
      auto g = engine::read_golden(gp, ro);
      if (!g.ok()) return fail(kExitFailure, "--golden: " + g.status().message());
      if (g->key != key) {
        spdlog::warn("golden {} was made for other inputs (key {}), this run's key is {}: comparing anyway",
                     gp.string(), g->key, key);
      }
      golden = std::move(g).value();
    }
  }

  const std::string backend_name = resolve_backend(a.backend);
  auto backend = kernels::make_backend(backend_name, a.device);
  if (!backend.ok())
    return fail(kExitFailure, fmt::format("--backend {} --device {}: {}", backend_name, a.device,
                                          backend.status().message()));
  kernels::Backend& be = **backend;
  spdlog::info("generate: model {} ({}), {} on {} {}, {}x{}, {} steps, {}, {}, seed {}", a.model,
               model->family.empty() ? "family from weights" : model->family, backend_name,
               be.info().device_name, a.device, a.settings.width, a.settings.height, a.settings.steps,
               a.settings.sampler, a.settings.precision, a.settings.seed);

  engine::LoadOptions lo;
  lo.precision = a.settings.precision;
  auto pipeline = engine::Pipeline::load(*model, be, lo);
  if (!pipeline.ok()) return fail(kExitFailure, "loading " + a.model + ": " + pipeline.status().message());

  std::signal(SIGINT, on_sigint);
  Progress progress(!a.no_progress);
  auto result = (*pipeline)->generate(a.settings, std::ref(progress), &g_cancel);
  std::signal(SIGINT, SIG_DFL);
  if (!result.ok()) return fail(kExitFailure, result.status().message());
  engine::GenerationOutput& out = *result;

  engine::OutputInfo info;
  info.model_spec = a.model;
  info.weights_sha256 = weights_sha;
  info.scheduler_config = (*pipeline)->scheduler_config();
  info.backend = backend_name;
  info.device_name = be.info().device_name;

  engine::PhaseTimer timer(nullptr);
  const fs::path latent_path = out_dir / "latent.safetensors";
  const fs::path image_path = out_dir / "image.png";
  const fs::path timings_path = out_dir / "timings.json";
  (void)timer.begin("write");
  if (Status st = engine::write_latent_file(latent_path, out, a.settings, info); !st.ok())
    return fail(kExitFailure, st.message());
  spec::RgbImage img{out.width, out.height, out.rgb};
  engine::ImageProvenance provenance;
  provenance.model_spec = a.model;
  provenance.weights_sha256 = weights_sha;
  if (Status st = spec::write_png(image_path, img, engine::png_metadata(a.settings, provenance)); !st.ok())
    return fail(kExitFailure, st.message());
  (void)timer.end();

  std::optional<engine::ParityResult> parity;
  if (!a.golden.empty()) {
    (void)timer.begin("parity");
    auto r = engine::check_parity(out, golden ? &*golden : nullptr, gate.value_or(engine::ParityGate{}));
    (void)timer.end();
    if (!r.ok()) return fail(kExitFailure, "parity: " + r.status().message());
    parity = *r;
  }
  auto extra = timer.finish();
  if (extra.ok()) out.phases.insert(out.phases.end(), extra->begin(), extra->end());

  nlohmann::json timings = engine::timings_json(out, a.settings, info);
  if (parity) {
    timings["parity"] = parity->to_json();
    timings["parity"]["golden"] = golden ? nlohmann::json(golden->key) : nlohmann::json(nullptr);
    timings["parity"]["gate"] = gate.value_or(engine::ParityGate{}).to_json();
  }
  if (Status st = write_file_atomic(timings_path, timings.dump(2) + "\n"); !st.ok())
    return fail(kExitFailure, st.message());

  fmt::print("wrote {}\n      {}\n      {}\n", latent_path.string(), image_path.string(), timings_path.string());
  for (const auto& p : out.phases) fmt::print("  {:<12} {:>10.1f} ms host {:>10.1f} ms device\n", p.phase, p.host_ms, p.gpu_ms);
  fmt::print("  peak device memory {:.1f} MiB, warm {}\n", out.peak_memory_bytes / 1048576.0, out.warm);
  if (parity) {
    fmt::print("parity: {}", engine::verdict_name(parity->verdict));
    if (parity->metrics) {
      const auto& m = *parity->metrics;
      fmt::print("  cosine {:.8f}  max_abs {:.3g}  rel_l2 {:.3g}", m.cosine, m.max_abs, m.rel_l2);
      if (m.has_psnr) fmt::print("  psnr {:.2f} dB", m.psnr);
    }
    if (!parity->reason.empty()) fmt::print("  ({})", parity->reason);
    fmt::print("\n");
    if (parity->verdict == engine::Verdict::kFail || parity->verdict == engine::Verdict::kNonFinite)
      return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Generate one image: latent.safetensors, image.png, timings.json");
  cmd->add_option("--model", args->model, "Model: a diffusers folder, a .safetensors checkpoint, or synthetic:NAME")
      ->required();
  cmd->add_option("--prompt", args->settings.prompt, "Prompt")->required();
  cmd->add_option("--negative", args->settings.negative_prompt, "Negative prompt (empty: as diffusers' default)");
  cmd->add_option("--seed", args->settings.seed, "Seed of the initial noise")->capture_default_str();
  cmd->add_option("--width", args->settings.width, "Width in pixels (multiple of 8)")->capture_default_str();
  cmd->add_option("--height", args->settings.height, "Height in pixels (multiple of 8)")->capture_default_str();
  cmd->add_option("--steps", args->settings.steps, "Denoising steps")->capture_default_str();
  cmd->add_option("--guidance", args->settings.guidance, "Classifier-free guidance scale")->capture_default_str();
  cmd->add_option("--sampler", args->settings.sampler, spec::join_names(spec::known_samplers(), " | "))
      ->capture_default_str();
  cmd->add_option("--precision", args->settings.precision, spec::join_names(spec::known_precisions(), " | "))
      ->capture_default_str();
  cmd->add_option("--rng", args->settings.rng, "Initial noise: " + spec::join_names(spec::known_rngs(), " | "))
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu | hip | auto (hip when a GPU is there)")->capture_default_str();
  cmd->add_option("--device", args->device, "GPU index for --backend hip")->capture_default_str();
  cmd->add_option("--out", args->out, "Output directory (created when missing)")->required();
  cmd->add_option("--golden", args->golden,
                  "Check parity against a golden file, or the golden of this run's key in a directory");
  cmd->add_option("--gate", args->gate, "Parity gate as JSON, e.g. {\"cosine_min\":0.9999,\"psnr_min\":30}");
  cmd->add_flag("--allow-unpinned", args->allow_unpinned, "Accept a golden with incomplete provenance");
  cmd->add_flag("--no-progress", args->no_progress, "No progress output");
  cmd->callback([args, &exit_code] { exit_code = run_generate(*args); });
}

}  // namespace hipq::cli
