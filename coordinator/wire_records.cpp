#include "coordinator/wire_records.h"

#include <algorithm>
#include <filesystem>

#include "proto/input_digests_codec.h"
#include "proto/parity_gate_codec.h"
#include "proto/settings_codec.h"

namespace hipq::coordinator {

proto::JobAssignment make_assignment(const db::LeasedJob& leased, const DispatchSettings& settings) {
  proto::JobAssignment a;
  const db::JobRecord& job = leased.job;
  const db::BatchRecord& batch = leased.batch;
  a.set_job_id(job.id);
  a.set_attempt(leased.attempt);
  a.set_batch_id(batch.id);
  a.set_batch_name(batch.name);
  a.set_model(job.model);
  *a.mutable_settings() = proto::to_proto(job.generation_settings());
  if (!job.inputs.empty()) *a.mutable_inputs() = proto::to_proto(job.inputs);
  a.set_output_root(batch.output_root);
  a.set_output_dir(job.output_dir);
  for (const auto& s : batch.save) a.add_save(s);
  if (job.golden_key) a.set_golden_key(*job.golden_key);
  if (batch.golden_source == "store") {
    a.set_golden_dir(settings.store_golden_dir.string());
  } else {
    a.set_golden_dir(batch.golden_source);
  }
  *a.mutable_parity_gate() = proto::to_proto(batch.parity_gate);
  a.set_allow_unpinned_golden(batch.allow_unpinned);
  a.set_lease_seconds(settings.lease_seconds);
  return a;
}

db::NewResult to_db_result(const proto::JobResult& r, const std::string& worker_id) {
  db::NewResult out;
  out.job_id = r.job_id();
  out.attempt = r.attempt();
  out.worker_id = worker_id;
  const proto::Parity& p = r.parity();
  out.verdict = p.verdict();
  if (p.has_metrics()) {
    out.cosine = p.cosine();
    out.max_abs = p.max_abs();
    out.rel_l2 = p.rel_l2();
    if (p.has_psnr()) out.psnr = p.psnr();
  }
  if (!p.golden_key().empty()) out.golden_key = p.golden_key();
  if (!p.reason().empty()) out.parity_reason = p.reason();
  for (const auto& o : r.outputs()) out.outputs.push_back({o.kind(), o.path(), o.sha256(), o.bytes()});
  if (r.peak_memory_bytes() > 0) out.peak_memory_bytes = r.peak_memory_bytes();
  out.warm = r.warm();
  // 0 (unset: a runner that does not batch) and 1 both mean alone.
  out.batch_size = std::max(1, r.batch_size());
  for (const auto& t : r.phases()) {
    db::PhaseTimingRecord rec{t.phase(), t.host_ms(), std::nullopt};
    if (t.gpu_ms() > 0) rec.gpu_ms = t.gpu_ms();
    out.phases.push_back(rec);
  }
  for (const auto& t : r.steps()) {
    db::StepTimingRecord rec{t.step(), t.host_ms(), std::nullopt};
    if (t.gpu_ms() > 0) rec.gpu_ms = t.gpu_ms();
    out.steps.push_back(rec);
  }
  return out;
}

Status check_result_outputs(const proto::JobResult& r, std::string_view output_dir) {
  const std::filesystem::path dir(output_dir);
  for (const auto& o : r.outputs()) {
    const std::filesystem::path p(o.path());
    std::string shown = "output '" + o.path() + "'";
    if (p.empty() || p.is_absolute() || p.has_root_name()) {
      return Status::InvalidArgument(shown + " is not a path relative to the output root");
    }
    for (const auto& part : p) {
      if (part == ".." || part == ".") return Status::InvalidArgument(shown + " has a '" + part.string() + "' component");
    }
    auto [d, q] = std::mismatch(dir.begin(), dir.end(), p.begin(), p.end());
    if (d != dir.end() || q == p.end()) {
      return Status::InvalidArgument(shown + " is not inside the job's output directory '" + std::string(output_dir) +
                                     "'");
    }
  }
  return Status::Ok();
}

db::WorkerRecord to_worker_record(const proto::WorkerHello& h, const std::string& state) {
  db::WorkerRecord w;
  w.id = h.worker_id();
  w.host = h.host();
  w.device_index = h.device_index();
  w.device_name = h.device_name();
  w.arch = h.arch();
  w.memory_bytes = h.memory_bytes();
  w.runtime_version = h.runtime_version();
  w.driver_version = h.driver_version();
  w.build_sha = h.build_sha();
  w.backend = h.backend();
  w.state = state;
  return w;
}

std::vector<db::ModelHolding> to_held_models(const google::protobuf::RepeatedPtrField<proto::HeldModel>& held) {
  std::vector<db::ModelHolding> out;
  out.reserve(static_cast<size_t>(held.size()));
  for (const proto::HeldModel& h : held) out.push_back({h.model(), h.lora_key()});
  return out;
}

}  // namespace hipq::coordinator
