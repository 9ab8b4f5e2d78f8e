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

namespace {
// A worker holds one job at a time: one that runs a job is never offered
// another, whatever credit it claims (a second one would come back "busy").
bool wants_work(const Peer& p) { return p.credit > 0 && !p.draining && p.running_job_id == 0; }
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
  // Fairness: the peer that has waited longest since it asked goes first.
  std::sort(ps.begin(), ps.end(), [](const Peer* a, const Peer* b) { return a->asked_at < b->asked_at; });
  std::vector<std::string> out;
  out.reserve(ps.size());
  for (const Peer* p : ps) out.push_back(p->routing_id);
  return out;
}

}  // namespace hipq::coordinator
