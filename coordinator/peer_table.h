// PeerTable: the workers connected to this coordinator, in memory.
//
// A peer is keyed by its ROUTER routing id (which only says which connection
// a frame came on) and carries the worker id it announced in its hello and
// the authenticated identity (ZAP user id) of that connection. Authorisation
// decisions use `user_id`, never the routing id. A worker id belongs to one
// live connection at a time: the server refuses a hello naming a worker id
// that another live connection holds (coordinator/server.h), so every report
// is attributed to the connection it arrived on, never to a name it carries. The table is rebuilt from
// hellos after a coordinator restart; everything durable lives in the DB.
// Ownership: owns its Peer values. Thread safety: the server's poll thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/records.h"
#include "proto/hipq.pb.h"
#include "proto/protocol.h"

namespace hipq::coordinator {

using SteadyTime = std::chrono::steady_clock::time_point;

// A job leased to a worker: one it runs, or the next one it holds while it
// runs another (credit 2, docs/protocol.md "Credit and prefetch").
struct PeerJob {
  int64_t job_id = 0;
  int attempt = 0;
  int steps = 0;
  int64_t batch_id = 0;              // 0 when not known (claimed by a hello)
  uint64_t seed = 0;
  std::string prompt;
  db::ModelHolding holding;          // its model and LoRA set (affinity of the job after it)
  SteadyTime last_progress{};        // start or last Progress (stall detection)
  int progress_step = 0;
  int progress_steps = 0;
};

struct Peer {
  std::string routing_id;
  std::string worker_id;
  std::string user_id;               // "" when the coordinator runs without CURVE
  proto::WorkerHello info;
  int credit = 0;                    // jobs it asked for and has not been given (held + credit <= credit_cap)
  bool draining = false;
  bool resyncing = false;            // a commit failed; waiting for its fresh hello
  // The jobs it runs, in the order they were leased or claimed: one, or
  // the jobs of a batch (protocol 7, docs/protocol.md "Batching"). A
  // batching peer's leases all count here (it starts the jobs of a turn
  // together); empty = idle.
  std::vector<PeerJob> running;
  // Leased to a peer that runs one job at a time, to start when the running
  // job ends (never set while `running` is empty: the worker starts a job it
  // receives idle at once).
  std::optional<PeerJob> next;
  std::vector<std::string> loaded_models;
  std::vector<db::ModelHolding> held_models;  // each loaded model's LoRA set (protocol 5)
  SteadyTime last_seen{};
  SteadyTime asked_at{};              // when it last sent Ready
  SteadyTime connected_at{};
  int64_t jobs_done = 0;
  int64_t jobs_failed = 0;
};

// One worker process drives one device and runs one job at a time; it holds
// at most one more, prefetched. A Ready claiming more is capped.
inline constexpr int kMaxCredit = proto::kMaxCredit;

// Jobs leased to the peer: those it runs and the prefetched one.
int held_jobs(const Peer& p);
// The most jobs the peer may hold: max(kMaxCredit, its hello's max_batch),
// so it takes several leases at once only while batching (protocol 7).
int credit_cap(const Peer& p);
// Whether the peer runs batches (its hello's max_batch above 1).
bool batching(const Peer& p);
// The job `job_id` it runs (attempt `attempt`, or any when 0), or null.
PeerJob* running_job(Peer& p, int64_t job_id, int attempt = 0);
// The first running job's id, 0 when idle (status pages and logs).
int64_t first_running_job_id(const Peer& p);
// Job `job_id` ended on the peer (reported, given back, expired, taken
// back): it leaves the running jobs, and when none is left the prefetched
// one starts now (its stall clock from `now`); a prefetched one is
// forgotten. False when the peer holds no such job.
bool end_job(Peer& p, int64_t job_id, SteadyTime now);

class PeerTable {
 public:
  // Adds or replaces the peer for `worker_id` (a reconnecting worker arrives
  // on a new routing id; the old entry is dropped). Returns the new entry.
  Peer& upsert(const std::string& routing_id, const std::string& worker_id);
  Peer* find(std::string_view routing_id);
  Peer* find_worker(std::string_view worker_id);
  void remove(std::string_view routing_id);

  // Routing ids of peers silent since before `deadline`.
  std::vector<std::string> silent_since(SteadyTime deadline) const;
  // Routing ids of peers with credit that are not draining and hold fewer
  // than credit_cap jobs: those holding fewer first (an idle worker is
  // served before another's prefetch), then the oldest ask.
  std::vector<std::string> wanting_work() const;
  // Whether any peer would be offered a job now (wanting_work() not empty).
  bool any_wanting_work() const;

  const std::map<std::string, Peer, std::less<>>& peers() const { return peers_; }
  size_t size() const { return peers_.size(); }

 private:
  std::map<std::string, Peer, std::less<>> peers_;          // by routing id
  std::map<std::string, std::string, std::less<>> by_worker_;  // worker id -> routing id
};

}  // namespace hipq::coordinator
