// Parity accumulator: the parity block of a set of runs (min/mean/max cosine,
// pass rate, worst job; run_stats.h parity_summary) built one run at a time,
// so a million runs need not be held to summarise them.
//
// Memory: a few numbers and the worst run, plus 8 bytes per distinct seed
// (the "seeds" count is exact; seeds are kept sorted and deduplicated as they
// grow).
// Thread safety: none.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/run_queries.h"

namespace hipq::coordinator::query {

class ParityAccumulator {
 public:
  void add(const db::RunRow& r);
  // {"runs","seeds","gated","pass","no_golden","pass_rate","cosine_min",
  //  "cosine_mean","cosine_max","worst"} as parity_summary documents.
  nlohmann::json to_json() const;

 private:
  struct Worst {
    int64_t job = 0;
    uint64_t seed = 0;
    int repeat = 0;
    std::optional<double> cosine;
    std::optional<std::string> verdict;
  };
  size_t distinct_seeds() const;

  size_t runs_ = 0, pass_ = 0, gated_ = 0, no_golden_ = 0, with_cosine_ = 0;
  double cmin_ = std::numeric_limits<double>::infinity(), cmax_ = -std::numeric_limits<double>::infinity(), csum_ = 0;
  std::optional<Worst> worst_;
  mutable std::vector<uint64_t> seeds_;  // compacted (sort + unique) when it doubles
  mutable size_t compacted_ = 0;          // size after the last compaction
};

}  // namespace hipq::coordinator::query
