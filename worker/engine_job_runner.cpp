#include "worker/engine_job_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "base/fs.h"
#include "kernels/backend.h"

#include "spec/generation_settings.h"
#include "engine/golden.h"
#include "spec/png.h"
#include "engine/image_parameters.h"
#include "engine/parity.h"
#include "engine/pipeline.h"

namespace hipq::worker {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

}  // namespace

std::string image_file_name(const JobAssignment& job) {
  // Manifests allow letters, digits, '-', '_' and '.' in batch names; anything
  // else from the wire (a '/' or "..") must not reach a path: use the id then.
  const std::string& name = job.batch_name();
  const bool plain = !name.empty() && name.size() <= 100 && name.front() != '.' &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
                     });
  std::string out = plain ? name : std::string("b").append(std::to_string(job.batch_id()));
  uint64_t seed = 0;
  try {
    seed = nlohmann::json::parse(job.settings_json()).value("seed", uint64_t{0});
  } catch (const nlohmann::json::exception&) {
    // run() rejects such settings before anything is written.
  }
  out.append("-j").append(std::to_string(job.job_id())).append("-s").append(std::to_string(seed)).append(".png");
  return out;
}

EngineJobRunner::EngineJobRunner(std::unique_ptr<kernels::Backend> backend, std::string backend_name, int device)
    : backend_(std::move(backend)), backend_name_(std::move(backend_name)), device_(device) {}

EngineJobRunner::~EngineJobRunner() {
  // Pipelines hold buffers of the backend: release them first.
  pipelines_.clear();
}

Result<std::unique_ptr<EngineJobRunner>> EngineJobRunner::create(const std::string& backend, int device) {
  HIPQ_ASSIGN_OR_RETURN(auto b, kernels::make_backend(backend, device));
  return std::unique_ptr<EngineJobRunner>(new EngineJobRunner(std::move(b), backend, device));
}

void EngineJobRunner::describe(proto::WorkerHello& hello) const {
  const kernels::BackendInfo& info = backend_->info();
  hello.set_device_index(info.device_index);
  hello.set_device_name(info.device_name);
  hello.set_arch(info.arch);
  hello.set_memory_bytes(info.memory_bytes);
  hello.set_runtime_version(info.runtime_version);
  hello.set_driver_version(info.driver_version);
  hello.set_backend(info.name.empty() ? backend_name_ : info.name);
}

std::vector<std::string> EngineJobRunner::loaded_models() const {
  std::vector<std::string> out;
  for (const auto& [spec, p] : pipelines_) out.push_back(spec);
  return out;
}


Result<engine::Pipeline*> EngineJobRunner::pipeline_for(const std::string& model, const std::string& precision,
                                                        bool* loaded_now) {
  *loaded_now = false;
  if (auto it = pipelines_.find(model); it != pipelines_.end()) return it->second.get();
  // Loaded at the job's precision: an fp16 job never needs the fp32 weights on the device.
  engine::LoadOptions options;
  options.precision = precision;
  auto loaded = engine::Pipeline::load(model, *backend_, options);
  if (!loaded.ok() && loaded.status().code() == StatusCode::kResourceExhausted && !pipelines_.empty()) {
    spdlog::warn("out of device memory loading {}; releasing {} other model(s) and retrying", model,
                 pipelines_.size());
    pipelines_.clear();
    loaded = engine::Pipeline::load(model, *backend_, options);
  }
  if (!loaded.ok()) return loaded.status().WithContext("loading model " + model);
  *loaded_now = true;
  engine::Pipeline* p = loaded->get();
  for (const std::string& w : p->warnings()) spdlog::warn("model {}: {}", model, w);
  pipelines_[model] = std::move(*loaded);
  return p;
}

