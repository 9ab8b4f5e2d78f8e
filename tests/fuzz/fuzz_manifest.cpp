#include <filesystem>

#include "base/check.h"
#include "coordinator/manifest.h"
#include "tests/fuzz/fuzz_entries.h"

namespace hipq::fuzz {

void manifest(std::string_view bytes) {
  // A directory that does not exist: prompt files and outputs resolve
  // below it and are never found, so the fuzzer touches no real files.
  auto m = coordinator::parse_manifest_text(bytes, "/nonexistent-hipq-fuzz/m.yaml");
  if (!m.ok()) {
    HIPQ_CHECK(!m.status().message().empty());
    return;
  }
  HIPQ_CHECK(m->job_count() <= coordinator::kMaxManifestJobs);
  db::NewBatch batch = m->to_new_batch();
  HIPQ_CHECK(static_cast<int64_t>(batch.jobs.size()) == m->job_count());
}

}  // namespace hipq::fuzz
