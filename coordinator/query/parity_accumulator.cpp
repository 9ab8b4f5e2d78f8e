#include "coordinator/query/parity_accumulator.h"

#include <algorithm>
#include <cmath>

namespace hipq::coordinator::query {

using nlohmann::json;

void ParityAccumulator::add(const db::RunRow& r) {
  ++runs_;
  seeds_.push_back(r.seed);
  if (seeds_.size() >= 2 * std::max<size_t>(compacted_, 4096)) {
    std::sort(seeds_.begin(), seeds_.end());
    seeds_.erase(std::unique(seeds_.begin(), seeds_.end()), seeds_.end());
    compacted_ = seeds_.size();
  }
  const std::string v = r.verdict.value_or("");
  if (v == "NO_GOLDEN") ++no_golden_;
  if (v == "PASS" || v == "FAIL" || v == "NON_FINITE") ++gated_;
  if (v == "PASS") ++pass_;
  auto as_worst = [&r] { return Worst{r.job_id, r.seed, r.repeat_index, r.cosine, r.verdict}; };
  if (r.cosine && std::isfinite(*r.cosine)) {
    ++with_cosine_;
    csum_ += *r.cosine;
    cmax_ = std::max(cmax_, *r.cosine);
    if (*r.cosine < cmin_) {
      cmin_ = *r.cosine;
      worst_ = as_worst();
    }
  }
  if (v == "NON_FINITE" && (!worst_ || worst_->verdict.value_or("") != "NON_FINITE")) worst_ = as_worst();
}

size_t ParityAccumulator::distinct_seeds() const {
  std::sort(seeds_.begin(), seeds_.end());
  seeds_.erase(std::unique(seeds_.begin(), seeds_.end()), seeds_.end());
  compacted_ = seeds_.size();
  return seeds_.size();
}

json ParityAccumulator::to_json() const {
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  json p{{"runs", runs_},
         {"seeds", distinct_seeds()},
         {"gated", gated_},
         {"pass", pass_},
         {"no_golden", no_golden_},
         {"pass_rate", gated_ ? json(static_cast<double>(pass_) / static_cast<double>(gated_)) : json(nullptr)},
         {"cosine_min", with_cosine_ ? json(cmin_) : json(nullptr)},
         {"cosine_mean", with_cosine_ ? json(csum_ / static_cast<double>(with_cosine_)) : json(nullptr)},
         {"cosine_max", with_cosine_ ? json(cmax_) : json(nullptr)}};
  if (worst_) {
    p["worst"] = {{"job", worst_->job},
                  {"seed", worst_->seed},
                  {"repeat", worst_->repeat},
                  {"cosine", opt(worst_->cosine)},
                  {"verdict", opt(worst_->verdict)}};
  } else {
    p["worst"] = nullptr;
  }
  return p;
}

}  // namespace hipq::coordinator::query
