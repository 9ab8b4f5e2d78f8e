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

// A job leased to a worker that it has not started yet: the next one, held
// while it runs another (credit 2, docs/protocol.md "Credit and prefetch").
struct PrefetchedJob {
  int64_t job_id = 0;
  int attempt = 0;
  int steps = 0;
  int64_t batch_id = 0;
  uint64_t seed = 0;
  std::string prompt;
  db::ModelHolding holding;          // its model and LoRA set (affinity of the job after it)
};

struct Peer {
  std::string routing_id;
  std::string worker_id;
  std::string user_id;               // "" when the coordinator runs without CURVE
  proto::WorkerHello info;
  int credit = 0;                    // jobs it asked for and has not been given (held + credit <= kMaxCredit)
  bool draining = false;
  bool resyncing = false;            // a commit failed; waiting for its fresh hello
  int64_t running_job_id = 0;        // 0 = idle
  int running_attempt = 0;
  db::ModelHolding running_holding;  // the running job's model and LoRA set, when dispatch leased it
  // Leased to it, to start when the running job ends (never set while
  // running_job_id is 0: the worker starts a job it receives idle at once).
  std::optional<PrefetchedJob> next;
  int progress_step = 0;
  int progress_steps = 0;
  std::vector<std::string> loaded_models;
  std::vector<db::ModelHolding> held_models;  // each loaded model's LoRA set (protocol 5)
  SteadyTime last_seen{};
  SteadyTime asked_at{};              // when it last sent Ready
  SteadyTime connected_at{};
  SteadyTime last_progress{};         // assignment or last Progress of the running job
  int64_t jobs_done = 0;
  int64_t jobs_failed = 0;
  // The job last handed to it by dispatch, for the status page: valid while
  // running_job_id equals assigned_job_id.
  int64_t assigned_job_id = 0;
  int64_t assigned_batch_id = 0;
  uint64_t assigned_seed = 0;
  std::string assigned_prompt;
};

// One worker process drives one device and runs one job at a time; it holds
// at most one more, prefetched. A Ready claiming more is capped.
inline constexpr int kMaxCredit = proto::kMaxCredit;

// Jobs leased to the peer: the running one and the prefetched one.
int held_jobs(const Peer& p);
// Job `job_id` ended on the peer (reported, given back, expired, taken
// back): the running one is replaced by the prefetched one, which starts
// now (its stall clock from `now`); a prefetched one is forgotten. False
// when the peer holds no such job.
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
  // than kMaxCredit jobs: those holding fewer first (an idle worker is
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
