#include "coordinator/server.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>

#include "base/fs.h"
#include "coordinator/manifest.h"
#include "coordinator/monitor/metrics.h"
#include "coordinator/preflight.h"
#include "coordinator/query_service.h"
#include "coordinator/query_worker.h"
#include "db/database.h"
#include "db/job_store.h"
#include "db/transaction.h"
#include "proto/codec.h"
#include "proto/transport.h"
#include "spec/input_digests.h"


namespace hipq::coordinator {
namespace {

using Clock = std::chrono::steady_clock;

std::string random_id() {
  std::random_device rd;
  std::mt19937_64 gen(rd());
  char buf[17];
  snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(gen()));
  return buf;
}

proto::Envelope error_reply(const Status& s) {
  proto::Envelope e;
  e.mutable_error_reply()->set_code(std::string(status_code_name(s.code())));
  e.mutable_error_reply()->set_message(s.message());
  return e;
}

void fill_counts(proto::BatchStatus& out, const db::BatchCounts& c) {
  out.set_batch_id(c.batch_id);
  out.set_state(std::string(db::batch_state_name(c.state)));
  out.set_total(c.total);
  out.set_reason(c.reason);
  for (const auto& [k, v] : c.by_state) {
    auto* e = out.add_by_state();
    e->set_key(k);
    e->set_count(v);
  }
  for (const auto& [k, v] : c.by_verdict) {
    auto* e = out.add_by_verdict();
    e->set_key(k);
    e->set_count(v);
  }
}

}  // namespace

bool is_loopback_endpoint(const std::string& endpoint) {
  if (endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0) return true;
  if (endpoint.rfind("tcp://", 0) != 0) return false;
  std::string host = endpoint.substr(6);
  return host.rfind("127.", 0) == 0 || host.rfind("localhost:", 0) == 0 || host.rfind("[::1]:", 0) == 0;
}

Server::Server(zmq::context_t& context, ServerOptions options)
    : context_(context),
      options_(std::move(options)),
      started_unix_(db::wall_clock_seconds()),
      coordinator_id_(random_id()) {}

Server::~Server() = default;

Result<std::unique_ptr<Server>> Server::create(zmq::context_t& context, ServerOptions options) {
  if (!options.curve && !options.insecure && !is_loopback_endpoint(options.bind)) {
    return Status::FailedPrecondition(
        "refusing to bind " + options.bind +
        " without CURVE keys: anyone who can reach it could submit jobs. Give --server-key and "
        "--authorized-keys (make keys with `hipq keygen`), bind 127.0.0.1, or pass --insecure on a trusted network");
  }
  if (options.max_batch_jobs < 1 || options.max_batch_jobs > kMaxBatchJobsLimit) {
    return Status::InvalidArgument("max_batch_jobs " + std::to_string(options.max_batch_jobs) + " is outside 1.." +
                                   std::to_string(kMaxBatchJobsLimit) + " (--max-batch-jobs)");
  }
  std::unique_ptr<Server> server(new Server(context, std::move(options)));
  HIPQ_RETURN_IF_ERROR(server->open());
  return server;
}

Status Server::open() {
  db::Database::Options db_options;
  db_options.memory_temp_store = true;  // its writes are savepoints in a group commit
  db_options.single_thread = true;      // the poll loop's alone (queries have their own connection)
  HIPQ_ASSIGN_OR_RETURN(db_, db::Database::open_and_migrate(options_.db_path, db_options));
  store_ = std::make_unique<db::JobStore>(*db_);
  dispatch_settings_.lease_seconds = options_.lease_seconds;
  dispatch_settings_.store_golden_dir = options_.golden_dir.empty()
                                            ? std::filesystem::absolute(options_.db_path).parent_path() / "goldens"
                                            : std::filesystem::absolute(options_.golden_dir);
  try {
    if (options_.curve) {
      HIPQ_ASSIGN_OR_RETURN(auth_, CurveAuth::bind(context_, options_.curve->authorized));
    }
    router_ = zmq::socket_t(context_, zmq::socket_type::router);
    proto::apply_socket_limits(router_);
    router_.set(zmq::sockopt::router_handover, 1);
    if (options_.curve) {
      router_.set(zmq::sockopt::curve_server, 1);
      router_.set(zmq::sockopt::curve_secretkey, options_.curve->server_keys.secret_key);
      router_.set(zmq::sockopt::zap_domain, "hipq");
    }
    router_.bind(options_.bind);
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind " + options_.bind + ": " + e.what());
  }
  if (!options_.endpoint_file.empty()) {
    HIPQ_RETURN_IF_ERROR(write_file_atomic(options_.endpoint_file, endpoint_ + "\n"));
  }
  HIPQ_ASSIGN_OR_RETURN(queries_, QueryWorker::start(context_, options_.db_path));
  grant_restart_grace();
  spdlog::info("coordinator {} listening on {} (db {}, {})", coordinator_id_, endpoint_, options_.db_path.string(),
               options_.curve ? "CURVE" : "no encryption");
  return Status::Ok();
}

void Server::grant_restart_grace() {
  // Workers that held leases when the previous coordinator stopped need time
  // to notice, reconnect and say which job they still run.
  auto leases = store_->list_leases();
  if (!leases.ok()) {
    spdlog::error("cannot list leases at start: {}", leases.status().ToString());
    return;
  }
  std::set<std::string> workers;
  for (const auto& l : *leases) workers.insert(l.worker_id);
  double grace = options_.lease_seconds + 2.0 * options_.liveness *
                                              std::chrono::duration<double>(options_.heartbeat).count();
  double now = db::wall_clock_seconds();
  for (const auto& w : workers) {
    auto n = store_->extend_worker_leases(w, now, grace);
    if (!n.ok()) spdlog::warn("cannot extend leases of {}: {}", w, n.status().ToString());
  }
  if (!leases->empty()) {
    spdlog::info("recovered {} lease(s) of {} worker(s) from the database; waiting {:.0f} s for them",
                 leases->size(), workers.size(), grace);
  }
}

