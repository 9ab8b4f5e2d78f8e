// JobStore intake (db/job_store.h, "intake"): a batch, its manifest and its jobs
// go in whole or not at all.
#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/fs.h"
#include "db/database.h"
#include "db/job_rows.h"
#include "db/job_store.h"
#include "db/statement.h"
#include "db/transaction.h"

namespace hipq::db {

// ---- intake -------------------------------------------------------------------

Result<int64_t> JobStore::insert_batch(const NewBatch& batch, double now) {
  if (batch.max_attempts < 1) {
    return Status::InvalidArgument("batch '" + batch.name + "': max_attempts must be >= 1, got " +
                                   std::to_string(batch.max_attempts));
  }
  if (!std::filesystem::path(batch.output_root).is_absolute()) {
    return Status::InvalidArgument("batch '" + batch.name + "': output root '" + batch.output_root +
                                   "' must be an absolute path");
  }
  // Checked while inserting, one job at a time (a batch may be millions of
  // jobs, never held whole): a bad job rolls the whole batch back. A repeated
  // ordinal is the UNIQUE (batch_id, ordinal) constraint's to catch.
  auto check_job = [&](const NewJob& job) -> Status {
    if (has_dotdot_or_absolute(job.output_dir)) {
      return Status::InvalidArgument("batch '" + batch.name + "' job " + std::to_string(job.ordinal) +
                                     ": output dir '" + job.output_dir +
                                     "' must be a relative path inside the output root (no '..')");
    }
    if (job.inputs.loras.size() != job.loras.size() || job.init_image.empty() != job.inputs.init_image.empty()) {
      return Status::InvalidArgument("batch '" + batch.name + "' job " + std::to_string(job.ordinal) +
                                     ": every LoRA file and the init image need their sha256 (" +
                                     std::to_string(job.inputs.loras.size()) + " digests for " +
                                     std::to_string(job.loras.size()) + " LoRAs)");
    }
    return Status::Ok();
  };

  HIPQ_ASSIGN_OR_RETURN(auto txn, Transaction::begin_write(db_));
  std::string sha = sha256_hex(batch.manifest_text);
  {
    static constexpr char kInsertManifest[] =
        "INSERT INTO manifests (sha256, path, text, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING";
    Statement m = db_.prepare_cached(kInsertManifest);
    m.bind_text(0, sha);
    m.bind_text(1, batch.manifest_path);
    m.bind_text(2, batch.manifest_text);
    m.bind_double(3, now);
    HIPQ_RETURN_IF_ERROR(m.run());
  }
  int64_t manifest_id = 0;
  {
    static constexpr char kSelectManifestIdBySha[] = "SELECT id FROM manifests WHERE sha256 = ?";
    Statement m = db_.prepare_cached(kSelectManifestIdBySha);
    m.bind_text(0, sha);
    HIPQ_ASSIGN_OR_RETURN(bool row, m.step());
    if (!row) return Status::Internal("manifest " + sha + " vanished inside its own transaction");
    manifest_id = m.column_int64(0);
  }
  int64_t batch_id = 0;
  {
    static constexpr char kInsertBatch[] =
        "INSERT INTO batches (manifest_id, name, priority, state, max_attempts, output_root, save, golden_source, "
        "parity_gate, allow_unpinned, job_count, created_at) VALUES (?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?, ?)";
    Statement b = db_.prepare_cached(kInsertBatch);
    b.bind_int64(0, manifest_id);
    b.bind_text(1, batch.name);
    b.bind_int(2, batch.priority);
    b.bind_int(3, batch.max_attempts);
    b.bind_text(4, batch.output_root);
    b.bind_text(5, to_json_array(batch.save));
    b.bind_text(6, batch.golden_source);
    b.bind_text(7, batch.parity_gate.to_json().dump());
    b.bind_bool(8, batch.allow_unpinned);
    b.bind_int64(9, 0);  // set once the jobs are in
    b.bind_double(10, now);
    HIPQ_RETURN_IF_ERROR(b.run());
    batch_id = db_.last_insert_rowid();
  }
  static constexpr char kInsertJob[] =
      "INSERT INTO jobs (batch_id, ordinal, model, prompt, negative_prompt, tags, seed, repeat_index, width, height, "
      "steps, guidance, sampler, precision, rng, golden_key, output_dir, priority, state, attempts, created_at, "
      "updated_at, timestep_spacing, guidance_rescale, loras, lora_key, init_image, init_image_sha256, strength, "
      "refiner, refiner_switch_at, aesthetic_score, negative_aesthetic_score, vae_precision) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
      "?, ?)";
  Statement s = db_.prepare_cached(kInsertJob);
  int64_t count = 0;
  HIPQ_RETURN_IF_ERROR(for_each_new_job(batch, [&](const NewJob& job) -> Status {
    HIPQ_RETURN_IF_ERROR(check_job(job));
    s.reset();
    s.bind_int64(0, batch_id);
    s.bind_int64(1, job.ordinal);
    s.bind_text(2, job.model);
    s.bind_text(3, job.prompt);
    s.bind_text(4, job.negative_prompt);
    s.bind_text(5, to_json_array(job.tags));
    s.bind_int64(6, static_cast<int64_t>(job.seed));
    s.bind_int(7, job.repeat_index);
    s.bind_int(8, job.width);
    s.bind_int(9, job.height);
    s.bind_int(10, job.steps);
    s.bind_double(11, job.guidance);
    s.bind_text(12, job.sampler);
    s.bind_text(13, job.precision);
    s.bind_text(14, job.rng);
    s.bind_optional_text(15, job.golden_key);
    // Folders with "{batch_id}" resolved.
    s.bind_text(16, resolve_batch_id(job.output_dir, batch_id));
    s.bind_int(17, batch.priority);
    s.bind_double(18, now);
    s.bind_double(19, now);
    s.bind_text(20, job.timestep_spacing);
    s.bind_double(21, job.guidance_rescale);
    s.bind_text(22, loras_to_json(job.loras, job.inputs.loras));
    s.bind_text(23, spec::lora_set_key(job.loras, job.inputs.loras));
    s.bind_text(24, job.init_image);
    s.bind_text(25, job.inputs.init_image);
    s.bind_double(26, job.strength);
    s.bind_text(27, job.refiner);
    s.bind_double(28, job.refiner_switch_at);
    s.bind_double(29, job.aesthetic_score);
    s.bind_double(30, job.negative_aesthetic_score);
    s.bind_text(31, job.vae_precision);
    Status ran = s.run();
    if (ran.code() == StatusCode::kAlreadyExists) {
      return Status::InvalidArgument("batch '" + batch.name + "': job ordinal " + std::to_string(job.ordinal) +
                                     " appears twice");
    }
    HIPQ_RETURN_IF_ERROR(ran);
    ++count;
    return Status::Ok();
  }));
  if (count == 0) return Status::InvalidArgument("batch '" + batch.name + "' has no jobs");
  {
    static constexpr char kSetJobCount[] = "UPDATE batches SET job_count = ? WHERE id = ?";
    Statement c = db_.prepare_cached(kSetJobCount);
    c.bind_int64(0, count);
    c.bind_int64(1, batch_id);
    HIPQ_RETURN_IF_ERROR(c.run());
  }
  HIPQ_RETURN_IF_ERROR(txn.commit());
  return batch_id;
}

Status JobStore::check_folders_free(const NewBatch& batch) {
  // A folder with the new batch's id in it is the new batch's own: when every
  // job's has it (the default layout), nothing stored needs reading.
  bool any_shared = false;
  Status scan = for_each_new_job(batch, [&](const NewJob& job) -> Status {
    if (job.output_dir.find("{batch_id}") != std::string::npos) return Status::Ok();
    any_shared = true;
    return Status::Cancelled("a job folder without {batch_id}");  // enough: stop here
  });
  if (!any_shared) return scan;
  static constexpr char kSelectFoldersUnderRoot[] =
      "SELECT j.output_dir, j.batch_id, b.name FROM jobs j JOIN batches b ON b.id = j.batch_id "
      "WHERE b.output_root = ? ORDER BY j.id";
  std::unordered_map<std::string, std::pair<int64_t, std::string>> used;
  Statement u = db_.prepare_cached(kSelectFoldersUnderRoot);
  u.bind_text(0, batch.output_root);
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, u.step());
    if (!row) break;
    used.emplace(u.column_text(0), std::make_pair(u.column_int64(1), u.column_text(2)));
  }
  if (used.empty()) return Status::Ok();
  return for_each_new_job(batch, [&](const NewJob& job) -> Status {
    if (job.output_dir.find("{batch_id}") != std::string::npos) return Status::Ok();
    auto it = used.find(job.output_dir);
    if (it == used.end()) return Status::Ok();
    return Status::AlreadyExists("batch '" + batch.name + "': job folder '" +
                                 (std::filesystem::path(batch.output_root) / job.output_dir).string() +
                                 "' belongs to batch " + std::to_string(it->second.first) + " \"" +
                                 it->second.second + "\"; its files would be overwritten. Put {batch_id} in "
                                 "outputs.layout (the default layout has it) or choose another outputs.directory");
  });
}

}  // namespace hipq::db