namespace {

void add_timing(google::protobuf::RepeatedPtrField<proto::Timing>* out, const engine::PhaseTiming& t, int step) {
  auto* p = out->Add();
  p->set_phase(t.phase);
  p->set_step(step);
  p->set_host_ms(t.host_ms);
  p->set_gpu_ms(t.gpu_ms);
}

Status add_output(JobOutcome& out, const std::filesystem::path& root, const std::filesystem::path& file,
                  const std::string& kind) {
  HIPQ_ASSIGN_OR_RETURN(std::string sha, sha256_file(file));
  std::error_code ec;
  auto size = std::filesystem::file_size(file, ec);
  if (ec) return Status::IOError(file.string() + ": " + ec.message());
  auto* o = out.add_outputs();
  o->set_kind(kind);
  o->set_path(std::filesystem::relative(file, root).string());
  o->set_sha256(sha);
  o->set_bytes(static_cast<int64_t>(size));
  return Status::Ok();
}

}  // namespace

Result<JobOutcome> EngineJobRunner::run(const JobAssignment& job, ProgressSink& progress,
                                        const std::atomic<bool>& cancel) {
  auto start = Clock::now();
  nlohmann::json settings_json;
  try {
    settings_json = nlohmann::json::parse(job.settings_json());
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("job settings are not JSON: ") + e.what());
  }
  HIPQ_ASSIGN_OR_RETURN(spec::GenerationSettings settings, spec::GenerationSettings::from_json(settings_json));
  HIPQ_RETURN_IF_ERROR(settings.validate());
  engine::ParityGate gate;
  if (!job.parity_gate_json().empty()) {
    try {
      HIPQ_ASSIGN_OR_RETURN(gate, engine::ParityGate::from_json(nlohmann::json::parse(job.parity_gate_json())));
    } catch (const nlohmann::json::exception& e) {
      return Status::InvalidArgument(std::string("parity gate is not JSON: ") + e.what());
    }
  }
  const std::filesystem::path root = job.output_root();
  const std::filesystem::path dir = root / job.output_dir();
  // Before any GPU work: an unwritable output fails now, not after the run.
  // It is a configuration error: every job of the batch writes under the
  // same root, so the batch fails at once instead of retrying each job.
  if (Status w = check_writable_directory(dir); !w.ok()) {
    return Status::FailedPrecondition("output directory: " + w.message());
  }

  bool loaded_now = false;
  auto load_start = Clock::now();
  auto loaded = pipeline_for(job.model(), settings.precision, &loaded_now);
  if (!loaded.ok()) {
    StatusCode c = loaded.status().code();
    if (c == StatusCode::kNotFound || c == StatusCode::kCorruption || c == StatusCode::kPermissionDenied) {
      return Status::FailedPrecondition("model '" + job.model() + "': " + loaded.status().message());
    }
    return loaded.status();
  }
  engine::Pipeline* pipeline = *loaded;
  double load_ms = ms_since(load_start);

  engine::ProgressFn on_step = [&](int step, int steps) { progress.progress(step, steps, "denoise"); };
  auto generated = pipeline->generate(settings, on_step, &cancel);
  if (!generated.ok() && generated.status().code() == StatusCode::kResourceExhausted && pipelines_.size() > 1) {
    // Free the other models and try once more before giving up.
    for (auto it = pipelines_.begin(); it != pipelines_.end();) {
      it = it->first == job.model() ? std::next(it) : pipelines_.erase(it);
    }
    generated = pipeline->generate(settings, on_step, &cancel);
  }
  if (!generated.ok()) return generated.status();
  engine::GenerationOutput& out = *generated;

  JobOutcome outcome;
  outcome.set_job_id(job.job_id());
  outcome.set_attempt(job.attempt());
  if (loaded_now && std::none_of(out.phases.begin(), out.phases.end(),
                                 [](const engine::PhaseTiming& t) { return t.phase == "load"; })) {
    add_timing(outcome.mutable_phases(), engine::PhaseTiming{"load", load_ms, 0}, 0);
  }
  for (const auto& t : out.phases) add_timing(outcome.mutable_phases(), t, 0);
  for (size_t i = 0; i < out.steps.size(); ++i) add_timing(outcome.mutable_steps(), out.steps[i], static_cast<int>(i));

  // ---- write
  auto write_start = Clock::now();
  engine::OutputInfo info{pipeline->model_spec(), pipeline->weights_sha256(), pipeline->scheduler_config(),
                          backend_->info().name, backend_->info().device_name};
  auto wants = [&](const char* kind) {
    return std::find(job.save().begin(), job.save().end(), kind) != job.save().end();
  };
  if (wants("latent")) {
    auto path = dir / "latent.safetensors";
    HIPQ_RETURN_IF_ERROR(engine::write_latent_file(path, out, settings, info));
    HIPQ_RETURN_IF_ERROR(add_output(outcome, root, path, "latent"));
  }
  if (wants("png") && !out.rgb.empty()) {
    auto path = dir / image_file_name(job);
    engine::ImageProvenance provenance{pipeline->model_spec(), pipeline->weights_sha256(), job.batch_name(),
                                       job.batch_id(),         job.job_id(),              job.attempt()};
    HIPQ_RETURN_IF_ERROR(spec::write_png(path, spec::RgbImage{out.width, out.height, out.rgb},
                                           engine::png_metadata(settings, provenance)));
    HIPQ_RETURN_IF_ERROR(add_output(outcome, root, path, "png"));
  }
  double write_ms = ms_since(write_start);

  // ---- parity
  auto parity_start = Clock::now();
  proto::Parity* parity = outcome.mutable_parity();
  std::string key = job.golden_key().empty() ? spec::golden_key(pipeline->weights_sha256(), settings)
                                             : job.golden_key();
  parity->set_golden_key(key);
  std::optional<engine::Golden> golden;
  if (!job.golden_dir().empty()) {
    auto found = spec::find_golden_file(job.golden_dir(), key);
    if (found.ok()) {
      engine::GoldenReadOptions ro;
      ro.allow_unpinned = job.allow_unpinned_golden();
      HIPQ_ASSIGN_OR_RETURN(engine::Golden g, engine::read_golden(*found, ro));
      golden = std::move(g);
      parity->set_golden_path(found->string());
    } else if (found.status().code() != StatusCode::kNotFound) {
      return found.status();
    }
  }
  HIPQ_ASSIGN_OR_RETURN(engine::ParityResult judged,
                        engine::check_parity(out, golden ? &*golden : nullptr, gate));
  parity->set_verdict(std::string(engine::verdict_name(judged.verdict)));
  parity->set_reason(judged.verdict == engine::Verdict::kNoGolden && !job.golden_dir().empty()
                         ? "no golden " + key + " in " + job.golden_dir()
                         : judged.reason);
  if (judged.metrics) {
    parity->set_has_metrics(true);
    parity->set_cosine(judged.metrics->cosine);
    parity->set_max_abs(judged.metrics->max_abs);
    parity->set_rel_l2(judged.metrics->rel_l2);
    if (judged.metrics->has_psnr) {
      parity->set_has_psnr(true);
      parity->set_psnr(judged.metrics->psnr);
    }
  }
  double parity_ms = ms_since(parity_start);
  add_timing(outcome.mutable_phases(), engine::PhaseTiming{"write", write_ms, 0}, 0);
  add_timing(outcome.mutable_phases(), engine::PhaseTiming{"parity", parity_ms, 0}, 0);

  if (wants("timings")) {
    nlohmann::json t = engine::timings_json(out, settings, info);
    t["parity"] = judged.to_json();
    auto path = dir / "timings.json";
    HIPQ_RETURN_IF_ERROR(write_file_atomic(path, t.dump(2) + "\n"));
    HIPQ_RETURN_IF_ERROR(add_output(outcome, root, path, "timings"));
  }
  outcome.set_peak_memory_bytes(out.peak_memory_bytes);
  outcome.set_warm(out.warm && !loaded_now);
  outcome.set_wall_ms(ms_since(start));
  return outcome;
}


}  // namespace hipq::worker