Status Server::run() {
  next_heartbeat_ = Clock::now() + options_.heartbeat;
  next_lease_check_ = Clock::now();
  while (!stop_.load()) {
    std::vector<zmq::pollitem_t> items = {{static_cast<void*>(router_), 0, ZMQ_POLLIN, 0}};
    items.push_back({static_cast<void*>(queries_->socket()), 0, ZMQ_POLLIN, 0});
    if (auth_) items.push_back({static_cast<void*>(auth_->socket()), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items, next_timeout());
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Internal(std::string("poll failed: ") + e.what());
    }
    if (items[1].revents & ZMQ_POLLIN) send_query_replies();
    turn((items[0].revents & ZMQ_POLLIN) != 0, auth_ && (items[2].revents & ZMQ_POLLIN) != 0);
  }
  flush_outbox();
  publish_snapshot();
  spdlog::info("coordinator stopped: {} messages, {} dropped, {} assigned, {} results, {} duplicates, "
               "{} group commits ({} failed) in {} turns",
               counters_.messages, counters_.dropped_messages, counters_.assignments, counters_.results_recorded,
               counters_.results_duplicate, counters_.group_commits, counters_.group_commit_failures,
               counters_.turns);
  return Status::Ok();
}

std::chrono::milliseconds Server::next_timeout() const {
  auto now = Clock::now();
  auto until = std::min(next_heartbeat_, next_lease_check_);
  // Rounded up: a timeout truncated to 0 ms would spin until the deadline.
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(until - now);
  // Short enough to notice request_stop() promptly.
  return std::clamp(ms, std::chrono::milliseconds(0), std::chrono::milliseconds(100));
}

void Server::turn(bool readable, bool zap_readable) {
  if (zap_readable) auth_->handle_pending();
  // Group commit: everything this turn records (results, failures, leases,
  // expiries, submits) is one transaction, made durable by one COMMIT (one
  // fsync) before any reply that depends on it leaves in flush_outbox(). Each
  // JobStore call runs in its own savepoint inside it, so a failed call still
  // undoes only its own writes. See docs/architecture.md, "Group commit".
  // A turn with no message, no job that may be leased and no lease check due
  // writes nothing: it takes no write lock (an idle coordinator leaves the
  // database to readers such as `hipq runs`).
  ++counters_.turns;
  const auto now = Clock::now();
  const bool lease_check_due = now >= next_lease_check_;
  const int64_t failures_before = counters_.group_commit_failures;
  std::optional<db::Transaction> group;
  if (readable || (maybe_queued_ && peers_.any_wanting_work()) || lease_check_due) {
    if (auto t = db::Transaction::begin_immediate(*db_); t.ok()) {
      group.emplace(std::move(*t));
    } else {
      // Each call then commits on its own: slower, equally durable.
      spdlog::warn("group commit unavailable this turn: {}", t.status().ToString());
    }
  }
  if (readable) {
    // Bounded so heartbeats and expiry still run under a flood.
    for (int i = 0; i < 4096; ++i) {
      auto m = proto::recv_routed(router_);
      if (!m.ok()) {
        spdlog::warn("receive failed: {}", m.status().ToString());
        break;
      }
      if (!m->has_value()) break;
      ++counters_.messages;
      if (!(*m)->well_formed) {
        drop("message not [routing id][envelope]");
        continue;
      }
      try {
        on_message((*m)->routing_id, (*m)->user_id, (*m)->bytes);
      } catch (const std::exception& e) {
        // A library throwing on odd input (JSON, YAML) must cost one
        // message, never the coordinator.
        drop(std::string("handling it threw: ") + e.what());
      }
    }
  }
  dispatch();
  if (lease_check_due) {
    ++counters_.lease_checks;
    expire_peers();
    expire_leases();
    reclaim_stalled_leases();
    next_lease_check_ = now + std::chrono::milliseconds(250);
  }
  if (now >= next_heartbeat_) {
    send_heartbeats();
    next_heartbeat_ = now + options_.heartbeat;
  }
  if (group) {
    const auto commit_start = Clock::now();
    Status committed = group->commit();
    if (options_.metrics) {
      options_.metrics->record_commit(std::chrono::duration<double>(Clock::now() - commit_start).count());
    }
    ++counters_.group_commits;
    if (!committed.ok()) {
      // Nothing of this turn is durable: no reply may claim it was. Workers
      // resend unacknowledged results; leases that were never delivered
      // expire and requeue; clients retry.
      ++counters_.group_commit_failures;
      spdlog::error("group commit failed ({} replies withheld): {}", outbox_.size(), committed.ToString());
      outbox_.clear();
      pending_acks_.clear();
      metric_events_.clear();  // what they count is not in the database
      maybe_queued_ = true;
      forget_peer_state();
    }
  }
  // Acks that found no assignment to ride on leave alone (after the commit,
  // as every reply: with the outbox).
  send_pending_acks();
  // The turn's results and failures are durable now: they count.
  for (auto& record : metric_events_) record();
  metric_events_.clear();
  const bool wrote_ok = !group || counters_.group_commit_failures == failures_before;
  if (resync_pending_ && wrote_ok && now >= resync_not_before_) {
    // The database is writable again: every worker introduces itself anew,
    // saying what it really runs, and re-sends what was not acknowledged.
    for (const auto& [rid, peer] : peers_.peers()) {
      proto::Envelope r;
      r.mutable_reconnect()->set_reason("coordinator lost a turn's writes; send hello");
      send(rid, std::move(r));
    }
    spdlog::info("asked {} worker(s) to introduce themselves again after a failed commit", peers_.size());
    resync_pending_ = false;
  }
  flush_outbox();
  if (options_.metrics && now >= next_publish_) {
    publish_snapshot();
    next_publish_ = now + std::chrono::milliseconds(200);
  }
}

