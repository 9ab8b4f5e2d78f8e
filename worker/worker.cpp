#include "worker/worker.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "base/build_info.h"
#include "proto/codec.h"

namespace hipq::worker {
namespace {

using Clock = std::chrono::steady_clock;

// Posts job-thread progress to the connection thread.
class HandoffProgress final : public ProgressSink {
 public:
  HandoffProgress(JobHandoff& handoff, const JobAssignment& job) : handoff_(handoff), job_(job) {}
  void progress(int step, int steps, std::string_view phase) override {
    proto::Envelope e;
    auto* p = e.mutable_progress();
    p->set_job_id(job_.job_id());
    p->set_attempt(job_.attempt());
    p->set_step(step);
    p->set_steps(steps);
    p->set_phase(std::string(phase));
    handoff_.post(std::move(e));
  }

 private:
  JobHandoff& handoff_;
  const JobAssignment& job_;
};

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string default_worker_id(const std::string& backend, int device) {
  return host_name() + "/" + backend + std::to_string(device) + "/" + std::to_string(getpid());
}

Worker::Worker(zmq::context_t& context, WorkerOptions options, JobRunner& runner)
    : context_(context), options_(std::move(options)), runner_(runner), backoff_(options_.reconnect_initial), health_(options_.health_file) {
  if (options_.worker_id.empty()) {
    proto::WorkerHello h;
    runner_.describe(h);
    options_.worker_id = default_worker_id(h.backend(), h.device_index());
  }
}

Worker::~Worker() {
  if (job_thread_ && job_thread_->joinable()) {
    cancel_running();
    handoff_->quit();
    job_thread_->join();
  }
}

Status Worker::connect() {
  try {
    socket_ = std::make_unique<zmq::socket_t>(context_, zmq::socket_type::dealer);
    proto::apply_socket_limits(*socket_);
    if (options_.curve) HIPQ_RETURN_IF_ERROR(proto::apply_curve_client(*socket_, *options_.curve));
    socket_->connect(options_.endpoint);
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument("cannot connect to \"" + options_.endpoint + "\": " + e.what());
  }
  welcomed_ = false;
  asked_ = 0;
  last_heard_ = Clock::now();
  return Status::Ok();
}

void Worker::send(const proto::Envelope& e) {
  if (!socket_) return;
  last_sent_ = Clock::now();
  Status s = proto::send_envelope(*socket_, e);
  if (!s.ok()) spdlog::debug("worker {}: send {} failed: {}", options_.worker_id, proto::body_name(e), s.message());
}

void Worker::send_report(const proto::Envelope& report, int64_t job, int attempt) {
  unacked_[{job, attempt}] = PendingReport{report, Clock::now()};
  send(report);
}

void Worker::send_report_with_ask(proto::Envelope report, int64_t job, int attempt) {
  // Kept without the ask: a re-sent report asks for nothing (the ask was for
  // the moment it was first sent; the coordinator replaces its credit with
  // each ask, so a stale one could only take a job back from the worker).
  unacked_[{job, attempt}] = PendingReport{report, Clock::now()};
  if (std::optional<proto::Ready> ask = take_ask()) {
    proto::Ready* next = report.has_result() ? report.mutable_result()->mutable_next()
                                             : report.mutable_error()->mutable_next();
    *next = std::move(*ask);
  }
  send(report);
}

void Worker::resend_reports(Clock::time_point now, std::chrono::milliseconds older_than) {
  for (auto& [key, pending] : unacked_) {
    if (now - pending.sent < older_than) continue;
    spdlog::info("worker {}: job {} attempt {}: not acknowledged; sending the report again", options_.worker_id,
                 key.first, key.second);
    send(pending.report);
    pending.sent = now;
    ++counters_.reports_resent;
  }
}

void Worker::send_hello() {
  proto::Envelope e;
  auto* h = e.mutable_hello();
  runner_.describe(*h);
  h->set_worker_id(options_.worker_id);
  h->set_host(host_name());
  h->set_build_sha(build_info::kGitSha);
  h->set_hipq_version(build_info::kVersion);
  if (idle()) {
    for (const auto& m : runner_.loaded_models()) h->add_loaded_models(m);
    for (const auto& m : runner_.held_models()) *h->add_held_models() = m;
  }
  // Every running job: the coordinator keeps their leases and gives back
  // those it holds for this worker that the hello does not name.
  proto::set_running_jobs(*h, running_list());
  h->set_max_batch(batch_);
  send(e);
  hello_sent_ = Clock::now();
  hello_wanted_ = false;
}

void Worker::send_hello_if_wanted(Clock::time_point now) {
  if (hello_wanted_ && now - hello_sent_ >= options_.heartbeat / 2) send_hello();
}

std::optional<proto::Ready> Worker::take_ask() {
  if (!welcomed_ || draining_) return std::nullopt;
  if (Clock::now() < ready_not_before_) return std::nullopt;  // backing off; the loop asks again later
  // A batching worker asks only between batches: jobs leased while a batch
  // runs could not join it, and would only wait.
  if (batch_ > 1 && !idle()) return std::nullopt;
  int64_t want = credit_cap() - held();
  if (options_.max_jobs > 0) {
    want = std::min(want, options_.max_jobs - counters_.jobs_done - counters_.jobs_failed - held());
  }
  // The coordinator replaces its credit with each ask: ask again only for more.
  if (want <= asked_) return std::nullopt;
  proto::Ready ready;
  ready.set_credit(static_cast<int32_t>(want));
  if (idle()) {
    // The runner's models may be read only while no job runs (worker/job_runner.h);
    // while one runs the coordinator keeps what it last heard and adds the
    // running job's model itself.
    for (const auto& m : runner_.loaded_models()) ready.add_loaded_models(m);
    for (const auto& m : runner_.held_models()) *ready.add_held_models() = m;
  }
  asked_ = static_cast<int>(want);
  return ready;
}

void Worker::send_ready() {
  std::optional<proto::Ready> ask = take_ask();
  if (!ask) return;
  proto::Envelope e;
  *e.mutable_ready() = std::move(*ask);
  send(e);
}

void Worker::give_back(const proto::JobAssignment& a, const std::string& why) {
  proto::Envelope err;
  err.mutable_error()->set_job_id(a.job_id());
  err.mutable_error()->set_attempt(a.attempt());
  err.mutable_error()->set_code("Unavailable");
  err.mutable_error()->set_message(why);
  err.mutable_error()->set_retryable(true);
  err.mutable_error()->set_not_started(true);
  ++counters_.given_back;
  send_report(err, a.job_id(), a.attempt());
}

void Worker::give_back_held(const std::string& why) {
  while (!held_.empty()) {
    proto::JobAssignment a = std::move(held_.front().assignment);
    held_.pop_front();
    spdlog::info("worker {}: prefetched job {} attempt {} given back unstarted: {}", options_.worker_id, a.job_id(),
                 a.attempt(), why);
    give_back(a, why);
  }
}

void Worker::set_draining() {
  draining_ = true;
  give_back_held("worker is draining");
}

void Worker::cancel_running() {
  for (auto& r : running_) r.cancel->store(true);
}

std::vector<proto::RunningJob> Worker::running_list() const {
  std::vector<proto::RunningJob> out;
  out.reserve(running_.size());
  for (const auto& r : running_) {
    proto::RunningJob j;
    j.set_job_id(r.job_id);
    j.set_attempt(r.attempt);
    out.push_back(std::move(j));
  }
  return out;
}

void Worker::job_thread_main() {
  while (std::optional<JobBatch> batch = handoff_->wait_for_job()) {
    const std::vector<JobAssignment>& jobs = batch->jobs;
    std::vector<std::unique_ptr<HandoffProgress>> sinks;
    std::vector<ProgressSink*> progress;
    std::vector<const std::atomic<bool>*> cancel;
    for (size_t i = 0; i < jobs.size(); ++i) {
      sinks.push_back(std::make_unique<HandoffProgress>(*handoff_, jobs[i]));
      progress.push_back(sinks.back().get());
      cancel.push_back(batch->cancel[i].get());
    }
    auto start = Clock::now();
    std::vector<Result<proto::JobResult>> outcomes;
    try {
      // One job takes run(), as it always did; a batch the runner's run_batch().
      if (jobs.size() == 1) {
        outcomes.push_back(runner_.run(jobs[0], *progress[0], *cancel[0]));
      } else {
        outcomes = runner_.run_batch(jobs, progress, cancel);
      }
    } catch (const std::exception& e) {
      // A runner bug must not take the worker down with the GPU's work.
      outcomes.clear();
      for (size_t i = 0; i < jobs.size(); ++i) {
        outcomes.emplace_back(Status::Internal(std::string("job runner threw: ") + e.what()));
      }
    }
    if (outcomes.size() != jobs.size()) {
      // A runner bug: no outcome can be matched to its job with certainty.
      const std::string why = "job runner returned " + std::to_string(outcomes.size()) + " outcome(s) for a batch of " +
                              std::to_string(jobs.size()) + " job(s)";
      outcomes.clear();
      for (size_t i = 0; i < jobs.size(); ++i) outcomes.emplace_back(Status::Internal(why));
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobAssignment& job = jobs[i];
      Result<proto::JobResult>& outcome = outcomes[i];
      proto::Envelope report;
      if (outcome.ok()) {
        *report.mutable_result() = std::move(*outcome);
        report.mutable_result()->set_job_id(job.job_id());
        report.mutable_result()->set_attempt(job.attempt());
        if (report.result().wall_ms() == 0) {
          report.mutable_result()->set_wall_ms(
              std::chrono::duration<double, std::milli>(Clock::now() - start).count());
        }
      } else {
        auto* err = report.mutable_error();
        err->set_job_id(job.job_id());
        err->set_attempt(job.attempt());
        err->set_code(std::string(status_code_name(outcome.status().code())));
        err->set_message(outcome.status().message());
        err->set_retryable(is_retryable(outcome.status()));
        err->set_configuration(is_configuration_error(outcome.status()));
      }
      handoff_->post(std::move(report));
    }
  }
}

bool Worker::gathering(Clock::time_point now) const {
  return batch_ > 1 && asked_ > 0 && static_cast<int>(held_.size()) < batch_ &&
         now - held_since_ < options_.batch_gather;
}

void Worker::start_held() {
  if (!idle() || held_.empty()) return;
  // A worker that has not heard the coordinator for most of the liveness
  // window may have been expired (turn() checks that its own loop did not
  // stand still): it hands the jobs back rather than risk running them
  // beside another worker.
  const auto now = Clock::now();
  if (stood_still_) {
    give_back_held(stood_still_why_);
    return;
  }
  if (now < ready_not_before_) {
    give_back_held("worker is backing off after a failure");
    return;
  }
  if (now - last_heard_ > out_of_touch_window()) {
    give_back_held("the coordinator has been silent; its lease may have been taken back");
    return;
  }
  JobBatch batch;
  batch.jobs.push_back(std::move(held_.front().assignment));
  held_.pop_front();
  // Batching: the held jobs of the first one's key join it, in the order
  // they arrived; a job of another key waits for the next batch.
  const std::string key = batch_ > 1 ? runner_.batch_key(batch.jobs.front()) : std::string();
  if (!key.empty()) {
    for (auto it = held_.begin(); it != held_.end() && static_cast<int>(batch.jobs.size()) < batch_;) {
      if (runner_.batch_key(it->assignment) == key) {
        batch.jobs.push_back(std::move(it->assignment));
        it = held_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& a : batch.jobs) {
    auto flag = std::make_shared<std::atomic<bool>>(false);
    running_.push_back(ActiveJob{a.job_id(), a.attempt(), flag});
    batch.cancel.push_back(std::move(flag));
    spdlog::debug("worker {}: job {} attempt {} started", options_.worker_id, a.job_id(), a.attempt());
  }
  if (batch.jobs.size() > 1) {
    ++counters_.batches;
    spdlog::debug("worker {}: {} jobs started as one batch", options_.worker_id, batch.jobs.size());
  }
  // Those left held now wait for the running ones: prefetched.
  for (auto& h : held_) {
    if (!h.counted) {
      h.counted = true;
      ++counters_.prefetched;
    }
  }
  handoff_->give(std::move(batch));
}

void Worker::on_coordinator(const proto::Envelope& e) {
  last_heard_ = Clock::now();
  switch (e.body_case()) {
    case proto::Envelope::kWelcome:
      if (!welcomed_) spdlog::info("worker {}: connected to coordinator {}", options_.worker_id,
                                   e.welcome().coordinator_id());
      welcomed_ = true;
      hello_wanted_ = false;  // answered; a Reconnect after this asks again
      asked_ = 0;
      backoff_ = options_.reconnect_initial;
      resend_reports(Clock::now(), std::chrono::milliseconds(0));
      send_ready();
      return;
    case proto::Envelope::kReconnect:
      // The coordinator lost track of this connection (restart, expiry, a
      // failed commit): it gives back leases the hello does not claim, and
      // the hello claims only the running jobs.
      give_back_held("the coordinator asked for a hello");
      welcomed_ = false;
      hello_wanted_ = true;
      send_hello_if_wanted(Clock::now());
      return;
    case proto::Envelope::kHeartbeat:
      return;
    case proto::Envelope::kAssignment: {
      const auto& a = e.assignment();
      // Reports the coordinator recorded in the turn that leased this job.
      for (const auto& ack : a.acks()) unacked_.erase({ack.job_id(), ack.attempt()});
      asked_ = std::max(0, asked_ - 1);
      if (draining_ || held() >= credit_cap() || Clock::now() < ready_not_before_) {
        // Never hold more than its credit, nor work while backing off: hand
        // it straight back for another worker.
        give_back(a, draining_                              ? "worker is draining"
                     : Clock::now() < ready_not_before_ ? "worker is backing off after a failure"
                                                         : "worker is busy with another job");
        return;
      }
      // Started at the end of the turn (start_held), so that every
      // assignment of one coordinator turn joins one batch.
      if (idle() && held_.empty()) held_since_ = Clock::now();
      held_.push_back(HeldJob{a, !idle()});
      if (!idle()) ++counters_.prefetched;
      return;
    }
    case proto::Envelope::kCancel: {
      const int64_t id = e.cancel().job_id();
      // Only that job's flag: the others of its batch run on.
      for (auto& r : running_) {
        if (r.job_id != id) continue;
        spdlog::info("worker {}: job {} cancelled by the coordinator", options_.worker_id, id);
        r.cancel->store(true);
        return;
      }
      for (auto it = held_.begin(); it != held_.end(); ++it) {
        if (it->assignment.job_id() != id) continue;
        // Never started: reported as the runner reports a cancelled job.
        spdlog::info("worker {}: prefetched job {} cancelled by the coordinator", options_.worker_id, id);
        proto::Envelope err;
        err.mutable_error()->set_job_id(id);
        err.mutable_error()->set_attempt(it->assignment.attempt());
        err.mutable_error()->set_code(std::string(status_code_name(StatusCode::kCancelled)));
        err.mutable_error()->set_message("job " + std::to_string(id) + " cancelled before it started");
        err.mutable_error()->set_retryable(false);
        const int attempt = it->assignment.attempt();
        held_.erase(it);
        send_report(err, id, attempt);
        return;
      }
      return;
    }
    case proto::Envelope::kDrain:
      spdlog::info("worker {}: draining ({})", options_.worker_id, e.drain().reason());
      set_draining();
      return;
    case proto::Envelope::kReportAck:
      unacked_.erase({e.report_ack().job_id(), e.report_ack().attempt()});
      return;
    case proto::Envelope::kErrorReply:
      // The hello was refused (another protocol version, an id bound to
      // another key): no welcome comes. The coordinator answers its next
      // heartbeat with Reconnect and it says hello again, so an operator can
      // fix the cause without restarting it; the log says why, not every time.
      if (counters_.hellos_refused++ % 60 == 0) {
        spdlog::error("worker {}: the coordinator refused it: {}: {}", options_.worker_id, e.error_reply().code(),
                      e.error_reply().message());
      }
      return;
    default:
      ++counters_.dropped_messages;
      return;
  }
}

void Worker::on_job_thread(proto::Envelope& message) {
  proto::Envelope* env = &message;
  if (env->body_case() == proto::Envelope::kProgress) {
    send(*env);
    return;
  }
  int64_t job = 0;
  int attempt = 0;
  if (env->body_case() == proto::Envelope::kResult) {
    job = env->result().job_id();
    attempt = env->result().attempt();
    ++counters_.jobs_done;
    failures_in_a_row_ = 0;
  } else if (env->body_case() == proto::Envelope::kError) {
    job = env->error().job_id();
    attempt = env->error().attempt();
    ++counters_.jobs_failed;
    spdlog::warn("worker {}: job {} attempt {} failed: {}: {}", options_.worker_id, job, attempt, env->error().code(),
                 env->error().message());
    if (env->error().retryable()) {
      // Likely this worker's trouble (device, memory, disk), not the job's.
      ++failures_in_a_row_;
      auto wait = options_.failure_backoff_initial;
      for (int i = 1; i < failures_in_a_row_ && wait < options_.failure_backoff_max; ++i) wait *= 2;
      wait = std::min(wait, options_.failure_backoff_max);
      ready_not_before_ = Clock::now() + wait;
      spdlog::warn("worker {}: {} retryable failure(s) in a row; asking for work again in {} ms", options_.worker_id,
                   failures_in_a_row_, wait.count());
    }
  } else {
    return;
  }
  running_.erase(std::remove_if(running_.begin(), running_.end(),
                                [&](const ActiveJob& r) { return r.job_id == job && r.attempt == attempt; }),
                 running_.end());
  if (options_.max_jobs > 0 && counters_.jobs_done + counters_.jobs_failed >= options_.max_jobs) set_draining();
  if (!idle()) {
    // More reports of this batch follow (posted together): the ask rides on
    // the last one, when the worker is idle and can take a whole batch.
    send_report(*env, job, attempt);
    return;
  }
  start_held();
  // The report carries the ask for the next job (protocol 6): one message,
  // answered in one turn of the coordinator (its ack rides on the assignment).
  // Sent after the held job started and after any give-back above, so the
  // ask counts what the worker holds now; the give-back (an error report)
  // leaves before it, as a Ready followed it before.
  send_report_with_ask(std::move(*env), job, attempt);
}

Status Worker::run() {
  if (options_.batch < 1 || options_.batch > proto::kMaxBatch) {
    return Status::InvalidArgument("worker batch " + std::to_string(options_.batch) + " is outside 1.." +
                                   std::to_string(proto::kMaxBatch) + " (--batch)");
  }
  if (options_.credit < 1 || options_.credit > proto::kMaxCredit) {
    return Status::InvalidArgument("worker credit " + std::to_string(options_.credit) + " is outside 1.." +
                                   std::to_string(proto::kMaxCredit) + " (--credit)");
  }
  // Read once, while the runner is idle (worker/job_runner.h).
  batch_ = std::max(1, std::min(options_.batch, runner_.max_batch()));
  if (batch_ < options_.batch) {
    spdlog::info("worker {}: batch {} asked for; this runner runs at most {} job(s) at once", options_.worker_id,
                 options_.batch, batch_);
  }
  HIPQ_RETURN_IF_ERROR(start());
  while (!done_running()) {
    zmq::pollitem_t items[] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                               {nullptr, handoff_->wake_fd(), ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, next_timeout());
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::Internal(std::string("poll: ") + e.what());
    }
    HIPQ_RETURN_IF_ERROR(turn((items[0].revents & ZMQ_POLLIN) != 0, (items[1].revents & ZMQ_POLLIN) != 0));
  }
  leave();
  return Status::Ok();
}

Status Worker::start() {
  HIPQ_ASSIGN_OR_RETURN(handoff_, JobHandoff::create());
  job_thread_ = std::make_unique<std::thread>([this] { job_thread_main(); });
  HIPQ_RETURN_IF_ERROR(connect());
  send_hello();
  next_heartbeat_ = Clock::now() + options_.heartbeat;
  write_health("connected");
  drain_started_ = Clock::time_point{};
  return Status::Ok();
}

bool Worker::done_running() {
  if (stop_requested_.load()) {
    cancel_running();
    return true;
  }
  if (drain_requested_.load() && !draining_) set_draining();
  if (draining_ && idle()) {
    // Give the coordinator a moment to acknowledge the last report.
    if (drain_started_ == Clock::time_point{}) drain_started_ = Clock::now();
    if (unacked_.empty() || Clock::now() - drain_started_ > 2 * options_.heartbeat) return true;
  }
  return false;
}

std::chrono::milliseconds Worker::next_timeout() const {
  auto until = next_heartbeat_;
  if (idle() && !held_.empty()) until = std::min(until, held_since_ + options_.batch_gather);
  auto timeout = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now());
  return std::clamp(timeout, std::chrono::milliseconds(0), std::chrono::milliseconds(100));
}

std::chrono::milliseconds Worker::out_of_touch_window() const {
  return options_.heartbeat * std::max(1, options_.liveness - 1);
}

Status Worker::turn(bool coordinator_readable, bool job_thread_readable) {
  // The coordinator expires a worker it has not heard from for `liveness`
  // heartbeats and leases its jobs again. A worker that sent nothing for
  // most of that window (its loop stood still: a stopped process, a frozen
  // machine; it sends a heartbeat every interval otherwise) cannot know its
  // prefetched job is still its own, whatever old heartbeats it now reads:
  // it gives the job back before anything else.
  // An assignment read in this turn was sent before the stall too (it
  // waited in the socket): it goes back the same way (stood_still_).
  const auto turn_start = Clock::now();
  stood_still_ = turn_start - last_sent_ > out_of_touch_window();
  if (stood_still_) {
    stood_still_why_ =
        "this worker sent nothing for " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(turn_start - last_sent_).count()) +
        " ms; its lease may have been taken back";
    give_back_held(stood_still_why_);
  }
  if (coordinator_readable) receive_from_coordinator();
  if (job_thread_readable) receive_from_job_thread();
  const auto now = Clock::now();
  if (stood_still_) give_back_held(stood_still_why_);
  stood_still_ = false;
  // Assignments of this turn start together (one batch when batching).
  if (idle() && !held_.empty() && !gathering(now)) {
    start_held();
    // Nothing was reported: a batching worker that took fewer jobs than it
    // asked for has nothing left to ask for until the batch ends, and one
    // that gave its jobs back asks again when its backoff ends.
  }
  send_hello_if_wanted(now);
  if (idle() && ready_not_before_ != Clock::time_point{} && now >= ready_not_before_) {
    ready_not_before_ = Clock::time_point{};
    send_ready();  // the failure backoff is over
  }
  if (now >= next_heartbeat_) on_heartbeat_due(now);
  if (now - last_heard_ > options_.heartbeat * options_.liveness) return on_coordinator_silent();
  return Status::Ok();
}

void Worker::receive_from_coordinator() {
  for (int i = 0; i < 1024; ++i) {
    auto frame = proto::recv_frame(*socket_);
    if (!frame.ok()) {
      ++counters_.dropped_messages;
      continue;
    }
    if (!frame->has_value()) break;
    auto env = proto::decode(**frame);
    if (!env.ok()) {
      ++counters_.dropped_messages;
      spdlog::warn("worker {}: dropped a message: {}", options_.worker_id, env.status().ToString());
      continue;
    }
    on_coordinator(*env);
  }
}

void Worker::receive_from_job_thread() {
  for (proto::Envelope& message : handoff_->take()) on_job_thread(message);
}

void Worker::on_heartbeat_due(Clock::time_point now) {
  proto::Envelope hb;
  proto::set_running_jobs(*hb.mutable_heartbeat(), running_list());
  send(hb);
  next_heartbeat_ = now + options_.heartbeat;
  write_health(draining_ ? "draining" : now < ready_not_before_ ? "backing-off" : "connected");
  if (welcomed_) resend_reports(now, options_.report_resend);
}

Status Worker::on_coordinator_silent() {
  ++counters_.reconnects;
  // A silent coordinator may have expired this worker and leased its jobs
  // elsewhere: the held ones are not started; they go back after the
  // welcome (reports kept until acknowledged).
  give_back_held("the coordinator was silent");
  spdlog::warn("worker {}: coordinator at {} silent for {} heartbeats; reconnecting in {} ms",
               options_.worker_id, options_.endpoint, options_.liveness, backoff_.count());
  socket_.reset();
  auto until = Clock::now() + backoff_;
  auto next_health = Clock::now();
  while (Clock::now() < until && !stop_requested_.load()) {
    // Still alive while waiting to reconnect: a probe must not restart a
    // worker only because its coordinator is away.
    if (Clock::now() >= next_health) {
      write_health("reconnecting");
      next_health = Clock::now() + options_.heartbeat;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  backoff_ = std::min(backoff_ * 2, options_.reconnect_max);
  HIPQ_RETURN_IF_ERROR(connect());
  send_hello();
  return Status::Ok();
}

void Worker::leave() {
  proto::Envelope bye;
  bye.mutable_goodbye()->set_reason(stop_requested_.load() ? "stopped" : "drained");
  send(bye);
  // Let the goodbye leave before the socket closes (linger is 0).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  spdlog::info("worker {}: leaving ({} done, {} failed, {} reconnects)", options_.worker_id, counters_.jobs_done,
               counters_.jobs_failed, counters_.reconnects);
  cancel_running();
  handoff_->quit();
  if (job_thread_->joinable()) job_thread_->join();
  job_thread_.reset();
  socket_.reset();
  health_.remove();
}

void Worker::write_health(const char* state) {
  if (!health_.enabled()) return;
  HealthSnapshot snap;
  snap.worker_id = options_.worker_id;
  snap.state = state;
  // The first running job (a batch runs several; the hello names them all).
  snap.job_id = running_.empty() ? 0 : running_.front().job_id;
  snap.attempt = running_.empty() ? 0 : running_.front().attempt;
  snap.coordinator_silent_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_heard_).count();
  snap.updated_unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  Status s = health_.write(snap);
  if (!s.ok() && !health_failing_) spdlog::error("worker {}: {}", options_.worker_id, s.ToString());
  if (s.ok() && health_failing_) spdlog::info("worker {}: health file writable again", options_.worker_id);
  health_failing_ = !s.ok();
}

}  // namespace hipq::worker
