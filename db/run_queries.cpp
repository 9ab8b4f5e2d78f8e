#include "db/run_queries.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "db/database.h"
#include "db/statement.h"

namespace hipq::db {
namespace {

// ?1..?15 are numbered so a parameter can appear twice; Statement's 0-based
// bind index i is ?(i+1).
constexpr char kSelectRuns[] = R"sql(
SELECT j.id, j.batch_id, b.name, m.sha256, m.path, j.ordinal, j.model, j.prompt, j.tags, j.seed,
       j.repeat_index, j.width, j.height, j.steps, j.guidance, j.sampler, j.precision, j.timestep_spacing,
       j.guidance_rescale, j.loras, j.init_image, j.strength, j.refiner, j.vae_precision, j.state,
       j.verdict, j.attempts, b.output_root, j.output_dir, j.created_at,
       a.id, a.attempt, a.worker_id, a.started_at, a.finished_at, a.error,
       w.host, w.device_name, w.arch, w.build_sha, w.backend, w.runtime_version, w.driver_version,
       r.id, r.warm, r.cosine, r.max_abs, r.rel_l2, r.psnr, r.peak_memory_bytes, r.outputs, r.batch_size,
       COALESCE(r.recorded_at, a.started_at, j.created_at)
FROM jobs j
JOIN batches b ON b.id = j.batch_id
JOIN manifests m ON m.id = b.manifest_id
LEFT JOIN results r ON r.job_id = j.id
LEFT JOIN attempts a ON a.id = COALESCE(r.attempt_id,
    (SELECT a2.id FROM attempts a2 WHERE a2.job_id = j.id ORDER BY a2.attempt DESC LIMIT 1))
LEFT JOIN workers w ON w.id = a.worker_id
WHERE (?1 IS NULL OR j.batch_id = ?1)
  AND (?2 IS NULL OR substr(m.sha256, 1, length(?2)) = lower(?2) OR m.path = ?2)
  AND (?3 IS NULL OR instr(j.model, ?3) > 0)
  AND (?4 IS NULL OR instr(lower(j.prompt), lower(?4)) > 0
       OR EXISTS (SELECT 1 FROM json_each(j.tags) t WHERE t.value = ?4))
  AND (?5 IS NULL OR j.seed = ?5)
  AND (?6 IS NULL OR instr(lower(w.device_name), lower(?6)) > 0 OR w.arch = ?6)
  AND (?7 IS NULL OR w.host = ?7)
  AND (?8 IS NULL OR substr(w.build_sha, 1, length(?8)) = ?8)
  AND (?9 IS NULL OR j.verdict = ?9)
  AND (?10 IS NULL OR j.state = ?10)
  AND (?11 IS NULL OR COALESCE(r.recorded_at, a.started_at, j.created_at) >= ?11)
  AND (?12 IS NULL OR COALESCE(r.recorded_at, a.started_at, j.created_at) < ?12)
  AND (?13 IS NULL OR r.warm = ?13)
  AND (?14 = 0 OR r.id IS NOT NULL)
  AND (?16 IS NULL OR j.id > ?16)
ORDER BY j.id
LIMIT ?15
)sql";

constexpr char kSelectPhases[] =
    "SELECT phase, host_ms, gpu_ms FROM phase_timings WHERE attempt_id = ?";
constexpr char kSelectSteps[] =
    "SELECT step, host_ms, gpu_ms FROM step_timings WHERE attempt_id = ? ORDER BY step";

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

void bind_filter(Statement& s, const RunFilter& f) {
  s.bind_optional_int64(0, f.batch);
  s.bind_optional_text(1, f.manifest);
  s.bind_optional_text(2, f.model);
  s.bind_optional_text(3, f.prompt);
  if (f.seed) {
    s.bind_int64(4, static_cast<int64_t>(*f.seed));  // stored bit-for-bit (records.h)
  } else {
    s.bind_null(4);
  }
  s.bind_optional_text(5, f.gpu);
  s.bind_optional_text(6, f.host);
  s.bind_optional_text(7, f.build);
  if (f.verdict) {
    s.bind_text(8, upper(*f.verdict));
  } else {
    s.bind_null(8);
  }
  s.bind_optional_text(9, f.state);
  s.bind_optional_double(10, f.since);
  s.bind_optional_double(11, f.until);
  if (f.warm) {
    s.bind_int64(12, *f.warm ? 1 : 0);
  } else {
    s.bind_null(12);
  }
  s.bind_int64(13, f.with_result_only ? 1 : 0);
  s.bind_int64(14, f.limit > 0 ? f.limit : -1);
  s.bind_optional_int64(15, f.after_job);
}

Result<std::vector<std::string>> parse_tags(const std::string& text, int64_t job_id) {
  try {
    auto j = nlohmann::json::parse(text);
    return j.get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption("jobs.tags of job " + std::to_string(job_id) + " is not a JSON array of strings: " +
                              e.what());
  }
}

thread_local int64_t run_row_cap = 0;  // 0 = none (RunRowCap)

Status check_row_cap(size_t rows) {
  if (run_row_cap > 0 && static_cast<int64_t>(rows) > run_row_cap) {
    return Status::ResourceExhausted("query_runs returned " + std::to_string(rows) + " runs, over this thread's cap of " +
                                     std::to_string(run_row_cap) + " (read them a page at a time)");
  }
  return Status::Ok();
}

}  // namespace

