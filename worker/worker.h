// Worker: one process per GPU — the connection loop (zguide Paranoid Pirate
// worker) around a JobRunner.
//
// The connection thread owns a DEALER socket to the coordinator. It says
// hello (device facts, models held, the job it still runs after a
// reconnect), asks for work (pull-based: it holds at most `credit`
// jobs, the one it runs and, with credit 2, the next one, so the hand-off
// round trip hides behind work; the ask rides in each report, a Ready alone
// only when there is none), sends a heartbeat every interval whatever
// the GPU is doing, and forwards progress, results and errors. The job runs
// on a second thread that owns the JobRunner; the two talk through a
// JobHandoff (worker/job_handoff.h), so the GPU never blocks heartbeats.
//
// Batching (protocol 7; docs/protocol.md "Batching"): with an effective
// batch above 1 (WorkerOptions::batch, at most the runner's max_batch()) the
// worker asks, when idle, for as many jobs as the batch holds, and at the end
// of the turn in which assignments arrived starts those sharing the first
// held job's batch_key (up to the batch) as one run_batch() on the job
// thread, each job with its own progress sink and cancel flag; each is still
// reported, acknowledged and re-sent on its own, and the ask rides on the
// batch's last report. Hello and heartbeats name every running job.
//
// A job held but not started (the prefetched one, or those left out of a
// batch) is only held until the running ones end; it is given back unstarted (JobError.not_started: no attempt counted)
// when the worker drains, backs off after a retryable failure, is asked to
// reconnect or finds the coordinator silent, so it never waits on a worker
// that will not run it and never runs while another worker might.
//
// When the coordinator is silent for `liveness` heartbeats the worker closes
// the socket and reconnects after a backoff that doubles from 1 s to 32 s
// (reset by a Welcome); a running job keeps running meanwhile. Results and
// errors are kept until the coordinator acknowledges them (ReportAck) and
// re-sent after every Welcome and when unacknowledged for report_resend, so a
// coordinator restart or a failed commit loses no finished work (the
// database records each (job, attempt) once; repeats are dropped).
// A failed job is reported with its reason and the worker carries on.
// Drain (from the coordinator, or request_drain(), e.g. on SIGTERM): finish
// the current job, report it, say Goodbye and return from run().
// Ownership: borrows the context and the runner (both outlive run()).
// Thread safety: run() on one thread; request_drain()/request_stop() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "base/status.h"
#include "proto/hipq.pb.h"
#include "proto/protocol.h"
#include "proto/transport.h"
#include "worker/health_file.h"
#include "worker/job_handoff.h"
#include "worker/job_runner.h"

