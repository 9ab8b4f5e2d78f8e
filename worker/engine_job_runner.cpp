#include "worker/engine_job_runner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "base/fs.h"
#include "engine/job.h"
#include "engine/parity.h"
#include "engine/pipeline.h"
#include "kernels/backend.h"
#include "proto/input_digests_codec.h"
#include "proto/parity_gate_codec.h"
#include "proto/settings_codec.h"
#include "spec/generation_settings.h"
#include "spec/input_digests.h"
#include "spec/phases.h"

namespace hipq::worker {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

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
  const uint64_t seed = job.settings().seed();
  out.append("-j")
      .append(std::to_string(job.job_id()))
      .append("-s")
      .append(std::to_string(seed))
      .append(".png");
  return out;
}

EngineJobRunner::EngineJobRunner(std::unique_ptr<kernels::Backend> backend, std::string backend_name,
                                 int device, engine::Placement placement)
    : backend_(std::move(backend)),
      backend_name_(std::move(backend_name)),
      device_(device),
      placement_(placement) {}

EngineJobRunner::~EngineJobRunner() {
  // Pipelines hold buffers of the backend: release them first.
  pipelines_.clear();
}

Result<std::unique_ptr<EngineJobRunner>> EngineJobRunner::create(const std::string& backend, int device,
                                                                 engine::Placement placement) {
  HIPQ_ASSIGN_OR_RETURN(auto b, kernels::make_backend(backend, device));
  return std::unique_ptr<EngineJobRunner>(new EngineJobRunner(std::move(b), backend, device, placement));
}

void EngineJobRunner::describe(proto::WorkerHello& hello) const {
  const kernels::BackendInfo& info = backend_->info();
  hello.set_device_index(info.device_index);
  hello.set_device_name(info.device_name);
  hello.set_arch(info.arch);
  hello.set_memory_bytes(info.memory_bytes);
  const kernels::MemoryStats mem = backend_->memory_stats();
  hello.set_memory_free_bytes(mem.device_free);
  hello.set_memory_limit_bytes(mem.limit);
  hello.set_placement(std::string(engine::placement_name(placement_)));
  hello.set_runtime_version(info.runtime_version);
  hello.set_driver_version(info.driver_version);
  hello.set_backend(info.name.empty() ? backend_name_ : info.name);
}

std::vector<std::string> EngineJobRunner::loaded_models() const {
  std::vector<std::string> out;
  for (const auto& [spec, p] : pipelines_) out.push_back(spec);
  return out;
}

std::vector<proto::HeldModel> EngineJobRunner::held_models() const {
  std::vector<proto::HeldModel> out;
  for (const auto& [spec, p] : pipelines_) {
    std::vector<spec::LoraSpec> loras;
    std::vector<std::string> digests;
    for (const auto& l : p->loras()) {
      loras.push_back(l.spec);
      digests.push_back(l.sha256);
    }
    proto::HeldModel& h = out.emplace_back();
    h.set_model(spec);
    h.set_lora_key(spec::lora_set_key(loras, digests));
  }
  return out;
}