RunRowCap::RunRowCap(int64_t max_rows) : previous_(run_row_cap) { run_row_cap = max_rows; }
RunRowCap::~RunRowCap() { run_row_cap = previous_; }

Result<std::vector<RunRow>> query_runs(Database& db, const RunFilter& filter) {
  Statement s = db.prepare(kSelectRuns);
  bind_filter(s, filter);
  std::vector<RunRow> rows;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    RunRow r;
    int c = 0;
    r.job_id = s.column_int64(c++);
    r.batch_id = s.column_int64(c++);
    r.batch_name = s.column_text(c++);
    r.manifest_sha256 = s.column_text(c++);
    r.manifest_path = s.column_text(c++);
    r.ordinal = s.column_int64(c++);
    r.model = s.column_text(c++);
    r.prompt = s.column_text(c++);
    HIPQ_ASSIGN_OR_RETURN(r.tags, parse_tags(s.column_text(c++), r.job_id));
    r.seed = static_cast<uint64_t>(s.column_int64(c++));
    r.repeat_index = s.column_int(c++);
    r.width = s.column_int(c++);
    r.height = s.column_int(c++);
    r.steps = s.column_int(c++);
    r.guidance = s.column_double(c++);
    r.sampler = s.column_text(c++);
    r.precision = s.column_text(c++);
    r.timestep_spacing = s.column_text(c++);
    r.guidance_rescale = s.column_double(c++);
    r.loras_json = s.column_text(c++);
    r.init_image = s.column_text(c++);
    r.strength = s.column_double(c++);
    r.refiner = s.column_text(c++);
    r.vae_precision = s.column_text(c++);
    r.state = s.column_text(c++);
    r.verdict = s.column_optional_text(c++);
    r.attempts = s.column_int(c++);
    r.output_root = s.column_text(c++);
    r.output_dir = s.column_text(c++);
    r.created_at = s.column_double(c++);
    r.attempt_id = s.column_optional_int64(c++);
    if (auto a = s.column_optional_int64(c++)) r.attempt = static_cast<int>(*a);
    r.worker_id = s.column_optional_text(c++);
    r.started_at = s.column_optional_double(c++);
    r.finished_at = s.column_optional_double(c++);
    r.error = s.column_optional_text(c++);
    r.host = s.column_optional_text(c++).value_or("");
    r.gpu = s.column_optional_text(c++).value_or("");
    r.arch = s.column_optional_text(c++).value_or("");
    r.build_sha = s.column_optional_text(c++).value_or("");
    r.backend = s.column_optional_text(c++).value_or("");
    r.runtime_version = s.column_optional_text(c++).value_or("");
    r.driver_version = s.column_optional_text(c++).value_or("");
    r.has_result = !s.column_is_null(c++);
    r.warm = s.column_bool(c++);
    r.cosine = s.column_optional_double(c++);
    r.max_abs = s.column_optional_double(c++);
    r.rel_l2 = s.column_optional_double(c++);
    r.psnr = s.column_optional_double(c++);
    r.peak_memory_bytes = s.column_optional_int64(c++);
    r.outputs_json = s.column_optional_text(c++).value_or("[]");
    r.batch_size = s.column_optional_int64(c++);
    r.time = s.column_double(c++);
    if (r.attempt_id) {
      HIPQ_ASSIGN_OR_RETURN(r.phases, query_phase_timings(db, *r.attempt_id));
    }
    rows.push_back(std::move(r));
  }
  HIPQ_RETURN_IF_ERROR(check_row_cap(rows.size()));
  return rows;
}

Result<std::vector<PhaseTimingRecord>> query_phase_timings(Database& db, int64_t attempt_id) {
  Statement s = db.prepare_cached(kSelectPhases);
  s.bind_int64(0, attempt_id);
  std::vector<PhaseTimingRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_text(0), s.column_double(1), s.column_optional_double(2)});
  }
  // phase_timings is keyed (attempt, phase): read in the one phase order instead.
  sort_phase_timings(out);
  return out;
}

Result<std::vector<StepTimingRecord>> query_step_timings(Database& db, int64_t attempt_id) {
  Statement s = db.prepare_cached(kSelectSteps);
  s.bind_int64(0, attempt_id);
  std::vector<StepTimingRecord> out;
  while (true) {
    HIPQ_ASSIGN_OR_RETURN(bool row, s.step());
    if (!row) break;
    out.push_back({s.column_int(0), s.column_double(1), s.column_optional_double(2)});
  }
  return out;
}

}  // namespace hipq::db
