// Test fixture: a real SQLite database (in a temporary directory) filled the
// way the coordinator fills it — through db::JobStore: a batch of
// prompts × seeds × repeats, two workers (two GPUs, two hosts, two builds),
// each job leased and its result recorded with phase and step timings.
// Worker "b" runs 10% slower than worker "a"; each worker's first job is cold
// (has a load phase). One job fails for good; one stays queued.
// Timings are deterministic (SplitMix-style hash of the job id).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include <unistd.h>

#include "db/database.h"
#include "db/job_store.h"
#include "db/records.h"

namespace hipq::db::testing {

struct RunHistory {
  std::filesystem::path dir;      // temporary; removed by the destructor
  std::filesystem::path db_path;
  std::unique_ptr<Database> db;
  int64_t batch_id = 0;
  std::vector<int64_t> done_jobs;  // jobs with a result, in order recorded
  int64_t failed_job = 0;
  int64_t queued_job = 0;
  static constexpr double kStart = 1790000000.0;  // 2026-09-21T...; all runs after it
  static constexpr int kSteps = 8;

  RunHistory() = default;
  RunHistory(const RunHistory&) = delete;
  RunHistory& operator=(const RunHistory&) = delete;
  ~RunHistory() {
    db.reset();
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
};

inline double jitter(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return static_cast<double>(x >> 11) / 9007199254740992.0 - 0.5;  // [-0.5, 0.5)
}

// prompts × seeds × repeats jobs (+1 that fails, +1 left queued).
inline void fill_run_history(RunHistory& h, int prompts = 2, int seeds = 3, int repeats = 2) {
  h.dir = std::filesystem::temp_directory_path() /
          ("hipq-runhist-" + std::to_string(::getpid()) + "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(h.dir / "out");
  h.db_path = h.dir / "hipq.db";
  auto db = Database::open_and_migrate(h.db_path);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  h.db = std::move(db).value();
  JobStore store(*h.db);

  NewBatch batch;
  batch.name = "history";
  batch.output_root = (h.dir / "out").string();
  batch.save = {"latent", "png"};
  batch.golden_source = "store";
  batch.manifest_path = "examples/history.yaml";
  batch.manifest_text = "model: synthetic:tiny-sdxl\n";
  const char* prompt_text[] = {"a red fox in snow", "a lighthouse at dusk", "a bowl of ramen"};
  int ordinal = 0;
  for (int p = 0; p < prompts; ++p) {
    for (int s = 0; s < seeds; ++s) {
      for (int r = 0; r < repeats; ++r) {
        NewJob j;
        j.ordinal = ordinal++;
        j.model = "synthetic:tiny-sdxl";
        j.prompt = prompt_text[p % 3];
        // Prompt 0 has no Category tag: `tag:Category` puts it in "(none)".
        if (p == 0) j.tags = {"animals"};
        else j.tags = {"places", p == 1 ? "category:Architecture" : "Category:Food"};
        j.seed = 1000 + static_cast<uint64_t>(s);
        j.repeat_index = r;
        j.width = 64;
        j.height = 64;
        j.steps = RunHistory::kSteps;
        j.guidance = 5.0;
        j.sampler = "euler";
        j.precision = "fp32";
        j.output_dir = "job" + std::to_string(j.ordinal);
        batch.jobs.push_back(j);
      }
    }
  }
  for (int extra = 0; extra < 2; ++extra) {
    NewJob j = batch.jobs.front();
    j.ordinal = ordinal++;
    j.output_dir = "job" + std::to_string(j.ordinal);
    batch.jobs.push_back(j);
  }
  double now = RunHistory::kStart;
  auto id = store.insert_batch(batch, now);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  h.batch_id = *id;

  WorkerRecord wa{.id = "boxa/0", .host = "boxa", .device_index = 0, .device_name = "NVIDIA H200",
                  .arch = "sm_90", .memory_bytes = 141LL << 30, .runtime_version = "13.0",
                  .driver_version = "580", .build_sha = "abc1234", .backend = "hip", .state = "idle",
                  .curve_key = std::nullopt};
  WorkerRecord wb = wa;
  wb.id = "boxb/0";
  wb.host = "boxb";
  wb.device_name = "AMD Radeon RX 6800";
  wb.arch = "gfx1030";
  wb.build_sha = "def5678";
  ASSERT_TRUE(store.upsert_worker(wa, now).ok());
  ASSERT_TRUE(store.upsert_worker(wb, now).ok());

  const int total_done = prompts * seeds * repeats;
  bool cold_a = true, cold_b = true;
  for (int k = 0; k < total_done + 1; ++k) {
    const bool on_b = (k % 2) == 1;
    const std::string worker = on_b ? wb.id : wa.id;
    now += 2.0;
    auto leased = store.lease_next(worker, {"synthetic:tiny-sdxl"}, now, 60.0);
    ASSERT_TRUE(leased.ok()) << leased.status().ToString();
    ASSERT_TRUE(leased->has_value());
    const LeasedJob& lj = **leased;
    if (k == total_done) {
      auto f = store.record_failure(lj.job.id, lj.attempt, worker, "synthetic failure: weights missing", false,
                                    now + 0.5);
      ASSERT_TRUE(f.ok()) << f.status().ToString();
      h.failed_job = lj.job.id;
      break;
    }
    const double slow = on_b ? 1.10 : 1.0;
    bool& cold = on_b ? cold_b : cold_a;
    NewResult res;
    res.job_id = lj.job.id;
    res.attempt = lj.attempt;
    res.worker_id = worker;
    const uint64_t jid = static_cast<uint64_t>(lj.job.id);
    res.cosine = 0.9995 + 0.0004 * jitter(jid * 7);
    if (lj.job.seed == 1002 && lj.job.repeat_index == 1) res.cosine = 0.9971;  // one seed drifts
    res.verdict = *res.cosine >= 0.999 ? "PASS" : "FAIL";
    res.max_abs = 0.01;
    res.rel_l2 = 0.02;
    res.psnr = 40.0;
    res.golden_key = "key" + std::to_string(lj.job.seed);
    res.outputs = {{"latent", lj.job.output_dir + "/latent.safetensors", std::string(64, 'a'), 4096},
                   {"png", lj.job.output_dir + "/image.png", std::string(64, 'b'), 2048}};
    res.peak_memory_bytes = cold ? (5LL << 28) : (1LL << 30);  // the cold job's load staging: 1.25 GiB
    res.warm = !cold;
    double step_total = 0;
    for (int st = 0; st < RunHistory::kSteps; ++st) {
      const double ms = slow * (100.0 + 3.0 * jitter(jid * 131 + static_cast<uint64_t>(st)));
      res.steps.push_back({st, ms, ms * 0.97});
      step_total += ms;
    }
    if (cold) res.phases.push_back({"load", slow * 2000.0 * (1 + 0.05 * jitter(jid)), std::nullopt});
    res.phases.push_back({"text_encode", slow * (20.0 + 2 * jitter(jid + 1)), slow * 19.0});
    res.phases.push_back({"denoise", step_total, step_total * 0.97});
    res.phases.push_back({"decode", slow * (50.0 + 4 * jitter(jid + 2)), slow * 48.0});
    res.phases.push_back({"write", 5.0 + jitter(jid + 3), std::nullopt});
    res.phases.push_back({"parity", 1.0 + 0.1 * jitter(jid + 4), 0.8});
    cold = false;
    ASSERT_TRUE(store.record_result(res, now + 1.0).ok());
    h.done_jobs.push_back(lj.job.id);
  }
  auto jobs = store.list_jobs(h.batch_id);
  ASSERT_TRUE(jobs.ok());
  for (const auto& j : *jobs) {
    if (j.state == JobState::kQueued) h.queued_job = j.id;
  }
}

}  // namespace hipq::db::testing
