// Run table: the per-job rows of the report ("runs" in report-data), bounded.
//
// A batch of at most `cap` runs lists every run in job id order, as it always
// did. A larger batch lists the `worst` runs worst by parity and the `slowest`
// runs slowest by total host time (one row per job when a run is both), in
// job id order; every other run is only counted (summary()). Worst by
// parity, in order: verdict NON_FINITE, verdict FAIL, state failed or dead
// (the error), then the lowest cosine; runs with none of these (queued, no
// golden and no cosine) are not ranked. Ties go to the lower job id. The
// selection keeps at most cap + worst + slowest rows, whatever the batch size.
//
// Thread safety: none.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "db/run_queries.h"

namespace hipq::coordinator::query {

inline constexpr size_t kRunTableCap = 1000;
inline constexpr size_t kRunTableWorst = 500;
inline constexpr size_t kRunTableSlowest = 500;

// {"job","prompt","seed","repeat","state","verdict","cosine","gpu","worker","warm","total_ms","error"}
nlohmann::json compact_run(const db::RunRow& r);

class RunTable {
 public:
  explicit RunTable(size_t cap = kRunTableCap, size_t worst = kRunTableWorst, size_t slowest = kRunTableSlowest);

  void add(const db::RunRow& r);
  // More runs seen than the cap: runs() is the selection, not every run.
  bool capped() const { return total_ > cap_; }
  // The rows, in job id order.
  nlohmann::json runs() const;
  // {"total": runs seen, "shown": rows, "cap", "worst_by_parity": rows chosen
  //  as worst, "slowest": rows chosen as slowest, "not_shown": total - shown}.
  nlohmann::json summary() const;

 private:
  // Smaller is worse (parity) or slower; the job id breaks ties.
  using Key = std::tuple<int, double, int64_t>;
  struct Entry {
    Key key;
    nlohmann::json run;
  };
  static void keep(std::vector<Entry>& heap, size_t n, Key key, const db::RunRow& r);

  size_t cap_, worst_n_, slowest_n_;
  size_t total_ = 0;
  std::vector<nlohmann::json> all_;  // every run while total_ <= cap_
  std::vector<Entry> worst_, slowest_;  // max-heaps on key: the front is the least bad kept
};

}  // namespace hipq::coordinator::query
