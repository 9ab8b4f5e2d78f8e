// Server: the coordinator — one ROUTER socket, one poll loop (zguide
// Majordomo / Paranoid Pirate structure).
//
// Each turn of the loop: poll (timeout = time to the next heartbeat or
// deadline), read every waiting message and dispatch it by type to an on_*
// handler, hand jobs to workers that asked for them (pull-based: a worker
// only gets a job after it asked, with a Ready or in a report), drop peers silent for
// kHeartbeatLiveness intervals (their leases are released and the jobs
// requeued), expire leases, send due heartbeats. Replies produced during a
// turn are queued and sent at its end, after the turn's database writes; a
// report's ack rides on the assignment sent to the same worker in that turn.
//
// Every job state change goes through db::JobStore (one transaction each),
// so a coordinator killed at any moment and restarted on the same file
// recovers everything; leases found at start get a grace period for their
// workers to reconnect and say which job they still run.
//
// Security: with `curve` set, the socket is a CURVE server and a ZAP handler
// (coordinator/curve_auth.h) admits only listed public keys; worker messages
// need the "worker" role and client calls the "client" role, checked on the
// authenticated identity of the connection. A message that does not parse or
// validate is counted and dropped (dropped_messages()), never fatal; so is one
// whose handler throws.
//
// Identity: a worker id belongs to the one live connection whose hello named
// it first; a hello naming it from another connection is dropped until that
// one is expired (docs/protocol.md, "Identity is the connection"); with CURVE
// it also stays bound to the key that first registered it, in the database,
// so another key's hello under it is refused, restarts included. Reports
// are attributed to the connection's worker, never to ids they carry.
// After a failed group commit the in-memory view of every peer is dropped
// and rebuilt from fresh hellos (forget_peer_state). Queries run on a
// QueryWorker thread with a read-only connection, never in a turn.
//
// Ownership: owns its sockets and database connection; borrows the context.
// Thread safety: create, run and the accessors on one thread; request_stop()
// from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "base/result.h"
#include "base/status.h"
#include "coordinator/curve_auth.h"
#include "coordinator/manifest.h"
#include "coordinator/wire_records.h"
#include "coordinator/peer_table.h"
#include "proto/curve_keys.h"
#include "proto/hipq.pb.h"
#include "proto/protocol.h"

namespace hipq::db {
class Database;
class JobStore;
}  // namespace hipq::db

namespace hipq::coordinator {

class QueryWorker;
namespace monitor {
class Metrics;
}

struct CurveServerConfig {
  proto::CurveKeyPair server_keys;       // secret key required
  proto::AuthorizedKeys authorized;      // allow-list of client/worker keys
};

struct ServerOptions {
  std::filesystem::path db_path;
  std::string bind = proto::kDefaultEndpoint;  // tcp://HOST:PORT ("*" port = any free one), ipc://, inproc://
  std::optional<CurveServerConfig> curve;
  // Binding a non-loopback address without CURVE is refused unless set.
  bool insecure = false;
  // Written (atomically) with the bound endpoint once listening; for scripts
  // and tests that bind port "*".
  std::filesystem::path endpoint_file;
  // Golden files of manifests that say `golden: store`; default: beside the
  // database, <db dir>/goldens.
  std::filesystem::path golden_dir;
  std::chrono::milliseconds heartbeat = proto::kHeartbeatInterval;
  int liveness = proto::kHeartbeatLiveness;
  double lease_seconds = proto::kLeaseSeconds;
  // A lease whose job sent no progress for this long (heartbeats alone do
  // not count) is taken back unstarted: queued again, attempt not counted,
  // the worker told to cancel. 0 = never. Loading a large model sends no
  // progress, so this is minutes, not seconds.
  double stall_seconds = 600;
  // Where the loop records its events (results, failures, commit times) and
  // publishes its snapshot (counters, workers) for the monitor's HTTP thread
  // (coordinator/monitor/). Borrowed; must outlive the server. null = none.
  monitor::Metrics* metrics = nullptr;
  // The batch cap: a submitted manifest expanding to more jobs is refused
  // naming it (`--max-batch-jobs`). 1..kMaxBatchJobsLimit (manifest.h says
  // why that bound); create() refuses other values.
  int64_t max_batch_jobs = kMaxManifestJobs;
};

// Counters for logs, `hipq workers` and the benchmark.
struct ServerCounters {
  int64_t messages = 0;
  int64_t dropped_messages = 0;     // unparseable, invalid, unauthorised
  int64_t assignments = 0;
  int64_t results_recorded = 0;
  int64_t results_duplicate = 0;    // late or repeated, dropped
  int64_t failures_recorded = 0;
  int64_t leases_expired = 0;
  int64_t leases_returned = 0;       // given back unstarted (busy, draining) or stalled: no attempt counted
  int64_t turns = 0;                 // poll-loop turns
  int64_t lease_checks = 0;          // turns that ran the peer/lease expiry check
  int64_t group_commits = 0;         // turns that could write: one transaction each
  int64_t group_commit_failures = 0; // turns whose writes were lost (replies withheld)
};

class Server {
 public:
  // Opens (and migrates) the database, binds the socket. FailedPrecondition
  // for a non-loopback bind without keys and without `insecure`;
  // Unavailable when the address cannot be bound.
  static Result<std::unique_ptr<Server>> create(zmq::context_t& context, ServerOptions options);
  ~Server();

