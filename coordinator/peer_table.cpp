#include "coordinator/peer_table.h"

#include <algorithm>

namespace hipq::coordinator {

Peer& PeerTable::upsert(const std::string& routing_id, const std::string& worker_id) {
  if (auto it = by_worker_.find(worker_id); it != by_worker_.end() && it->second != routing_id) {
    peers_.erase(it->second);
  }
  if (auto it = peers_.find(routing_id); it != peers_.end() && it->second.worker_id != worker_id) {
    by_worker_.erase(it->second.worker_id);
    peers_.erase(it);
  }
  by_worker_[worker_id] = routing_id;
  Peer& p = peers_[routing_id];
  p.routing_id = routing_id;
  p.worker_id = worker_id;
  return p;
}

Peer* PeerTable::find(std::string_view routing_id) {
  auto it = peers_.find(routing_id);
  return it == peers_.end() ? nullptr : &it->second;
}

Peer* PeerTable::find_worker(std::string_view worker_id) {
  auto it = by_worker_.find(worker_id);
  return it == by_worker_.end() ? nullptr : find(it->second);
}

void PeerTable::remove(std::string_view routing_id) {
  auto it = peers_.find(routing_id);
  if (it == peers_.end()) return;
  auto w = by_worker_.find(it->second.worker_id);
  if (w != by_worker_.end() && w->second == routing_id) by_worker_.erase(w);
  peers_.erase(it);
}

std::vector<std::string> PeerTable::silent_since(SteadyTime deadline) const {
  std::vector<std::string> out;
  for (const auto& [id, p] : peers_) {
    if (p.last_seen < deadline) out.push_back(id);
  }
  return out;
}

int held_jobs(const Peer& p) { return static_cast<int>(p.running.size()) + (p.next ? 1 : 0); }

int credit_cap(const Peer& p) { return std::max(kMaxCredit, p.info.max_batch()); }

bool batching(const Peer& p) { return p.info.max_batch() > 1; }

PeerJob* running_job(Peer& p, int64_t job_id, int attempt) {
  for (auto& j : p.running) {
    if (j.job_id == job_id && (attempt == 0 || j.attempt == attempt)) return &j;
  }
  return nullptr;
}

int64_t first_running_job_id(const Peer& p) { return p.running.empty() ? 0 : p.running.front().job_id; }

bool end_job(Peer& p, int64_t job_id, SteadyTime now) {
  if (job_id == 0) return false;
  if (p.next && p.next->job_id == job_id) {
    p.next.reset();
    return true;
  }
  auto it = std::find_if(p.running.begin(), p.running.end(), [&](const PeerJob& j) { return j.job_id == job_id; });
  if (it == p.running.end()) return false;
  p.running.erase(it);
  if (p.running.empty() && p.next) {
    PeerJob n = std::move(*p.next);
    p.next.reset();
    n.last_progress = now;
    n.progress_step = 0;
    n.progress_steps = n.steps;
    p.running.push_back(std::move(n));
  }
  return true;
}

namespace {
// A worker holds at most credit_cap jobs (the running one and the next, or
// a batch); one holding that many is offered nothing, whatever credit it
// claims.
bool wants_work(const Peer& p) { return p.credit > 0 && !p.draining && held_jobs(p) < credit_cap(p); }
}  // namespace

bool PeerTable::any_wanting_work() const {
  return std::any_of(peers_.begin(), peers_.end(),
                     [](const auto& entry) { return wants_work(entry.second); });
}

std::vector<std::string> PeerTable::wanting_work() const {
  std::vector<const Peer*> ps;
  for (const auto& [id, p] : peers_) {
    if (wants_work(p)) ps.push_back(&p);
  }
  // Fairness: idle peers before prefetches, then the longest wait since the ask.
  std::sort(ps.begin(), ps.end(), [](const Peer* a, const Peer* b) {
    const int ha = held_jobs(*a), hb = held_jobs(*b);
    return ha != hb ? ha < hb : a->asked_at < b->asked_at;
  });
  std::vector<std::string> out;
  out.reserve(ps.size());
  for (const Peer* p : ps) out.push_back(p->routing_id);
  return out;
}

}  // namespace hipq::coordinator