void Server::publish_snapshot() {
  if (!options_.metrics) return;
  monitor::LoopSnapshot s;
  s.published = true;
  s.published_unix = db::wall_clock_seconds();
  s.started_unix = started_unix_;
  s.coordinator_id = coordinator_id_;
  s.endpoint = endpoint_;
  s.counters.messages = counters_.messages;
  s.counters.dropped_messages = counters_.dropped_messages;
  s.counters.assignments = counters_.assignments;
  s.counters.results_recorded = counters_.results_recorded;
  s.counters.results_duplicate = counters_.results_duplicate;
  s.counters.failures_recorded = counters_.failures_recorded;
  s.counters.leases_expired = counters_.leases_expired;
  s.counters.leases_returned = counters_.leases_returned;
  s.counters.turns = counters_.turns;
  s.counters.group_commits = counters_.group_commits;
  s.counters.group_commit_failures = counters_.group_commit_failures;
  const auto now = Clock::now();
  s.workers.reserve(peers_.size());
  for (const auto& [rid, p] : peers_.peers()) {
    monitor::WorkerView w;
    w.worker_id = p.worker_id;
    w.host = p.info.host();
    w.backend = p.info.backend();
    w.device_name = p.info.device_name();
    w.device_index = p.info.device_index();
    w.arch = p.info.arch();
    w.placement = p.info.placement();
    w.memory_total_bytes = p.info.memory_bytes();
    w.memory_free_bytes = p.info.memory_free_bytes();
    w.memory_limit_bytes = p.info.memory_limit_bytes();
    w.state = p.draining ? "draining" : (!p.running.empty() ? "busy" : "idle");
    w.running_job_id = first_running_job_id(p);
    for (const auto& j : p.running) w.running_job_ids.push_back(j.job_id);
    if (!p.running.empty()) {
      const PeerJob& first = p.running.front();
      // A job claimed by a hello (not leased by this coordinator) has no
      // details in memory.
      if (first.batch_id != 0) {
        w.job_known = true;
        w.running_batch_id = first.batch_id;
        w.running_seed = first.seed;
        w.running_prompt = first.prompt;
      }
      w.progress_step = first.progress_step;
      w.progress_steps = first.progress_steps;
    }
    w.jobs_done = p.jobs_done;
    w.jobs_failed = p.jobs_failed;
    w.connected_s = std::chrono::duration<double>(now - p.connected_at).count();
    w.last_seen_age_s = std::chrono::duration<double>(now - p.last_seen).count();
    s.workers.push_back(std::move(w));
  }
  options_.metrics->snapshot().publish(std::move(s));
}

void Server::forget_peer_state() {
  // What this turn did to peers (jobs handed out, credit spent, reports
  // taken) is gone with its transaction, and what they were told was
  // withheld: nothing in memory can be trusted over the database now. Each
  // peer waits, holding no job and asking for none, for the hello a
  // Reconnect will ask it for; leases the database has for it that the hello
  // does not claim are then given back unstarted.
  for (const auto& [rid, peer] : peers_.peers()) {
    Peer* p = peers_.find(rid);
    p->credit = 0;
    p->running.clear();
    p->next.reset();
    p->resyncing = true;
  }
  resync_pending_ = true;
  resync_not_before_ = Clock::now() + std::chrono::milliseconds(250);
}