Result<engine::Pipeline*> EngineJobRunner::pipeline_for(const std::string& model,
                                                        const std::string& precision,
                                                        const std::vector<spec::LoraSpec>& loras,
                                                        bool* loaded_now, const std::string& keep) {
  *loaded_now = false;
  if (auto it = pipelines_.find(model); it != pipelines_.end()) return it->second.get();
  // Loaded at the job's precision: an fp16 job never needs the fp32 weights on the device.
  // With the job's LoRA set merged as it loads, so the first job of a set is
  // one load, not a load and a switch.
  engine::LoadOptions options;
  options.precision = precision;
  options.loras = loras;
  options.placement = placement_;
  auto loaded = engine::Pipeline::load(model, *backend_, options);
  if (!loaded.ok() && loaded.status().code() == StatusCode::kResourceExhausted &&
      pipelines_.size() > pipelines_.count(keep)) {
    spdlog::warn("out of device memory loading {}; releasing {} other model(s) and retrying", model,
                 pipelines_.size() - pipelines_.count(keep));
    for (auto it = pipelines_.begin(); it != pipelines_.end();)
      it = it->first == keep ? std::next(it) : pipelines_.erase(it);
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

void add_timing(google::protobuf::RepeatedPtrField<proto::Timing>* out, const engine::PhaseTiming& t,
                int step) {
  auto* p = out->Add();
  p->set_phase(t.phase);
  p->set_step(step);
  p->set_host_ms(t.host_ms);
  p->set_gpu_ms(t.gpu_ms);
}

// A failed job step as the worker reports it (worker/job_runner.h).
Status job_error(const engine::GenerationRun& r, const std::string& model) {
  if (r.failed_step == engine::JobStep::kLoad) {
    StatusCode c = r.status.code();
    if (c == StatusCode::kNotFound || c == StatusCode::kCorruption || c == StatusCode::kPermissionDenied) {
      return Status::FailedPrecondition("model '" + model + "': " + r.status.message());
    }
  }
  return r.status;
}

}  // namespace

Result<engine::GenerationJob> EngineJobRunner::generation_job(const JobAssignment& job,
                                                              ProgressSink& progress,
                                                              const std::atomic<bool>& cancel) {
  engine::GenerationJob generation_job;
  generation_job.settings = proto::from_proto(job.settings());
  HIPQ_RETURN_IF_ERROR(generation_job.settings.validate());
  if (job.has_inputs()) generation_job.inputs = proto::from_proto(job.inputs());
  HIPQ_RETURN_IF_ERROR(generation_job.inputs.check_against(generation_job.settings));
  if (job.has_parity_gate()) generation_job.gate = proto::from_proto(job.parity_gate());
  HIPQ_RETURN_IF_ERROR(generation_job.gate.validate());
  const std::filesystem::path root = job.output_root();
  generation_job.output_dir = root / job.output_dir();
  auto wants = [&](const char* kind) {
    return std::find(job.save().begin(), job.save().end(), kind) != job.save().end();
  };
  generation_job.save_latent = wants("latent");
  generation_job.save_png = wants("png");
  generation_job.save_timings = wants("timings");
  generation_job.png_name = image_file_name(job);
  generation_job.provenance.batch_name = job.batch_name();
  generation_job.provenance.batch_id = job.batch_id();
  generation_job.provenance.job_id = job.job_id();
  generation_job.provenance.attempt = job.attempt();
  generation_job.golden.dir = job.golden_dir();
  generation_job.golden.key = job.golden_key();
  generation_job.golden.allow_unpinned = job.allow_unpinned_golden();
  generation_job.progress = [&progress](int step, int steps) {
    progress.progress(step, steps, spec::kPhaseDenoise);
  };
  generation_job.cancel = &cancel;
  const std::string model = job.model(), refiner = generation_job.settings.refiner,
                    precision = generation_job.settings.precision;
  generation_job.release_memory = [this, model, refiner] {
    // Free the other models (not the job's base or refiner) and try once more before giving up.
    bool freed = false;
    for (auto it = pipelines_.begin(); it != pipelines_.end();) {
      if (it->first == model || it->first == refiner) {
        ++it;
      } else {
        it = pipelines_.erase(it);
        freed = true;
      }
    }
    return freed;
  };
  // Base + refiner: the refiner's pipeline from the same cache, loaded beside the base.
  if (!refiner.empty()) {
    generation_job.load_refiner = [this, model, refiner, precision](bool* loaded_now) {
      return pipeline_for(refiner, precision, {}, loaded_now, model);
    };
  }
  return generation_job;
}

Result<proto::JobResult> EngineJobRunner::job_result(const JobAssignment& job, const engine::GenerationRun& r,
                                                     Clock::time_point start) const {
  if (!r.status.ok()) return job_error(r, job.model());
  const std::filesystem::path root = job.output_root();
  proto::JobResult outcome;
  outcome.set_job_id(job.job_id());
  outcome.set_attempt(job.attempt());
  for (const auto& t : r.phases) add_timing(outcome.mutable_phases(), t, 0);
  for (size_t i = 0; i < r.output.steps.size(); ++i) {
    add_timing(outcome.mutable_steps(), r.output.steps[i], static_cast<int>(i));
  }
  for (const engine::JobFile& f : r.files) {
    auto* o = outcome.add_outputs();
    o->set_kind(f.kind);
    o->set_path(std::filesystem::relative(f.path, root).string());
    o->set_sha256(f.sha256);
    o->set_bytes(f.bytes);
  }
  proto::Parity* parity = outcome.mutable_parity();
  parity->set_golden_key(r.golden.key);
  if (r.golden.golden) parity->set_golden_path(r.golden.path.string());
  const engine::ParityResult& judged = *r.parity;
  parity->set_verdict(std::string(engine::verdict_name(judged.verdict)));
  parity->set_reason(judged.verdict == engine::Verdict::kNoGolden && !job.golden_dir().empty()
                         ? "no golden " + r.golden.key + " in " + job.golden_dir()
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
  outcome.set_peak_memory_bytes(r.output.peak_memory_bytes);
  if (r.output.decode_fallback)
    spdlog::warn(
        "the planned decode ran out of device memory ({}); decoded again in {} px tiles (timings.json "
        "decode_fallback)",
        r.output.decode_fallback->reason, r.output.decode_fallback->vae_tile);
  outcome.set_warm(r.output.warm && !r.loaded_now);
  outcome.set_batch_size(r.output.batch_jobs);
  outcome.set_wall_ms(ms_since(start));
  return outcome;
}

Result<proto::JobResult> EngineJobRunner::run(const JobAssignment& job, ProgressSink& progress,
                                              const std::atomic<bool>& cancel) {
  const auto start = Clock::now();
  HIPQ_ASSIGN_OR_RETURN(engine::GenerationJob generation_job, generation_job(job, progress, cancel));
  engine::GenerationRun r = engine::run_job(generation_job, [&](bool* loaded_now) {
    return pipeline_for(job.model(), generation_job.settings.precision, generation_job.settings.loras,
                        loaded_now);
  });
  return job_result(job, r, start);
}

std::string EngineJobRunner::batch_key(const JobAssignment& job) const {
  const spec::GenerationSettings settings = proto::from_proto(job.settings());
  std::string key = engine::batch_key(settings);
  if (key.empty() || !settings.validate().ok()) return {};
  // The same LoRA paths with other contents are other weights.
  if (job.has_inputs())
    for (const std::string& digest : proto::from_proto(job.inputs()).loras) key += "\n" + digest;
  return job.model() + "\n" + key;
}

int EngineJobRunner::max_batch() const { return kMaxBatch; }

std::vector<Result<proto::JobResult>> EngineJobRunner::run_batch(
    const std::vector<JobAssignment>& jobs, const std::vector<ProgressSink*>& progress,
    const std::vector<const std::atomic<bool>*>& cancel) {
  const auto start = Clock::now();
  const size_t n = jobs.size();
  std::vector<Result<proto::JobResult>> out(n, Result<proto::JobResult>(Status::Internal("job not run")));
  std::vector<engine::GenerationJob> prepared;
  std::vector<size_t> index;  // prepared[k] is jobs[index[k]]
  std::string key;            // the first prepared job's
  for (size_t i = 0; i < n; ++i) {
    const std::string job_key = batch_key(jobs[i]);
    if (!prepared.empty() && job_key != key) {
      // Not of the first job's batch (the caller groups by key): it runs
      // alone, and run() prepares it.
      out[i] = run(jobs[i], *progress[i], *cancel[i]);
      continue;
    }
    auto g = generation_job(jobs[i], *progress[i], *cancel[i]);
    if (!g.ok()) {
      out[i] = g.status();
      continue;
    }
    if (prepared.empty()) key = job_key;
    prepared.push_back(std::move(*g));
    index.push_back(i);
  }
  if (prepared.empty()) return out;
  const JobAssignment& first = jobs[index.front()];
  // A copy: the jobs are moved into their chunks below, and `load` may run
  // after (a model whose load failed here is loaded again by the chunk).
  const spec::GenerationSettings settings = prepared.front().settings;
  auto load = [&](bool* loaded_now) {
    return pipeline_for(first.model(), settings.precision, settings.loras, loaded_now);
  };
  // As many at once as the memory plan allows (Pipeline::batch_capacity);
  // the rest in further batches of that size.
  size_t chunk = prepared.size();
  {
    bool loaded_now = false;
    auto p = load(&loaded_now);
    if (p.ok()) {
      auto cap = (*p)->batch_capacity(settings, static_cast<int>(prepared.size()));
      if (cap.ok()) chunk = static_cast<size_t>(std::max(1, *cap));
    }
  }
  for (size_t from = 0; from < prepared.size(); from += chunk) {
    const size_t to = std::min(prepared.size(), from + chunk);
    std::vector<engine::GenerationJob> part(
        std::make_move_iterator(prepared.begin() + static_cast<std::ptrdiff_t>(from)),
        std::make_move_iterator(prepared.begin() + static_cast<std::ptrdiff_t>(to)));
    std::vector<engine::GenerationRun> runs = engine::run_job_batch(part, load);
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t i = index[from + k];
      out[i] = job_result(jobs[i], runs[k], start);
    }
  }
  return out;
}

}  // namespace hipq::worker