namespace hipq::worker {

struct WorkerOptions {
  std::string endpoint = proto::kDefaultEndpoint;
  std::optional<proto::CurveClientKeys> curve;
  std::string worker_id;           // default: "<host>/<backend><device>/<pid>"
  std::chrono::milliseconds heartbeat = proto::kHeartbeatInterval;
  int liveness = proto::kHeartbeatLiveness;
  std::chrono::milliseconds reconnect_initial = proto::kReconnectInitial;
  std::chrono::milliseconds reconnect_max = proto::kReconnectMax;
  // Leave after this many jobs (0 = never); for tests and batch schedulers.
  int64_t max_jobs = 0;
  // Jobs held at once, 1..proto::kMaxCredit: 1 = ask for the next job only
  // after reporting the last; 2 = also hold the next one while running one
  // (`hipq worker --credit`; docs/protocol.md, "Credit and prefetch").
  int credit = proto::kDefaultCredit;
  // Jobs run at once as one batch, 1..proto::kMaxBatch (`hipq worker
  // --batch`); the effective batch is min(batch, runner.max_batch()), read
  // once when run() starts. Above 1 the worker asks for that many jobs when
  // idle (credit is then ignored: no prefetch on top) and runs those of one
  // batch key together. run() fails with InvalidArgument outside the range.
  int batch = 1;
  // A batching worker that received part of what it asked for waits at most
  // this long (from the first assignment) for the rest before it starts:
  // the coordinator sends one turn's assignments back to back, but they may
  // reach this socket a moment apart.
  std::chrono::milliseconds batch_gather{5};
  // After a retryable failure (device error, out of memory, I/O) the worker
  // waits before asking for more work: failure_backoff_initial, doubling per
  // failure in a row, at most failure_backoff_max; reset by a success. A GPU
  // that fails everything then cannot burn every job's attempts in a second
  // while healthy workers are busy: they get the requeued jobs meanwhile.
  std::chrono::milliseconds failure_backoff_initial{1000};
  std::chrono::milliseconds failure_backoff_max{60000};
  // A result or error not acknowledged this long after it was sent is sent
  // again (also after every Welcome). Covers a coordinator whose group commit
  // failed: it withholds the ack, and the job need not wait for its lease to
  // expire and be run again. Duplicates are acknowledged and dropped there.
  std::chrono::milliseconds report_resend{5000};
  // Rewritten on every heartbeat tick, removed on a clean exit (empty = none);
  // see worker/health_file.h.
  std::filesystem::path health_file;
};

struct WorkerCounters {
  int64_t jobs_done = 0;
  int64_t jobs_failed = 0;
  int64_t reconnects = 0;
  int64_t dropped_messages = 0;
  int64_t reports_resent = 0;  // results/errors sent again for want of an ack (after a Welcome, or overdue)
  int64_t hellos_refused = 0;  // ErrorReply answers to its hello (logged the first time and every 60th)
  int64_t prefetched = 0;      // jobs received while running another, held until it ended
  int64_t given_back = 0;      // jobs handed back unstarted (busy, draining, backing off, reconnecting)
  int64_t batches = 0;         // batches of more than one job started (each job counts in jobs_done/failed)
};

class Worker {
 public:
  Worker(zmq::context_t& context, WorkerOptions options, JobRunner& runner);
  ~Worker();

  // Runs until drained, stopped or max_jobs reached. Errors only for a
  // socket that cannot be created (bad endpoint or keys).
  Status run();
  // Finish the current job, then leave.
  void request_drain() { drain_requested_.store(true); }
  // Leave now: cancel the running job (it is requeued by the coordinator).
  void request_stop() { stop_requested_.store(true); }

  const std::string& worker_id() const { return options_.worker_id; }
  const WorkerCounters& counters() const { return counters_; }

 private:
  // run() in turns, as the coordinator's server (coordinator/server.h):
  // start() opens the job pipe and thread and says hello; each poll is
  // followed by one turn(): the coordinator's messages (on_coordinator), the
  // job thread's reports (on_job_thread), the end of a failure backoff, a due
  // heartbeat (on_heartbeat_due) and a silent coordinator
  // (on_coordinator_silent: reconnect). done_running() says when to leave().
  Status start();
  bool done_running();
  std::chrono::milliseconds next_timeout() const;
  Status turn(bool coordinator_readable, bool job_thread_readable);
  void receive_from_coordinator();
  void receive_from_job_thread();
  void on_heartbeat_due(std::chrono::steady_clock::time_point now);
  // Waits out the reconnect backoff, then connects again and says hello;
  // errors as connect().
  Status on_coordinator_silent();
  void leave();
  Status connect();
  void send_hello();
  // The ask for more work, as a Ready says it (credit = jobs wanted besides
  // those held, models held while idle), or nullopt when the worker wants
  // nothing it has not asked for already (not welcomed, draining, backing
  // off). Counts it as asked.
  std::optional<proto::Ready> take_ask();
  // take_ask() sent alone, as a Ready (after a welcome or a failure backoff).
  void send_ready();
  void send(const proto::Envelope& e);
  void on_coordinator(const proto::Envelope& e);
  void on_job_thread(proto::Envelope& message);
  // Idle with held jobs: starts the first held job and, batching, the held
  // jobs of its batch key (up to the batch) with it; or gives every held job
  // back when the worker backs off or may have lost its leases.
  void start_held();
  // Whether start_held() should wait for more of the credit it asked for
  // (batch_gather).
  bool gathering(std::chrono::steady_clock::time_point now) const;
  // Hands `a` back unstarted (JobError.not_started), saying `why`.
  void give_back(const proto::JobAssignment& a, const std::string& why);
  // Gives back every held (unstarted) job.
  void give_back_held(const std::string& why);
  void set_draining();
  // Sets the cancel flag of every running job (stop, shutdown).
  void cancel_running();
  // Jobs held: the running ones and those not started yet.
  int held() const { return static_cast<int>(running_.size() + held_.size()); }
  // The most jobs held at once: the batch when batching, else the credit.
  int credit_cap() const { return batch_ > 1 ? batch_ : options_.credit; }
  std::vector<proto::RunningJob> running_list() const;
  // Runs the batches handoff_ gives it until quit.
  void job_thread_main();
  bool idle() const { return running_.empty(); }
  void write_health(const char* state);