void Server::send_query_replies() {
  // Answers read from committed data only: nothing to withhold, so they
  // leave at once rather than with the turn's replies.
  while (auto reply = queries_->next_reply()) {
    try {
      router_.send(zmq::buffer(reply->first), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_.send(zmq::buffer(reply->second), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::debug("send of a query reply failed: {}", e.what());
    }
  }
}

void Server::drop(const std::string& why) {
  ++counters_.dropped_messages;
  // Rate-limited: a flood of garbage must not flood the log.
  if (counters_.dropped_messages <= 10 || counters_.dropped_messages % 1000 == 0) {
    spdlog::warn("dropped message #{}: {}", counters_.dropped_messages, why);
  }
}

void Server::send(const std::string& routing_id, proto::Envelope envelope) {
  outbox_.emplace_back(routing_id, proto::encode(std::move(envelope)));
}

void Server::flush_outbox() {
  for (auto& [rid, bytes] : outbox_) {
    try {
      router_.send(zmq::buffer(rid), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      spdlog::debug("send to a peer failed: {}", e.what());
    }
  }
  outbox_.clear();
}

void Server::on_message(const std::string& routing_id, const std::string& user_id, const std::string& bytes) {
  auto decoded = proto::decode(bytes);
  if (!decoded.ok()) {
    // A peer of another protocol version is told why, in its own version.
    if (auto refusal = proto::version_refusal(bytes)) outbox_.emplace_back(routing_id, std::move(*refusal));
    drop(decoded.status().ToString());
    return;
  }
  const proto::Envelope& e = *decoded;
  const bool secure = auth_ != nullptr;
  switch (e.body_case()) {
    case proto::Envelope::kHello:
      if (secure && !auth_->has_role(user_id, "worker")) {
        drop("hello from \"" + user_id + "\", which lacks the worker role");
        return;
      }
      on_hello(routing_id, user_id, e.hello());
      return;
    case proto::Envelope::kReady:
    case proto::Envelope::kHeartbeat:
    case proto::Envelope::kProgress:
    case proto::Envelope::kResult:
    case proto::Envelope::kError:
    case proto::Envelope::kGoodbye: {
      Peer* peer = peers_.find(routing_id);
      if (!peer) {
        // We restarted (or dropped it as dead): ask it to introduce itself
        // again; it re-sends unacknowledged reports after the welcome.
        proto::Envelope r;
        r.mutable_reconnect()->set_reason("unknown peer; send hello");
        send(routing_id, std::move(r));
        return;
      }
      if (secure && peer->user_id != user_id) {
        drop("message on connection of " + peer->user_id + " carries identity " + user_id);
        return;
      }
      peer->last_seen = Clock::now();
      switch (e.body_case()) {
        case proto::Envelope::kReady: on_ready(*peer, e.ready()); break;
        case proto::Envelope::kHeartbeat: on_heartbeat(*peer, e.heartbeat()); break;
        case proto::Envelope::kProgress: on_progress(*peer, e.progress()); break;
        // A report's ask (protocol 6) is handled as a Ready right after it,
        // so the job it reports no longer counts among those the worker holds.
        case proto::Envelope::kResult:
          on_result(*peer, e.result());
          if (e.result().has_next()) on_ready(*peer, e.result().next());
          break;
        case proto::Envelope::kError:
          on_error(*peer, e.error());
          if (e.error().has_next()) on_ready(*peer, e.error().next());
          break;
        case proto::Envelope::kGoodbye: on_goodbye(*peer, e.goodbye()); break;
        default: break;
      }
      return;
    }
    case proto::Envelope::kSubmit:
    case proto::Envelope::kStatus:
    case proto::Envelope::kCancelRequest:
    case proto::Envelope::kWorkers:
    case proto::Envelope::kDrainRequest:
    case proto::Envelope::kQuery:
      if (secure && !auth_->has_role(user_id, "client")) {
        drop("client call from \"" + user_id + "\", which lacks the client role");
        return;
      }
      on_client(routing_id, e);
      return;
    default:
      drop(std::string("unexpected message type ") + std::string(proto::body_name(e)));
      return;
  }
}

void Server::set_worker_state(const Peer& peer, const char* state) {
  Status s = store_->set_worker_state(peer.worker_id, state, db::wall_clock_seconds());
  if (!s.ok()) spdlog::warn("worker {}: cannot record state {}: {}", peer.worker_id, state, s.ToString());
}

void Server::on_hello(const std::string& routing_id, const std::string& user_id, const proto::WorkerHello& m) {
  auto now = Clock::now();
  Peer* same = peers_.find(routing_id);
  if (same != nullptr && same->worker_id != m.worker_id()) {
    drop("hello naming worker " + m.worker_id() + " on the connection of worker " + same->worker_id);
    return;
  }
  if (same == nullptr) {
    // Identity is the connection: a worker id that another live connection
    // holds is not handed over on someone's word (a forged hello could then
    // report for that worker's jobs). The other connection falls silent and
    // is expired within the liveness window if its worker really is gone;
    // the newcomer's next message then gets a Reconnect and its hello
    // succeeds.
    if (Peer* holder = peers_.find_worker(m.worker_id()); holder != nullptr) {
      drop("hello naming worker " + m.worker_id() + ", which is connected on another connection" +
           (holder->user_id.empty() ? "" : " (identity " + holder->user_id + ")") +
           (user_id.empty() ? "" : "; this one is " + user_id));
      return;
    }
  }
  // With CURVE, a worker id stays the key's that first registered it, across
  // coordinator restarts (workers.curve_key): once its connection is gone,
  // another listed worker key cannot say hello in its name and report for
  // the leases the database still gives it. Without CURVE there is no
  // identity to bind.
  std::optional<std::string> key;
  if (auth_) {
    key = auth_->public_key_of(user_id);
    auto owner = store_->worker_curve_key(m.worker_id());
    if (!owner.ok()) {
      drop("hello naming worker " + m.worker_id() + ": cannot read the key it is bound to: " +
           owner.status().ToString());
      return;
    }
    if (owner->has_value() && **owner != *key) {
      refuse_hello(routing_id, m.worker_id(), user_id, **owner);
      return;
    }
  }
  const bool repeated = same != nullptr;
  Peer& peer = repeated ? *same : peers_.upsert(routing_id, m.worker_id());
  peer.user_id = user_id;
  peer.info = m;
  peer.last_seen = now;
  if (!repeated) {
    peer.connected_at = now;
    peer.credit = 0;
    peer.loaded_models.assign(m.loaded_models().begin(), m.loaded_models().end());
    peer.held_models = to_held_models(m.held_models());
    peer.running.clear();
    peer.next.reset();  // a reconnecting worker gives its prefetched job back
  }
  const std::vector<proto::RunningJob> claimed = proto::running_jobs(m);
  // A repeated hello on one connection (it sent several while reconnecting)
  // changes nothing it holds: a job handed to it in between is still its job,
  // and it is not offered a second one.
  double wall = db::wall_clock_seconds();
  const bool busy = !claimed.empty() || !peer.running.empty();
  db::WorkerRecord record = to_worker_record(m, busy ? "busy" : "idle");
  record.curve_key = key;
  Status s = store_->upsert_worker(record, wall);
  if (!s.ok()) spdlog::warn("worker {}: cannot record it: {}", m.worker_id(), s.ToString());
  if (!repeated) {
    spdlog::info("worker {} connected ({} {} device {}{})", m.worker_id(), m.backend(), m.device_name(),
                 m.device_index(), user_id.empty() ? "" : ", identity " + user_id);
  }
  proto::Envelope w;
  w.mutable_welcome()->set_coordinator_id(coordinator_id_);
  w.mutable_welcome()->set_heartbeat_ms(static_cast<int32_t>(options_.heartbeat.count()));
  w.mutable_welcome()->set_heartbeat_liveness(options_.liveness);
  send(routing_id, std::move(w));
  if (peer.resyncing) {
    peer.resyncing = false;
    give_back_unclaimed_leases(peer, m);
  }
  // Every job it runs keeps its lease, each on its own: a lease of this
  // worker (the connection's, never one the message names) that is still
  // open. At most kMaxBatch of them (proto::validate).
  for (const proto::RunningJob& r : claimed) {
    if (running_job(peer, r.job_id(), r.attempt()) != nullptr) continue;  // known: a repeated hello
    Status ext = store_->extend_lease(r.job_id(), r.attempt(), m.worker_id(), wall, options_.lease_seconds);
    if (ext.ok()) {
      PeerJob job;
      if (peer.next && peer.next->job_id == r.job_id() && peer.next->attempt == r.attempt()) {
        job = std::move(*peer.next);  // it started the prefetched job meanwhile
        peer.next.reset();
      } else {
        job.job_id = r.job_id();
        job.attempt = r.attempt();
      }
      job.last_progress = now;
      peer.running.push_back(std::move(job));
    } else {
      // Its lease is gone (expired, cancelled, another worker's): the work
      // would be dropped.
      spdlog::info("worker {} runs job {} attempt {} whose lease ended ({}); telling it to stop", m.worker_id(),
                   r.job_id(), r.attempt(), ext.message());
      proto::Envelope c;
      c.mutable_cancel()->set_job_id(r.job_id());
      c.mutable_cancel()->set_attempt(r.attempt());
      send(routing_id, std::move(c));
    }
  }
}

void Server::refuse_hello(const std::string& routing_id, const std::string& worker_id, const std::string& user_id,
                          const std::string& owner_key) {
  const std::string owner = auth_->name_of(owner_key);
  Status refusal = Status::PermissionDenied(
      "refused: worker id \"" + worker_id + "\" belongs to another key (" +
      (owner.empty() ? "one no longer in the authorized keys, " + owner_key : "\"" + owner + "\"") +
      " registered it); this connection's key is \"" + user_id +
      "\". Start this worker with another --id, or with the key that registered the id; to give the id to a new "
      "key, run `hipq workers forget " + worker_id + " --db <the coordinator's database>`");
  drop("hello " + refusal.message());
  send(routing_id, error_reply(refusal));
}

void Server::give_back_unclaimed_leases(const Peer& peer, const proto::WorkerHello& m) {
  auto leases = store_->list_leases();
  if (!leases.ok()) {
    spdlog::warn("worker {}: cannot list its leases: {}", peer.worker_id, leases.status().ToString());
    return;
  }
  const std::vector<proto::RunningJob> claimed = proto::running_jobs(m);
  for (const auto& l : *leases) {
    if (l.worker_id != peer.worker_id) continue;
    if (std::any_of(claimed.begin(), claimed.end(), [&](const proto::RunningJob& r) {
          return r.job_id() == l.job_id && r.attempt() == l.attempt;
        })) {
      continue;
    }
    Status s = store_->return_lease(l.job_id, l.attempt, l.worker_id, db::wall_clock_seconds());
    if (s.ok()) {
      ++counters_.leases_returned;
      maybe_queued_ = true;
      spdlog::info("worker {} never received job {} attempt {}; queued again (not counted as an attempt)",
                   peer.worker_id, l.job_id, l.attempt);
    }
  }
}

void Server::on_ready(Peer& peer, const proto::Ready& m) {
  if (peer.resyncing) return;  // its hello comes first (forget_peer_state)
  // Credit is what the worker takes now besides the jobs it holds (its ask
  // rides in its report and is handled after it, or a Ready follows the
  // report on the same connection: a job it reported is no longer counted).
  // Replaced, not added to, and capped so it never holds more than
  // credit_cap (kMaxCredit, or the batch it runs): a repeated or re-sent ask
  // cannot grant a job twice.
  peer.credit = std::clamp(m.credit(), 0, std::max(0, credit_cap(peer) - held_jobs(peer)));
  peer.asked_at = Clock::now();
  if (m.loaded_models_size() > 0 || peer.loaded_models.empty()) {
    peer.loaded_models.assign(m.loaded_models().begin(), m.loaded_models().end());
    peer.held_models = to_held_models(m.held_models());
  }
}

void Server::on_heartbeat(Peer& peer, const proto::Heartbeat& m) {
  // Extends the leases of the connection's worker only: the jobs a
  // heartbeat names are never looked up, so a forged list extends nothing of
  // anyone else's.
  if (m.running_job_id() == 0 && m.running().empty() && held_jobs(peer) == 0) return;
  auto n = store_->extend_worker_leases(peer.worker_id, db::wall_clock_seconds(), options_.lease_seconds);
  if (!n.ok()) spdlog::warn("worker {}: cannot extend its lease: {}", peer.worker_id, n.status().ToString());
}

void Server::on_progress(Peer& peer, const proto::Progress& m) {
  PeerJob* job = running_job(peer, m.job_id(), m.attempt());
  if (job == nullptr) return;
  job->last_progress = Clock::now();
  job->progress_step = m.step();
  job->progress_steps = m.steps();
}

void Server::on_result(Peer& peer, const proto::JobResult& m) {
  // A result without outputs has no paths to confine: no job row to read.
  if (m.outputs_size() > 0) {
    if (auto job = store_->get_job(m.job_id()); job.ok()) {
      if (Status where = check_result_outputs(m, job->output_dir); !where.ok()) {
        // Only the lease holder gets here; it recorded nothing we could trust.
        spdlog::error("worker {}: result of job {} attempt {} refused: {}", peer.worker_id, m.job_id(), m.attempt(),
                      where.message());
        proto::JobError e;
        e.set_job_id(m.job_id());
        e.set_attempt(m.attempt());
        e.set_code("InvalidArgument");
        e.set_message("result refused: " + where.message());
        e.set_retryable(true);
        on_error(peer, e);
        return;
      }
    }
  }
  Status s = store_->record_result(to_db_result(m, peer.worker_id), db::wall_clock_seconds());
  bool ack = true;
  if (s.ok()) {
    ++counters_.results_recorded;
    ++peer.jobs_done;
    if (options_.metrics) {
      std::vector<monitor::TimingMs> phases;
      phases.reserve(static_cast<size_t>(m.phases_size()));
      for (const auto& t : m.phases()) phases.push_back({t.phase(), t.host_ms()});
      std::vector<double> steps;
      steps.reserve(static_cast<size_t>(m.steps_size()));
      for (const auto& t : m.steps()) steps.push_back(t.host_ms());
      metric_events_.push_back([metrics = options_.metrics, worker = peer.worker_id,
                                device = peer.info.device_name(), verdict = m.parity().verdict(),
                                phases = std::move(phases), steps = std::move(steps)] {
        metrics->record_result(worker, device, verdict, phases, steps);
      });
    }
  } else if (s.code() == StatusCode::kAlreadyExists || s.code() == StatusCode::kFailedPrecondition ||
             s.code() == StatusCode::kNotFound) {
    ++counters_.results_duplicate;
    spdlog::info("dropped result of job {} attempt {} from {}: {}", m.job_id(), m.attempt(), peer.worker_id,
                 s.message());
  } else {
    // Database trouble: no ack, the worker keeps the report and re-sends it.
    ack = false;
    spdlog::error("cannot record result of job {} attempt {}: {}", m.job_id(), m.attempt(), s.ToString());
  }
  end_job(peer, m.job_id(), Clock::now());
  if (ack) queue_ack(peer.routing_id, m.job_id(), m.attempt());
}

void Server::fail_batch_of(int64_t job_id, const std::string& error) {
  auto job = store_->get_job(job_id);
  if (!job.ok()) return;
  // Jobs of the batch that workers hold prefetched have not started: they go
  // back to the queue (no attempt counted) and fail with the queued ones
  // instead of running into the same error; their workers drop them.
  for (const auto& [rid, p] : peers_.peers()) {
    if (!p.next || p.next->batch_id != job->batch_id) continue;
    const PeerJob next = *p.next;
    Status s = store_->return_lease(next.job_id, next.attempt, p.worker_id, db::wall_clock_seconds());
    if (!s.ok()) continue;  // its lease ended already
    proto::Envelope c;
    c.mutable_cancel()->set_job_id(next.job_id);
    c.mutable_cancel()->set_attempt(next.attempt);
    send(rid, std::move(c));
    ++counters_.leases_returned;
    end_job(*peers_.find(rid), next.job_id, Clock::now());
  }
  auto failed = store_->fail_queued_jobs(
      job->batch_id, "not run: job " + std::to_string(job_id) + " of this batch hit a configuration error: " + error,
      db::wall_clock_seconds());
  if (!failed.ok()) {
    spdlog::error("cannot fail the queued jobs of batch {}: {}", job->batch_id, failed.status().ToString());
    return;
  }
  spdlog::error("batch {}: configuration error, {} queued job(s) failed without running: {}", job->batch_id,
                *failed, error);
}

void Server::on_error(Peer& peer, const proto::JobError& m) {
  if (m.not_started()) {
    on_returned(peer, m);
    return;
  }
  auto r = store_->record_failure(m.job_id(), m.attempt(), peer.worker_id, m.code() + ": " + m.message(),
                                  m.retryable(), db::wall_clock_seconds());
  bool ack = true;
  if (r.ok()) {
    ++counters_.failures_recorded;
    ++peer.jobs_failed;
    if (options_.metrics) {
      metric_events_.push_back([metrics = options_.metrics, code = m.code()] { metrics->record_failure(code); });
    }
    if (r->new_state == db::JobState::kQueued) maybe_queued_ = true;
    spdlog::warn("job {} attempt {} failed on {} ({}): {}: {}", m.job_id(), m.attempt(), peer.worker_id,
                 db::job_state_name(r->new_state), m.code(), m.message());
    if (m.configuration()) fail_batch_of(m.job_id(), m.code() + ": " + m.message());
  } else if (r.status().code() == StatusCode::kFailedPrecondition || r.status().code() == StatusCode::kNotFound ||
             r.status().code() == StatusCode::kAlreadyExists) {
    spdlog::info("dropped error report of job {} attempt {}: {}", m.job_id(), m.attempt(), r.status().message());
  } else {
    ack = false;
    spdlog::error("cannot record failure of job {}: {}", m.job_id(), r.status().ToString());
  }
  end_job(peer, m.job_id(), Clock::now());
  if (ack) queue_ack(peer.routing_id, m.job_id(), m.attempt());
}

void Server::on_returned(Peer& peer, const proto::JobError& m) {
  Status s = store_->return_lease(m.job_id(), m.attempt(), peer.worker_id, db::wall_clock_seconds());
  if (s.ok()) {
    ++counters_.leases_returned;
    maybe_queued_ = true;
    spdlog::info("worker {} gave back job {} attempt {} unstarted ({}); it does not count as an attempt",
                 peer.worker_id, m.job_id(), m.attempt(), m.message());
  } else if (s.code() != StatusCode::kFailedPrecondition && s.code() != StatusCode::kNotFound &&
             s.code() != StatusCode::kAlreadyExists) {
    spdlog::error("cannot give back job {} attempt {}: {}", m.job_id(), m.attempt(), s.ToString());
    return;  // no ack: the worker re-sends it
  }
  const bool held = running_job(peer, m.job_id(), m.attempt()) != nullptr ||
                    (peer.next && peer.next->job_id == m.job_id() && peer.next->attempt == m.attempt());
  if (held) end_job(peer, m.job_id(), Clock::now());
  queue_ack(peer.routing_id, m.job_id(), m.attempt());
}

void Server::queue_ack(const std::string& routing_id, int64_t job_id, int attempt) {
  proto::ReportAck ack;
  ack.set_job_id(job_id);
  ack.set_attempt(attempt);
  pending_acks_[routing_id].push_back(std::move(ack));
}

void Server::send_pending_acks() {
  for (auto& [rid, acks] : pending_acks_) {
    for (auto& ack : acks) {
      proto::Envelope a;
      *a.mutable_report_ack() = std::move(ack);
      send(rid, std::move(a));
    }
  }
  pending_acks_.clear();
}

void Server::on_goodbye(Peer& peer, const proto::Goodbye& m) {
  spdlog::info("worker {} left: {}", peer.worker_id, m.reason());
  auto released = store_->release_worker_leases(peer.worker_id, "worker left: " + m.reason(), db::wall_clock_seconds());
  if (released.ok() && !released->empty()) maybe_queued_ = true;
  set_worker_state(peer, "gone");
  peers_.remove(peer.routing_id);
}

void Server::dispatch() {
  // One job per peer per round, idle peers first (PeerTable::wanting_work):
  // a prefetch never takes the last queued job from an idle worker.
  for (bool gave = true; gave && maybe_queued_;) {
    gave = false;
    for (const std::string& rid : peers_.wanting_work()) {
      Peer* peer = peers_.find(rid);
      if (!peer || peer->credit <= 0 || held_jobs(*peer) >= credit_cap(*peer)) continue;
      // A prefetched job runs after the running one, whose model the worker
      // then holds: it is preferred as much as the models held now. A job
      // of a batch's model and LoRA set is likelier to share its batch.
      std::vector<std::string> models = peer->loaded_models;
      std::vector<db::ModelHolding> holdings = peer->held_models;
      for (const PeerJob& r : peer->running) {
        if (r.holding.model.empty()) continue;
        if (std::find(models.begin(), models.end(), r.holding.model) == models.end()) {
          models.push_back(r.holding.model);
        }
        if (std::find(holdings.begin(), holdings.end(), r.holding) == holdings.end()) {
          holdings.push_back(r.holding);
        }
      }
      auto leased = store_->lease_next(peer->worker_id, models, db::wall_clock_seconds(), options_.lease_seconds,
                                       holdings);
      if (!leased.ok()) {
        spdlog::error("lease for {} failed: {}", peer->worker_id, leased.status().ToString());
        return;
      }
      if (!leased->has_value()) {
        maybe_queued_ = false;
        return;
      }
      const db::LeasedJob& job = **leased;
      proto::Envelope e;
      *e.mutable_assignment() = make_assignment(job, dispatch_settings_);
      // The acks of this turn's reports from the worker ride on its
      // assignment (protocol 6): one message instead of two.
      if (auto acks = pending_acks_.find(rid); acks != pending_acks_.end()) {
        for (auto& ack : acks->second) *e.mutable_assignment()->add_acks() = std::move(ack);
        pending_acks_.erase(acks);
      }
      db::ModelHolding holding{job.job.model, spec::lora_set_key(job.job.loras, job.job.inputs.loras)};
      send(rid, std::move(e));
      --peer->credit;
      gave = true;
      ++counters_.assignments;
      PeerJob leased_job;
      leased_job.job_id = job.job.id;
      leased_job.attempt = job.attempt;
      leased_job.steps = job.job.steps;
      leased_job.batch_id = job.job.batch_id;
      leased_job.seed = job.job.seed;
      leased_job.prompt = job.job.prompt;
      leased_job.holding = std::move(holding);
      leased_job.last_progress = Clock::now();
      leased_job.progress_steps = job.job.steps;
      // A worker running one job at a time holds the job leased while it
      // runs one; a batching worker starts the jobs of a turn together, so
      // each of its leases counts as running (docs/protocol.md, "Batching").
      if (!peer->running.empty() && !batching(*peer)) {
        peer->next = std::move(leased_job);
      } else {
        peer->running.push_back(std::move(leased_job));
      }
    }
  }
}

void Server::expire_peers() {
  auto limit = options_.heartbeat * options_.liveness;
  for (const std::string& rid : peers_.silent_since(Clock::now() - limit)) {
    Peer* peer = peers_.find(rid);
    if (!peer) continue;
    spdlog::warn("worker {} missed {} heartbeats; releasing its leases", peer->worker_id, options_.liveness);
    auto released = store_->release_worker_leases(
        peer->worker_id, "worker missed " + std::to_string(options_.liveness) + " heartbeats", db::wall_clock_seconds());
    if (!released.ok()) {
      spdlog::error("cannot release leases of {}: {}", peer->worker_id, released.status().ToString());
    } else if (!released->empty()) {
      counters_.leases_expired += static_cast<int64_t>(released->size());
      maybe_queued_ = true;
    }
    set_worker_state(*peer, "gone");
    peers_.remove(rid);
  }
}

void Server::expire_leases() {
  auto expired = store_->expire_leases(db::wall_clock_seconds());
  if (!expired.ok()) {
    spdlog::error("lease expiry failed: {}", expired.status().ToString());
    return;
  }
  for (const auto& f : *expired) {
    ++counters_.leases_expired;
    spdlog::warn("lease of job {} attempt {} ({}) expired; job is now {}", f.job_id, f.attempt, f.worker_id,
                 db::job_state_name(f.new_state));
    if (Peer* p = peers_.find_worker(f.worker_id)) end_job(*p, f.job_id, Clock::now());
  }
  if (!expired->empty()) maybe_queued_ = true;
}

void Server::reclaim_stalled_leases() {
  if (options_.stall_seconds <= 0) return;
  const auto limit = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.stall_seconds));
  const auto now = Clock::now();
  // Each running job on its own clock: one stalled job of a batch is taken
  // back and cancelled alone.
  std::vector<std::pair<std::string, PeerJob>> stalled;
  for (const auto& [rid, p] : peers_.peers()) {
    for (const PeerJob& j : p.running) {
      if (now - j.last_progress > limit) stalled.emplace_back(rid, j);
    }
  }
  for (const auto& [rid, job] : stalled) {
    Peer* p = peers_.find(rid);
    Status s = store_->return_lease(job.job_id, job.attempt, p->worker_id, db::wall_clock_seconds());
    if (!s.ok() && s.code() != StatusCode::kFailedPrecondition && s.code() != StatusCode::kNotFound) {
      spdlog::error("cannot take back stalled job {}: {}", job.job_id, s.ToString());
      continue;
    }
    if (s.ok()) {
      ++counters_.leases_returned;
      maybe_queued_ = true;
      spdlog::warn("worker {}: job {} attempt {} made no progress in {:.0f} s; taken back (not counted as an attempt)",
                   p->worker_id, job.job_id, job.attempt, options_.stall_seconds);
    }
    proto::Envelope c;
    c.mutable_cancel()->set_job_id(job.job_id);
    c.mutable_cancel()->set_attempt(job.attempt);
    send(rid, std::move(c));
    end_job(*p, job.job_id, now);  // its prefetched job starts now
  }
}

void Server::send_heartbeats() {
  for (const auto& [rid, peer] : peers_.peers()) {
    proto::Envelope hb;
    hb.mutable_heartbeat();
    send(rid, std::move(hb));
  }
}

// ---------------------------------------------------------------- clients

void Server::on_client(const std::string& routing_id, const proto::Envelope& request) {
  proto::Envelope reply;
  switch (request.body_case()) {
    case proto::Envelope::kSubmit: reply = on_submit(request.submit()); break;
    case proto::Envelope::kStatus: reply = on_status(request.status()); break;
    case proto::Envelope::kCancelRequest: reply = on_cancel(request.cancel_request()); break;
    case proto::Envelope::kWorkers: reply = on_workers(request.workers()); break;
    case proto::Envelope::kDrainRequest: reply = on_drain(request.drain_request()); break;
    case proto::Envelope::kQuery:
      if (queries_->submit(routing_id, request)) return;  // answered from the query thread
      reply = error_reply(Status::Unavailable("the coordinator is answering " +
                                              std::to_string(QueryWorker::kMaxPending) +
                                              " queries already; try again shortly"));
      break;
    default: return;
  }
  reply.set_request_id(request.request_id());
  send(routing_id, std::move(reply));
}

proto::Envelope Server::on_submit(const proto::SubmitRequest& m) {
  auto manifest = parse_manifest_text(m.manifest_text(), m.manifest_path(), options_.max_batch_jobs);
  if (!manifest.ok()) return error_reply(manifest.status());
  if (Status pre = preflight(*manifest); !pre.ok()) return error_reply(pre);
  // Streamed: the jobs are expanded one at a time as they are checked and
  // inserted, so a batch of a million is never in memory whole.
  db::NewBatch batch = manifest->to_streamed_batch();
  const int64_t jobs = manifest->job_count();
  if (m.has_priority_override()) batch.priority = m.priority_override();
  if (Status free = store_->check_folders_free(batch); !free.ok()) return error_reply(free);
  auto id = store_->insert_batch(batch, db::wall_clock_seconds());
  if (!id.ok()) return error_reply(id.status());
  maybe_queued_ = true;
  spdlog::info("batch {} \"{}\": {} jobs queued from {}", *id, batch.name, jobs, m.manifest_path());
  proto::Envelope e;
  e.mutable_submit_reply()->set_batch_id(*id);
  e.mutable_submit_reply()->set_jobs(jobs);
  e.mutable_submit_reply()->set_name(batch.name);
  return e;
}

proto::Envelope Server::on_status(const proto::StatusRequest& m) {
  proto::Envelope e;
  auto* reply = e.mutable_status_reply();
  std::vector<db::BatchCounts> counts;
  if (m.batch_id() > 0) {
    auto c = store_->batch_counts(m.batch_id());
    if (!c.ok()) return error_reply(c.status());
    counts.push_back(std::move(*c));
  } else {
    auto all = store_->all_batch_counts(m.active_only() ? std::optional(db::BatchState::kActive) : std::nullopt);
    if (!all.ok()) return error_reply(all.status());
    counts = std::move(*all);
  }
  for (const auto& c : counts) {
    auto* b = reply->add_batches();
    fill_counts(*b, c);
    auto rec = store_->get_batch(c.batch_id);
    if (rec.ok()) {
      b->set_name(rec->name);
      b->set_priority(rec->priority);
      b->set_created_at(rec->created_at);
      if (rec->finished_at) b->set_finished_at(*rec->finished_at);
    }
  }
  return e;
}

proto::Envelope Server::on_cancel(const proto::CancelRequest& m) {
  double now = db::wall_clock_seconds();
  auto outcome = m.batch_id() > 0 ? store_->cancel_batch(m.batch_id(), now) : store_->cancel_job(m.job_id(), now);
  if (!outcome.ok()) return error_reply(outcome.status());
  int64_t notified = 0;
  for (const auto& lease : outcome->leases) {
    Peer* p = peers_.find_worker(lease.worker_id);
    if (!p) continue;
    proto::Envelope c;
    c.mutable_cancel()->set_job_id(lease.job_id);
    c.mutable_cancel()->set_attempt(lease.attempt);
    send(p->routing_id, std::move(c));
    ++notified;
  }
  spdlog::info("cancelled {} {}: {} job(s), {} running job(s) told to stop", m.batch_id() > 0 ? "batch" : "job",
               m.batch_id() > 0 ? m.batch_id() : m.job_id(), outcome->jobs_cancelled, notified);
  proto::Envelope e;
  e.mutable_cancel_reply()->set_cancelled(outcome->jobs_cancelled);
  e.mutable_cancel_reply()->set_running_notified(notified);
  return e;
}

proto::Envelope Server::on_workers(const proto::WorkersRequest&) {
  proto::Envelope e;
  auto* reply = e.mutable_workers_reply();
  auto now = Clock::now();
  for (const auto& [rid, p] : peers_.peers()) {
    auto* w = reply->add_workers();
    *w->mutable_info() = p.info;
    w->mutable_info()->clear_loaded_models();
    for (const auto& m : p.loaded_models) w->mutable_info()->add_loaded_models(m);
    w->set_state(p.draining ? "draining" : (!p.running.empty() ? "busy" : "idle"));
    w->set_running_job_id(first_running_job_id(p));
    if (!p.running.empty()) {
      w->set_progress_step(p.running.front().progress_step);
      w->set_progress_steps(p.running.front().progress_steps);
    }
    for (const PeerJob& j : p.running) {
      auto* r = w->add_running();
      r->set_job_id(j.job_id);
      r->set_attempt(j.attempt);
    }
    w->set_max_batch(std::max(1, p.info.max_batch()));
    w->set_last_seen_age_s(std::chrono::duration<double>(now - p.last_seen).count());
    w->set_jobs_done(p.jobs_done);
    w->set_jobs_failed(p.jobs_failed);
    w->set_user_id(p.user_id);
  }
  return e;
}

proto::Envelope Server::on_drain(const proto::DrainRequest& m) {
  int32_t n = 0;
  std::vector<std::string> targets;
  for (const auto& [rid, p] : peers_.peers()) {
    if (m.worker_id().empty() || p.worker_id == m.worker_id()) targets.push_back(rid);
  }
  if (targets.empty() && !m.worker_id().empty()) {
    return error_reply(Status::NotFound("no connected worker \"" + m.worker_id() + "\" (see `hipq workers`)"));
  }
  for (const auto& rid : targets) {
    Peer* p = peers_.find(rid);
    p->draining = true;
    p->credit = 0;
    set_worker_state(*p, "draining");
    proto::Envelope d;
    d.mutable_drain()->set_reason("drain requested");
    send(rid, std::move(d));
    ++n;
  }
  proto::Envelope e;
  e.mutable_drain_reply()->set_draining(n);
  return e;
}

}  // namespace hipq::coordinator
