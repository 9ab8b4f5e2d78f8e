#include "coordinator/query/run_table.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace hipq::coordinator::query {

using nlohmann::json;

json compact_run(const db::RunRow& r) {
  double total = 0;
  for (const auto& p : r.phases) total += p.host_ms;
  return json{{"job", r.job_id},
              {"prompt", r.prompt},
              {"seed", r.seed},
              {"repeat", r.repeat_index},
              {"state", r.state},
              {"verdict", r.verdict ? json(*r.verdict) : json(nullptr)},
              {"cosine", r.cosine ? json(*r.cosine) : json(nullptr)},
              {"gpu", r.gpu},
              {"worker", r.worker_id ? json(*r.worker_id) : json(nullptr)},
              {"warm", r.has_result ? json(r.warm) : json(nullptr)},
              {"total_ms", r.phases.empty() ? json(nullptr) : json(total)},
              {"error", r.error ? json(*r.error) : json(nullptr)}};
}

RunTable::RunTable(size_t cap, size_t worst, size_t slowest) : cap_(cap), worst_n_(worst), slowest_n_(slowest) {}

namespace {
bool less_key(const std::tuple<int, double, int64_t>& a, const std::tuple<int, double, int64_t>& b) { return a < b; }
}  // namespace

void RunTable::keep(std::vector<Entry>& heap, size_t n, Key key, const db::RunRow& r) {
  if (n == 0) return;
  auto cmp = [](const Entry& a, const Entry& b) { return less_key(a.key, b.key); };
  if (heap.size() < n) {
    heap.push_back({key, compact_run(r)});
    std::push_heap(heap.begin(), heap.end(), cmp);
  } else if (key < heap.front().key) {
    std::pop_heap(heap.begin(), heap.end(), cmp);
    heap.back() = {key, compact_run(r)};
    std::push_heap(heap.begin(), heap.end(), cmp);
  }
}

void RunTable::add(const db::RunRow& r) {
  ++total_;
  if (total_ <= cap_) {
    all_.push_back(compact_run(r));
  } else if (!all_.empty()) {
    all_.clear();
    all_.shrink_to_fit();
  }
  const std::string v = r.verdict.value_or("");
  int cls = -1;
  if (v == "NON_FINITE") cls = 0;
  else if (v == "FAIL") cls = 1;
  else if (r.state == "failed" || r.state == "dead") cls = 2;
  else if (r.cosine && std::isfinite(*r.cosine)) cls = 3;
  if (cls >= 0) {
    const double c = r.cosine && std::isfinite(*r.cosine) ? *r.cosine : 0.0;
    keep(worst_, worst_n_, Key{cls, c, r.job_id}, r);
  }
  if (!r.phases.empty()) {
    double total = 0;
    for (const auto& p : r.phases) total += p.host_ms;
    keep(slowest_, slowest_n_, Key{0, -total, r.job_id}, r);
  }
}

json RunTable::runs() const {
  json out = json::array();
  if (!capped()) {
    for (const auto& r : all_) out.push_back(r);
    return out;
  }
  std::map<int64_t, const json*> rows;
  for (const auto& e : worst_) rows.emplace(std::get<2>(e.key), &e.run);
  for (const auto& e : slowest_) rows.emplace(std::get<2>(e.key), &e.run);
  for (const auto& [_, r] : rows) out.push_back(*r);
  return out;
}

json RunTable::summary() const {
  size_t shown = total_;
  if (capped()) {
    std::map<int64_t, bool> rows;
    for (const auto& e : worst_) rows.emplace(std::get<2>(e.key), true);
    for (const auto& e : slowest_) rows.emplace(std::get<2>(e.key), true);
    shown = rows.size();
  }
  return json{{"total", total_},
              {"shown", shown},
              {"cap", cap_},
              {"worst_by_parity", capped() ? worst_.size() : 0},
              {"slowest", capped() ? slowest_.size() : 0},
              {"not_shown", total_ - shown}};
}

}  // namespace hipq::coordinator::query