  zmq::context_t& context_;
  WorkerOptions options_;
  JobRunner& runner_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<JobHandoff> handoff_;  // made by start(), before the job thread
  std::unique_ptr<std::thread> job_thread_;
  std::atomic<bool> drain_requested_{false};
  std::atomic<bool> stop_requested_{false};
  bool draining_ = false;
  bool welcomed_ = false;
  // A Reconnect asks for a hello; a burst of them (one per message that
  // reached the coordinator on a connection it no longer knew) is answered
  // with one hello, not one each: at most one per half heartbeat until a
  // Welcome, so a burst costs one Welcome and one resend of each report.
  bool hello_wanted_ = false;
  std::chrono::steady_clock::time_point hello_sent_{};
  void send_hello_if_wanted(std::chrono::steady_clock::time_point now);
  int batch_ = 1;                  // effective batch (run() sets it)
  struct ActiveJob {
    int64_t job_id = 0;
    int attempt = 0;
    std::shared_ptr<std::atomic<bool>> cancel;  // shared with the job thread
  };
  std::vector<ActiveJob> running_;  // given to the job thread, not yet reported
  struct HeldJob {
    proto::JobAssignment assignment;
    bool counted = false;           // counted in counters_.prefetched
  };
  std::deque<HeldJob> held_;        // leased, not started: start when the running ones end
  std::chrono::steady_clock::time_point held_since_{};  // first held job of an idle worker arrived
  // This turn began after the worker sent nothing for out_of_touch_window
  // (its loop stood still): nothing held, nor received in the turn, starts.
  bool stood_still_ = false;
  std::string stood_still_why_;
  int asked_ = 0;                  // credit asked for and not yet used by assignments
  int failures_in_a_row_ = 0;      // retryable failures since the last success
  std::chrono::steady_clock::time_point ready_not_before_{};  // failure backoff
  struct PendingReport {
    proto::Envelope report;
    std::chrono::steady_clock::time_point sent;
  };
  std::map<std::pair<int64_t, int>, PendingReport> unacked_;  // by (job, attempt)
  void send_report(const proto::Envelope& report, int64_t job, int attempt);
  // A result or error of the job thread, carrying take_ask() in its `next`
  // (protocol 6); kept for re-sending without it.
  void send_report_with_ask(proto::Envelope report, int64_t job, int attempt);
  // Sends again every unacknowledged report last sent at least `older_than` ago.
  void resend_reports(std::chrono::steady_clock::time_point now, std::chrono::milliseconds older_than);
  std::chrono::steady_clock::time_point last_heard_{};
  std::chrono::steady_clock::time_point next_heartbeat_{};
  std::chrono::steady_clock::time_point last_sent_{};  // when it last sent the coordinator anything
  // How long without hearing the coordinator, or without sending it
  // anything, before held jobs are given back: liveness - 1
  // heartbeats (the coordinator expires it after liveness).
  std::chrono::milliseconds out_of_touch_window() const;
  std::chrono::steady_clock::time_point drain_started_{};  // draining with no job: since when
  std::chrono::milliseconds backoff_;
  WorkerCounters counters_;
  HealthFile health_;
  bool health_failing_ = false;    // the last health write failed (logged once per run of failures)
};

// "<host>/<backend><device>/<pid>".
std::string default_worker_id(const std::string& backend, int device);
std::string host_name();

}  // namespace hipq::worker
