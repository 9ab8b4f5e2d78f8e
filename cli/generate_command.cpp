// hipq generate: one image from a prompt and a seed, the single-shot command a
// user tries first. Everything that can be checked is checked before any
// device work: flags and settings, the output directory (created, and proven
// writable), the model files, the backend, and the golden when one is named.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "base/did_you_mean.h"
#include "base/fs.h"
#include "base/did_you_mean.h"
#include "cli/commands.h"
#include "cli/memory_options.h"
#include "engine/job.h"
#include "engine/model_files.h"
#include "engine/parity.h"
#include "engine/pipeline.h"
#include "kernels/backend.h"
#include "spec/generation_settings.h"
#include "spec/lora_spec.h"
#include "spec/parity_gate.h"

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
  std::vector<std::string> loras;  // PATH[:SCALE]
  MemoryOptions memory;
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
    return Status::InvalidArgument(fmt::format("{} {}: unknown{}; known: {}", flag, value, did_you_mean(value, known),
                                               spec::join_names(known)));
  };
  if (!spec::find_sampler(s.sampler))
    return Status::InvalidArgument(fmt::format("--sampler {}: unknown{}; known: {}", s.sampler,
                                               spec::suggest_sampler(s.sampler), spec::join_names(spec::known_samplers())));
  HIPQ_RETURN_IF_ERROR(one_of("--precision", s.precision, spec::known_precisions()));
  HIPQ_RETURN_IF_ERROR(one_of("--rng", s.rng, spec::known_rngs()));
  if (!s.timestep_spacing.empty())
    HIPQ_RETURN_IF_ERROR(one_of("--timestep-spacing", s.timestep_spacing, spec::known_timestep_spacings()));
  if (!(s.guidance_rescale >= 0.0f && s.guidance_rescale <= 1.0f))
    return Status::InvalidArgument(fmt::format("--guidance-rescale {}: must be in 0..1", s.guidance_rescale));
  if (!s.vae_precision.empty())
    HIPQ_RETURN_IF_ERROR(one_of("--vae-precision", s.vae_precision, spec::known_vae_precisions()));
  if (!(s.strength > 0.0f && s.strength <= 1.0f))
    return Status::InvalidArgument(fmt::format("--strength {}: must be in (0, 1]", s.strength));
  if (s.init_image.empty() && s.strength != 1.0f)
    return Status::InvalidArgument(fmt::format("--strength {}: needs --init-image (without one the job is text-to-image)",
                                               s.strength));
  if (!s.init_image.empty() && spec::denoising_steps(s.steps, s.strength) < 1)
    return Status::InvalidArgument(fmt::format("--strength {} of --steps {}: runs no step (int(steps * strength) = 0); "
                                               "raise one of them", s.strength, s.steps));
  if (!s.refiner.empty() && !(s.refiner_switch_at > 0.0f && s.refiner_switch_at < 1.0f))
    return Status::InvalidArgument(fmt::format("--refiner-switch-at {}: must be in (0, 1), the share of the schedule "
                                               "the base runs", spec::format_guidance(s.refiner_switch_at)));
  if (!(s.aesthetic_score >= 0.0f && s.aesthetic_score <= 10.0f))
    return Status::InvalidArgument(fmt::format("--aesthetic-score {}: must be in 0..10",
                                               spec::format_guidance(s.aesthetic_score)));
  if (!(s.negative_aesthetic_score >= 0.0f && s.negative_aesthetic_score <= 10.0f))
    return Status::InvalidArgument(fmt::format("--negative-aesthetic-score {}: must be in 0..10",
                                               spec::format_guidance(s.negative_aesthetic_score)));
  if (!s.refiner.empty() && !s.init_image.empty())
    return Status::InvalidArgument("--refiner with --init-image: not implemented; to refine an image, give the "
                                   "refiner as --model with --init-image and --strength");
  if (!s.refiner.empty()) {
    const auto& ok = spec::img2img_samplers();  // the split's tail is an img2img cut
    if (std::find(ok.begin(), ok.end(), s.sampler) == ok.end())
      return Status::InvalidArgument(fmt::format("--sampler {} with --refiner: the split of its schedule between two "
                                                 "models is not implemented; base + refiner runs with {}",
                                                 s.sampler, spec::join_names(ok)));
  }
  if (!s.refiner.empty() && !a.golden.empty())
    return Status::InvalidArgument("--golden with --refiner: hipq generate looks the golden up before it loads the "
                                   "refiner, whose weights are in the key; run base + refiner jobs with a golden "
                                   "through a manifest (hipq run / submit)");
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
  auto placement = apply_memory_options(a.memory);
  if (!placement.ok()) return fail(kExitUsage, placement.status().message());
  std::optional<spec::ParityGate> gate;
  if (!a.gate.empty()) {
    nlohmann::json gj;
    try {
      gj = nlohmann::json::parse(a.gate);
    } catch (const nlohmann::json::exception& e) {
      return fail(kExitUsage, std::string("--gate: not valid JSON: ") + e.what());
    }
    auto g = spec::ParityGate::from_json(gj);
    if (!g.ok()) return fail(kExitUsage, "--gate: " + g.status().message());
    gate = *g;
  }
  std::vector<spec::LoraSpec> loras;
  for (const std::string& text : a.loras) {
    auto l = spec::LoraSpec::parse(text);
    if (!l.ok()) return fail(kExitUsage, "--lora " + text + ": " + l.status().message());
    std::error_code ec;
    if (!fs::is_regular_file(l->path, ec))
      return fail(kExitFailure, "--lora " + text + ": no such file: " + l->path);
    loras.push_back(*l);
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
  const std::string& refiner_spec = a.settings.refiner;
  std::optional<engine::ModelComponents> refiner_model;
  if (!refiner_spec.empty()) {
    // Both models are opened, and their roles checked, before any device work.
    if (!(refiner_spec.rfind("synthetic:", 0) == 0)) {
      std::error_code ec;
      if (!fs::exists(refiner_spec, ec))
        return fail(kExitFailure, "--refiner " + refiner_spec + ": no such file or directory");
    }
    auto r = engine::open_model(refiner_spec);
    if (!r.ok()) return fail(kExitFailure, "--refiner " + refiner_spec + ": " + r.status().message());
    for (const std::string& w : r->warnings) spdlog::warn("generate: refiner: {}", w);
    if (!engine::is_sdxl_refiner(*r))
      return fail(kExitUsage, "--refiner " + refiner_spec +
                                  ": not an SDXL refiner (it has text encoder 1 or is not SDXL); give "
                                  "stable-diffusion-xl-refiner-1.0 (folder or checkpoint) or synthetic:tiny-sdxl-refiner");
    if (model->family != "sdxl" || engine::is_sdxl_refiner(*model))
      return fail(kExitUsage, "--refiner needs an SDXL base as --model; " + a.model + " is " +
                                  (engine::is_sdxl_refiner(*model) ? std::string("itself a refiner")
                                                                   : "a " + model->family + " model"));
    refiner_model = std::move(r).value();
  } else if (engine::is_sdxl_refiner(*model) && a.settings.init_image.empty()) {
    return fail(kExitUsage, "--model " + a.model +
                                " is an SDXL refiner: it runs img2img (--init-image and --strength), or as "
                                "--refiner after an SDXL base");
  }

  engine::GenerationJob job;
  job.settings = a.settings;
  job.settings.loras = loras;
  job.model_spec = a.model;
  job.output_dir = out_dir;
  job.check_parity = !a.golden.empty();
  job.gate = gate.value_or(spec::ParityGate{});
  if (job.check_parity) {
    // The golden is read (and its hash checked) before device work.
    const fs::path gp = a.golden;
    std::error_code ec;
    if (fs::is_directory(gp, ec)) {
      job.golden.dir = gp;
    } else if (!fs::exists(gp, ec)) {
      return fail(kExitFailure, "--golden " + gp.string() + ": no such file or directory");
    } else {
      job.golden.file = gp;
    }
    job.golden.allow_unpinned = a.allow_unpinned;
    // The golden key names the LoRA files and the init image by content.
    spec::InputDigests inputs;
    for (const auto& l : loras) {
      auto hashed = engine::lora::hash_lora_file(l.path);
      if (!hashed.ok()) return fail(kExitFailure, "--lora " + l.path + ": " + hashed.status().message());
      inputs.loras.push_back(hashed->sha256);
    }
    if (!a.settings.init_image.empty()) {
      auto hashed = sha256_file(a.settings.init_image);
      if (!hashed.ok()) return fail(kExitFailure, "--init-image " + a.settings.init_image + ": " + hashed.status().message());
      inputs.init_image = *hashed;
    }
    job.inputs = inputs;
    auto found = engine::look_up_golden(job.golden, model->weights_sha256, job.settings, inputs);
    if (!found.ok()) return fail(kExitFailure, "--golden: " + found.status().message());
    if (found->golden && found->golden->key != found->key) {
      spdlog::warn("golden {} was made for other inputs (key {}), this run's key is {}: comparing anyway",
                   found->path.string(), found->golden->key, found->key);
    }
    job.golden_found = std::move(found).value();
  }

  const std::string backend_name = resolve_backend(a.backend);
  auto backend = kernels::make_backend(backend_name, a.device);
  if (!backend.ok())
    return fail(kExitFailure, fmt::format("--backend {} --device {}: {}", backend_name, a.device,
                                          backend.status().message()));
  kernels::Backend& be = **backend;
  for (const auto& l : loras) spdlog::info("generate: LoRA {} at scale {}", l.path, l.scale);
  spdlog::info("generate: model {} ({}), {} on {} {}, {}x{}, {} steps, {}, {}, seed {}", a.model,
               model->family.empty() ? "family from weights" : model->family, backend_name,
               be.info().device_name, a.device, a.settings.width, a.settings.height, a.settings.steps,
               a.settings.sampler, a.settings.precision, a.settings.seed);
  if (refiner_model)
    spdlog::info("refiner: {} from {} of the schedule (aesthetic score {}, negative {})", refiner_spec,
                 spec::format_guidance(a.settings.refiner_switch_at), spec::format_guidance(a.settings.aesthetic_score),
                 spec::format_guidance(a.settings.negative_aesthetic_score));
  if (!a.settings.init_image.empty())
    spdlog::info("img2img: init image {}, strength {}: the last {} of the {} steps", a.settings.init_image,
                 spec::format_guidance(a.settings.strength),
                 spec::denoising_steps(a.settings.steps, a.settings.strength), a.settings.steps);

  Progress progress(!a.no_progress);
  job.progress = std::ref(progress);
  job.cancel = &g_cancel;
  std::unique_ptr<engine::Pipeline> pipeline;
  std::unique_ptr<engine::Pipeline> refiner;
  if (refiner_model) {
    // The refiner runs without LoRAs (they are the base's).
    job.load_refiner = [&](bool* loaded_now) -> Result<engine::Pipeline*> {
      engine::LoadOptions lo;
      lo.precision = a.settings.precision;
      lo.placement = *placement;
      HIPQ_ASSIGN_OR_RETURN(refiner, engine::Pipeline::load(*refiner_model, be, lo));
      *loaded_now = true;
      return refiner.get();
    };
  }
  std::signal(SIGINT, on_sigint);
  engine::GenerationRun r = engine::run_job(job, [&](bool* loaded_now) -> Result<engine::Pipeline*> {
    engine::LoadOptions lo;
    lo.precision = a.settings.precision;
    lo.placement = *placement;
    lo.loras = loras;
    HIPQ_ASSIGN_OR_RETURN(pipeline, engine::Pipeline::load(*model, be, lo));
    *loaded_now = true;
    return pipeline.get();
  });
  std::signal(SIGINT, SIG_DFL);
  if (!r.status.ok()) {
    switch (r.failed_step) {
      case engine::JobStep::kLoad: return fail(kExitFailure, "loading " + a.model + ": " + r.status.message());
      case engine::JobStep::kGolden: return fail(kExitFailure, "--golden: " + r.status.message());
      case engine::JobStep::kParity: return fail(kExitFailure, "parity: " + r.status.message());
      default: return fail(kExitFailure, r.status.message());
    }
  }
  const engine::GenerationOutput& out = r.output;
  const std::optional<engine::ParityResult>& parity = r.parity;
  const fs::path latent_path = out_dir / "latent.safetensors";
  const fs::path image_path = out_dir / "image.png";
  const fs::path timings_path = out_dir / "timings.json";

  fmt::print("wrote {}\n      {}\n      {}\n", latent_path.string(), image_path.string(), timings_path.string());
  for (const auto& p : r.phases) fmt::print("  {:<12} {:>10.1f} ms host {:>10.1f} ms device\n", p.phase, p.host_ms, p.gpu_ms);
  if (pipeline) {
    for (const auto& l : pipeline->loras())
      fmt::print("  lora {} ({}, {} layers, scale {:g}, hash {})\n", l.name, engine::lora::lora_format_name(l.format),
                 l.pairs, l.spec.scale, l.a1111_hash);
  }
  fmt::print("  denoise: {} UNet calls at batch {} ({})\n", out.model_calls, out.unet_batch,
             out.unet_batch == 1 ? "guidance off: the conditional pass only" : "classifier-free guidance");
  if (out.refiner) {
    const engine::RefinerSplit& sp = *out.refiner;
    fmt::print("  refiner {}: base {} steps (timesteps >= {}), refiner {} steps from step {} (timesteps < {})\n",
               sp.model_spec, sp.base_steps, sp.base_cutoff, sp.refiner_steps, sp.refiner_start + 1,
               sp.refiner_cutoff);
    for (const auto& m : out.model_phases)
      fmt::print("    {:<8} {:<12} {:>10.1f} ms host {:>10.1f} ms device\n", m.model, m.timing.phase,
                 m.timing.host_ms, m.timing.gpu_ms);
  }
  fmt::print("  peak device memory {:.1f} MiB, warm {}; placement {} (plan: {})\n", out.peak_memory_bytes / 1048576.0,
             out.warm, engine::placement_name(out.memory_plan.placement), out.memory_plan.describe());
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
  cmd->add_option("--timestep-spacing", args->settings.timestep_spacing,
                  spec::join_names(spec::known_timestep_spacings(), " | ") +
                      " (default: the model's scheduler config; few-step Lightning/Turbo models: trailing)");
  cmd->add_option("--guidance-rescale", args->settings.guidance_rescale,
                  "diffusers' guidance_rescale, 0..1 (0: off; with --guidance > 1)")
      ->capture_default_str();
  cmd->add_option("--vae-precision", args->settings.vae_precision,
                  "The VAE decode's dtype: " + spec::join_names(spec::known_vae_precisions(), " | ") +
                      " (default: the precision's, fp32 for an fp16 SDXL job as diffusers; bf16: about a third "
                      "of SDXL's fp32 decode time, the image within the 16-bit image gate)");
  cmd->add_option("--init-image", args->settings.init_image,
                  "img2img: a PNG or JPEG of exactly --width x --height pixels to start from");
  cmd->add_option("--strength", args->settings.strength,
                  "img2img denoising strength in (0, 1]: the share of the steps run (1: the image fully noised)")
      ->capture_default_str();
  cmd->add_option("--refiner", args->settings.refiner,
                  "SDXL refiner (folder, checkpoint or synthetic:NAME): the base (--model) runs the first part of "
                  "the schedule, the refiner the rest on the same latent, as diffusers' denoising_end / "
                  "denoising_start");
  cmd->add_option("--refiner-switch-at", args->settings.refiner_switch_at,
                  "With --refiner: the share of the schedule the base runs, in (0, 1)")
      ->capture_default_str();
  cmd->add_option("--aesthetic-score", args->settings.aesthetic_score,
                  "Refiner conditioning, 0..10 (the refiner as --refiner or as an img2img --model)")
      ->capture_default_str();
  cmd->add_option("--negative-aesthetic-score", args->settings.negative_aesthetic_score,
                  "Refiner conditioning of the negative branch, 0..10")
      ->capture_default_str();
  cmd->add_option("--backend", args->backend, "cpu | hip | auto (hip when a GPU is there)")->capture_default_str();
  cmd->add_option("--device", args->device, "GPU index for --backend hip")->capture_default_str();
  cmd->add_option("--out", args->out, "Output directory (created when missing)")->required();
  cmd->add_option("--golden", args->golden,
                  "Check parity against a golden file, or the golden of this run's key in a directory");
  cmd->add_option("--gate", args->gate, "Parity gate as JSON, e.g. {\"cosine_min\":0.9999,\"psnr_min\":30}");
  cmd->add_flag("--allow-unpinned", args->allow_unpinned, "Accept a golden with incomplete provenance");
  cmd->add_flag("--no-progress", args->no_progress, "No progress output");
  cmd->add_option("--lora", args->loras,
                  "LoRA adapter PATH[:SCALE] (scale 1 when omitted), repeatable; kohya/A1111 or diffusers/PEFT "
                  ".safetensors, folded into the weights before the first step (docs/adapters.md)");
  add_memory_options(cmd, args->memory);
  cmd->callback([args, &exit_code] { exit_code = run_generate(*args); });
}

}  // namespace hipq::cli