  // The endpoint actually bound ("tcp://127.0.0.1:40123").
  const std::string& endpoint() const { return endpoint_; }

  // Runs the loop until request_stop(). Returns an error only when the
  // database becomes unusable (the loop cannot make progress safely).
  Status run();
  void request_stop() { stop_.store(true); }

  const ServerCounters& counters() const { return counters_; }

 private:
  Server(zmq::context_t& context, ServerOptions options);
  Status open();
  void turn(bool readable, bool zap_readable);

  void on_message(const std::string& routing_id, const std::string& user_id, const std::string& bytes);
  void on_hello(const std::string& routing_id, const std::string& user_id, const proto::WorkerHello& m);
  void on_ready(Peer& peer, const proto::Ready& m);
  void on_heartbeat(Peer& peer, const proto::Heartbeat& m);
  void on_progress(Peer& peer, const proto::Progress& m);
  void on_result(Peer& peer, const proto::JobResult& m);
  void on_error(Peer& peer, const proto::JobError& m);
  // A configuration error of one job (JobError.configuration): the queued
  // jobs of its batch fail at once with `error` named as their reason.
  void fail_batch_of(int64_t job_id, const std::string& error);
  void on_returned(Peer& peer, const proto::JobError& m);
  // Answers a hello naming a worker id bound to another CURVE key
  // (`owner_key`) with an ErrorReply saying so and what to do.
  void refuse_hello(const std::string& routing_id, const std::string& worker_id, const std::string& user_id,
                    const std::string& owner_key);
  void give_back_unclaimed_leases(const Peer& peer, const proto::WorkerHello& m);
  void forget_peer_state();
  void on_goodbye(Peer& peer, const proto::Goodbye& m);
  void on_client(const std::string& routing_id, const proto::Envelope& request);
  proto::Envelope on_submit(const proto::SubmitRequest& m);
  proto::Envelope on_status(const proto::StatusRequest& m);
  proto::Envelope on_cancel(const proto::CancelRequest& m);
  proto::Envelope on_workers(const proto::WorkersRequest& m);
  proto::Envelope on_drain(const proto::DrainRequest& m);

  void dispatch();
  void expire_peers();
  void expire_leases();
  void reclaim_stalled_leases();
  void send_heartbeats();
  void grant_restart_grace();
  void drop(const std::string& why);
  void send(const std::string& routing_id, proto::Envelope envelope);
  // Acknowledges a report of (job, attempt) to the peer: on the assignment
  // dispatch() sends it in this turn, else as a ReportAck alone at the end
  // of the turn (send_pending_acks); withheld with the outbox when the
  // turn's commit fails.
  void queue_ack(const std::string& routing_id, int64_t job_id, int attempt);
  void send_pending_acks();
  void flush_outbox();
  void send_query_replies();
  std::chrono::milliseconds next_timeout() const;
  void set_worker_state(const Peer& peer, const char* state);
  // Copies the counters and the peer table into options_.metrics' snapshot.
  void publish_snapshot();

  zmq::context_t& context_;
  ServerOptions options_;
  std::unique_ptr<CurveAuth> auth_;
  zmq::socket_t router_;
  std::string endpoint_;
  std::unique_ptr<db::Database> db_;
  std::unique_ptr<db::JobStore> store_;
  std::unique_ptr<QueryWorker> queries_;
  DispatchSettings dispatch_settings_;
  PeerTable peers_;
  std::vector<std::pair<std::string, std::string>> outbox_;  // routing id, encoded envelope
  std::map<std::string, std::vector<proto::ReportAck>, std::less<>> pending_acks_;  // by routing id, this turn
  // Metric updates of this turn's results and failures, applied once its
  // group commit succeeded (dropped with the turn's writes otherwise).
  std::vector<std::function<void()>> metric_events_;
  std::atomic<bool> stop_{false};
  bool maybe_queued_ = true;       // false once lease_next found nothing; set by submit/requeue
  SteadyTime next_heartbeat_{};
  SteadyTime next_lease_check_{};
  SteadyTime next_publish_{};
  double started_unix_ = 0;
  bool resync_pending_ = false;    // a commit failed: ask every worker for a fresh hello
  SteadyTime resync_not_before_{};
  ServerCounters counters_;
  std::string coordinator_id_;
};

// True for tcp://127.x, tcp://localhost, tcp://[::1], ipc:// and inproc://.
bool is_loopback_endpoint(const std::string& endpoint);

}  // namespace hipq::coordinator
