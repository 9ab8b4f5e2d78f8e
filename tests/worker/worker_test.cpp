// The worker's connection loop against a scripted coordinator: a real ROUTER
// socket on loopback that answers as the coordinator would, except where the
// test says otherwise. The job runs on the SleepEngine test double.
#include "worker/worker.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "proto/codec.h"
#include "proto/transport.h"
#include "worker/sleep_engine.h"

namespace hipq::worker {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

class ScriptedCoordinator {
 public:
  explicit ScriptedCoordinator(zmq::context_t& ctx) : router_(ctx, zmq::socket_type::router) {
    proto::apply_socket_limits(router_);
    router_.bind("tcp://127.0.0.1:*");
    endpoint_ = router_.get(zmq::sockopt::last_endpoint);
  }
  const std::string& endpoint() const { return endpoint_; }

  // Next message of `type` from the worker within `timeout`; heartbeats the
  // worker meanwhile so it never thinks the coordinator is gone.
  // (or of `or_type`, when given)
  std::optional<proto::Envelope> expect(proto::Envelope::BodyCase type, std::chrono::milliseconds timeout,
                                        proto::Envelope::BodyCase or_type = proto::Envelope::BODY_NOT_SET) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (!worker_.empty() && Clock::now() >= next_heartbeat_) {
        proto::Envelope hb;
        hb.mutable_heartbeat();
        (void)proto::send_envelope_to(router_, worker_, hb);
        next_heartbeat_ = Clock::now() + 40ms;
      }
      zmq::pollitem_t item{static_cast<void*>(router_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, 20ms);
      auto m = proto::recv_routed(router_);
      if (!m.ok() || !m->has_value()) continue;
      worker_ = (*m)->routing_id;
      auto e = proto::decode((*m)->bytes);
      if (!e.ok()) continue;
      seen_.push_back(e->body_case());
      if (e->body_case() == type || (or_type != proto::Envelope::BODY_NOT_SET && e->body_case() == or_type)) {
        return *e;
      }
    }
    return std::nullopt;
  }
  void send(const proto::Envelope& e) { ASSERT_TRUE(proto::send_envelope_to(router_, worker_, e).ok()); }
  int count(proto::Envelope::BodyCase type) const {
    int n = 0;
    for (auto t : seen_) n += t == type;
    return n;
  }

 private:
  zmq::socket_t router_;
  std::string endpoint_;
  std::string worker_;
  Clock::time_point next_heartbeat_{};
  std::vector<proto::Envelope::BodyCase> seen_;
};

// The scripted coordinator's answer to a hello.
proto::Envelope scripted_welcome() {
  proto::Envelope e;
  e.mutable_welcome()->set_coordinator_id("scripted");
  return e;
}

// A result the coordinator does not acknowledge (its group commit failed, or
// the ack was lost) is sent again after report_resend, without a reconnect,
// and no more once acknowledged.
TEST(Worker, ResendsAnUnacknowledgedResultUntilItIsAcknowledged) {
  zmq::context_t ctx;
  ScriptedCoordinator coord(ctx);
  SleepEngine engine(10ms);
  WorkerOptions o;
  o.endpoint = coord.endpoint();
  o.worker_id = "test/sleep0";
  // The scripted coordinator sends no heartbeats: the worker's silence window
  // (3 heartbeats, 1.2 s) must outlast the resend (300 ms) and the start-up of
  // the connection under a sanitizer's slowdown.
  o.heartbeat = 400ms;
  o.report_resend = 300ms;
  Worker w(ctx, o, engine);
  std::thread t([&] { EXPECT_TRUE(w.run().ok()); });

  ASSERT_TRUE(coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  const proto::Envelope welcome = scripted_welcome();
  coord.send(welcome);
  ASSERT_TRUE(coord.expect(proto::Envelope::kReady, 3000ms).has_value());
  proto::Envelope assignment;
  auto* a = assignment.mutable_assignment();
  a->set_job_id(7);
  a->set_attempt(1);
  a->set_model("synthetic:tiny-sdxl");
  a->mutable_settings()->set_prompt("a red fox");
  a->mutable_settings()->set_steps(1);
  coord.send(assignment);

  auto first = coord.expect(proto::Envelope::kResult, 3000ms);
  ASSERT_TRUE(first.has_value());
  const auto sent_at = Clock::now();
  EXPECT_EQ(first->result().job_id(), 7);
  // No ack: the same report comes again, on the worker's own clock.
  auto again = coord.expect(proto::Envelope::kResult, 3000ms);
  ASSERT_TRUE(again.has_value()) << "the unacknowledged result was not sent again";
  EXPECT_GE(Clock::now() - sent_at, 200ms) << "resent before report_resend";
  EXPECT_EQ(again->result().job_id(), 7);
  EXPECT_EQ(again->result().attempt(), 1);
  EXPECT_EQ(coord.count(proto::Envelope::kHello), 1) << "the resend must not need a reconnect";

  proto::Envelope ack;
  ack.mutable_report_ack()->set_job_id(7);
  ack.mutable_report_ack()->set_attempt(1);
  coord.send(ack);
  EXPECT_FALSE(coord.expect(proto::Envelope::kResult, 800ms).has_value()) << "sent again after the ack";
  w.request_stop();
  // Keep answering while the worker says goodbye.
  (void)coord.expect(proto::Envelope::kGoodbye, 2000ms);
  t.join();
  EXPECT_EQ(w.counters().jobs_done, 1);
  EXPECT_EQ(w.counters().reports_resent, 1);
  EXPECT_EQ(w.counters().reconnects, 0);
}

// A coordinator that no longer knows the worker's connection (it expired it
// during a stall of the link, or its TCP connection was reset) answers every
// message that arrives on it with Reconnect; after a stall that is a burst.
// The worker answers the burst with one hello, not one each: every hello
// gets a Welcome, and every Welcome makes it send all its unacknowledged
// reports again.
TEST(Worker, ABurstOfReconnectsIsAnsweredWithOneHello) {
  zmq::context_t ctx;
  ScriptedCoordinator coord(ctx);
  SleepEngine engine(10ms);
  WorkerOptions o;
  o.endpoint = coord.endpoint();
  o.worker_id = "test/sleep0";
  o.heartbeat = 1000ms;
  o.report_resend = 60000ms;
  Worker w(ctx, o, engine);
  std::thread t([&] { EXPECT_TRUE(w.run().ok()); });

  ASSERT_TRUE(coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  const proto::Envelope welcome = scripted_welcome();
  coord.send(welcome);
  ASSERT_TRUE(coord.expect(proto::Envelope::kReady, 3000ms).has_value());
  proto::Envelope assignment;
  auto* a = assignment.mutable_assignment();
  a->set_job_id(7);
  a->set_attempt(1);
  a->set_model("synthetic:tiny-sdxl");
  a->mutable_settings()->set_prompt("a red fox");
  a->mutable_settings()->set_steps(1);
  coord.send(assignment);
  ASSERT_TRUE(coord.expect(proto::Envelope::kResult, 3000ms).has_value());  // not acknowledged

  proto::Envelope reconnect;
  reconnect.mutable_reconnect()->set_reason("unknown peer; send hello");
  for (int i = 0; i < 10; ++i) coord.send(reconnect);
  ASSERT_TRUE(coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  coord.send(welcome);
  ASSERT_TRUE(coord.expect(proto::Envelope::kResult, 3000ms).has_value()) << "not re-sent after the welcome";
  (void)coord.expect(proto::Envelope::kGoodbye, 1500ms);  // collect what else comes
  EXPECT_EQ(coord.count(proto::Envelope::kHello), 2) << "one hello for the start, one for the burst";
  EXPECT_EQ(coord.count(proto::Envelope::kResult), 2) << "one send, one resend after the one welcome";
  w.request_stop();
  (void)coord.expect(proto::Envelope::kGoodbye, 2000ms);
  t.join();
}

proto::Envelope assignment_of(int64_t job) {
  proto::Envelope e;
  auto* a = e.mutable_assignment();
  a->set_job_id(job);
  a->set_attempt(1);
  a->set_model("synthetic:tiny-sdxl");
  a->mutable_settings()->set_prompt("a red fox");
  a->mutable_settings()->set_steps(2);
  return e;
}

// Credit 2: an idle worker asks for two jobs, runs the first and holds the
// second; the held job starts only when the first ends, and a Reconnect
// (the coordinator lost track of it) makes it hand the held job back
// unstarted, after the welcome, while the running one goes on.
TEST(Worker, HoldsTheNextJobWhileOneRunsAndGivesItBackUnstartedOnReconnect) {
  zmq::context_t ctx;
  ScriptedCoordinator coord(ctx);
  SleepEngine engine(400ms);
  WorkerOptions o;
  o.endpoint = coord.endpoint();
  o.worker_id = "test/sleep0";
  o.heartbeat = 100ms;
  o.liveness = 30;
  Worker w(ctx, o, engine);
  std::thread t([&] { EXPECT_TRUE(w.run().ok()); });

  ASSERT_TRUE(coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  const proto::Envelope welcome = scripted_welcome();
  coord.send(welcome);
  auto ready = coord.expect(proto::Envelope::kReady, 3000ms);
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->ready().credit(), 2);
  coord.send(assignment_of(7));
  coord.send(assignment_of(8));
  ASSERT_TRUE(coord.expect(proto::Envelope::kProgress, 3000ms).has_value());
  proto::Envelope reconnect;
  reconnect.mutable_reconnect()->set_reason("unknown peer; send hello");
  coord.send(reconnect);
  auto hello = coord.expect(proto::Envelope::kHello, 3000ms);
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(hello->hello().running_job_id(), 7) << "the hello claims the running job only";
  coord.send(welcome);
  auto back = coord.expect(proto::Envelope::kError, 3000ms);
  ASSERT_TRUE(back.has_value()) << "the held job was not given back";
  EXPECT_EQ(back->error().job_id(), 8);
  EXPECT_TRUE(back->error().not_started());
  auto result = coord.expect(proto::Envelope::kResult, 3000ms);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->result().job_id(), 7);
  EXPECT_FALSE(coord.expect(proto::Envelope::kResult, 1000ms).has_value()) << "the given-back job ran";
  w.request_stop();
  (void)coord.expect(proto::Envelope::kGoodbye, 2000ms);
  t.join();
  EXPECT_EQ(w.counters().jobs_done, 1);
  EXPECT_EQ(w.counters().prefetched, 1);
  EXPECT_EQ(w.counters().given_back, 1);
}

// With credit 1 the worker asks for one job and answers a second sent while
// it runs one with "busy", unstarted.
TEST(Worker, CreditOneAsksForOneJobAndHandsBackASecondUnstarted) {
  zmq::context_t ctx;
  ScriptedCoordinator coord(ctx);
  SleepEngine engine(300ms);
  WorkerOptions o;
  o.endpoint = coord.endpoint();
  o.worker_id = "test/sleep0";
  o.heartbeat = 100ms;
  o.credit = 1;
  Worker w(ctx, o, engine);
  std::thread t([&] { EXPECT_TRUE(w.run().ok()); });
  ASSERT_TRUE(coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  const proto::Envelope welcome = scripted_welcome();
  coord.send(welcome);
  auto ready = coord.expect(proto::Envelope::kReady, 3000ms);
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->ready().credit(), 1);
  coord.send(assignment_of(7));
  coord.send(assignment_of(8));
  auto busy = coord.expect(proto::Envelope::kError, 3000ms);
  ASSERT_TRUE(busy.has_value());
  EXPECT_EQ(busy->error().job_id(), 8);
  EXPECT_TRUE(busy->error().not_started());
  EXPECT_NE(busy->error().message().find("busy"), std::string::npos) << busy->error().message();
  w.request_stop();
  (void)coord.expect(proto::Envelope::kGoodbye, 2000ms);
  t.join();
  EXPECT_EQ(w.counters().prefetched, 0);
}

// Protocol 6: a report carries the worker's next ask (no Ready follows it),
// an ack riding on the next assignment ends the report's resends, and a
// report re-sent for want of an ack asks for nothing.
TEST(Worker, AReportCarriesTheAskAndAnAckOnTheNextAssignmentEndsItsResends) {
  zmq::context_t ctx;
  ScriptedCoordinator coord(ctx);
  SleepEngine engine(10ms);
  WorkerOptions o;
  o.endpoint = coord.endpoint();
  o.worker_id = "test/sleep0";
  o.heartbeat = 400ms;
  o.report_resend = 300ms;
  o.credit = 1;
  Worker w(ctx, o, engine);
  std::thread t([&] { EXPECT_TRUE(w.run().ok()); });
  ASSERT_TRUE(coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  const proto::Envelope welcome = scripted_welcome();
  coord.send(welcome);
  ASSERT_TRUE(coord.expect(proto::Envelope::kReady, 3000ms).has_value());
  coord.send(assignment_of(7));
  auto first = coord.expect(proto::Envelope::kResult, 3000ms);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->result().job_id(), 7);
  ASSERT_TRUE(first->result().has_next()) << "the report did not carry the ask";
  EXPECT_EQ(first->result().next().credit(), 1);
  EXPECT_GT(first->result().next().loaded_models_size(), 0) << "an idle worker's ask names its models";

  proto::Envelope next = assignment_of(8);
  auto* ack = next.mutable_assignment()->add_acks();
  ack->set_job_id(7);
  ack->set_attempt(1);
  coord.send(next);
  auto second = coord.expect(proto::Envelope::kResult, 3000ms);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->result().job_id(), 8) << "job 7 was sent again though its ack came on job 8";
  EXPECT_TRUE(second->result().has_next());
  // Job 8 is not acknowledged: re-sent, without an ask.
  auto again = coord.expect(proto::Envelope::kResult, 3000ms);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->result().job_id(), 8);
  EXPECT_FALSE(again->result().has_next()) << "a re-sent report asked again";
  proto::Envelope ack8;
  ack8.mutable_report_ack()->set_job_id(8);
  ack8.mutable_report_ack()->set_attempt(1);
  coord.send(ack8);
  EXPECT_FALSE(coord.expect(proto::Envelope::kResult, 800ms).has_value()) << "sent again after the ack";
  EXPECT_EQ(coord.count(proto::Envelope::kReady), 1) << "a Ready followed a report";
  w.request_stop();
  (void)coord.expect(proto::Envelope::kGoodbye, 2000ms);
  t.join();
  EXPECT_EQ(w.counters().jobs_done, 2);
  EXPECT_EQ(w.counters().reports_resent, 1);
}

// ---- batching (protocol 7; docs/protocol.md, "Batching") -------------------

proto::Envelope assignment_of(int64_t job, const std::string& model, int steps) {
  proto::Envelope e = assignment_of(job);
  e.mutable_assignment()->set_model(model);
  e.mutable_assignment()->mutable_settings()->set_steps(steps);
  return e;
}

// Results and errors until `n` reports came (or the time ran out), by job.
std::map<int64_t, proto::Envelope> reports(ScriptedCoordinator& coord, size_t n,
                                           std::chrono::milliseconds timeout) {
  std::map<int64_t, proto::Envelope> out;
  const auto end = Clock::now() + timeout;
  while (out.size() < n && Clock::now() < end) {
    auto e = coord.expect(proto::Envelope::kResult, 50ms, proto::Envelope::kError);
    if (!e) continue;
    out[e->has_result() ? e->result().job_id() : e->error().job_id()] = *e;
  }
  return out;
}

struct BatchingWorker {
  explicit BatchingWorker(std::chrono::milliseconds sleep, int batch = 4) : coord(ctx), engine(sleep) {
    o.endpoint = coord.endpoint();
    o.worker_id = "test/sleep0";
    o.heartbeat = 100ms;
    o.liveness = 30;
    o.batch = batch;
    w = std::make_unique<Worker>(ctx, o, engine);
    t = std::thread([this] { EXPECT_TRUE(w->run().ok()); });
  }
  ~BatchingWorker() { stop(); }
  // Stops the worker and waits for its thread: its counters may be read after.
  const WorkerCounters& stop() {
    if (t.joinable()) {
      w->request_stop();
      (void)coord.expect(proto::Envelope::kGoodbye, 2000ms);
      t.join();
    }
    return w->counters();
  }
  zmq::context_t ctx;
  ScriptedCoordinator coord;
  SleepEngine engine;
  WorkerOptions o;
  std::unique_ptr<Worker> w;
  std::thread t;
};

// A worker with batch 4 says so in its hello, asks for four jobs, runs the
// four it gets as one batch (every heartbeat names all four), reports each
// on its own with batch_size 4, and asks again only on the batch's last
// report.
TEST(Worker, WithBatchFourItAsksForFourJobsAndRunsThemAsOneBatch) {
  BatchingWorker b(400ms);
  auto hello = b.coord.expect(proto::Envelope::kHello, 3000ms);
  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ(hello->hello().max_batch(), 4);
  b.coord.send(scripted_welcome());
  auto ready = b.coord.expect(proto::Envelope::kReady, 3000ms);
  ASSERT_TRUE(ready.has_value());
  EXPECT_EQ(ready->ready().credit(), 4) << "a batching worker asks for the batch";
  for (int64_t job = 1; job <= 4; ++job) b.coord.send(assignment_of(job));
  std::optional<proto::Envelope> hb;
  const auto end = Clock::now() + 3000ms;
  while (Clock::now() < end) {
    hb = b.coord.expect(proto::Envelope::kHeartbeat, 500ms);
    if (hb && hb->heartbeat().running_size() > 0) break;
  }
  ASSERT_TRUE(hb.has_value());
  ASSERT_EQ(hb->heartbeat().running_size(), 4) << "the heartbeat names every job of the batch";
  EXPECT_EQ(hb->heartbeat().running_job_id(), hb->heartbeat().running(0).job_id());
  auto got = reports(b.coord, 4, 5000ms);
  ASSERT_EQ(got.size(), 4u);
  int asks = 0;
  for (const auto& [job, e] : got) {
    EXPECT_EQ(e.result().batch_size(), 4) << "job " << job;
    asks += e.result().has_next();
  }
  EXPECT_EQ(asks, 1) << "the ask rides on the batch's last report only";
  EXPECT_EQ(b.stop().batches, 1);
  EXPECT_EQ(b.stop().jobs_done, 4);
  EXPECT_EQ(b.stop().given_back, 0);
}

// Only jobs of one batch key run together: the first job's key picks the
// batch, a job of another model waits, held, for the next one.
TEST(Worker, JobsOfAnotherBatchKeyWaitForTheNextBatch) {
  BatchingWorker b(200ms);
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  b.coord.send(scripted_welcome());
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kReady, 3000ms).has_value());
  b.coord.send(assignment_of(1));
  b.coord.send(assignment_of(2, "synthetic:tiny-sd15", 2));
  b.coord.send(assignment_of(3));
  auto got = reports(b.coord, 3, 5000ms);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].result().batch_size(), 2);
  EXPECT_EQ(got[3].result().batch_size(), 2);
  EXPECT_LE(got[2].result().batch_size(), 1) << "a job of another model ran in the batch";
  EXPECT_EQ(b.stop().batches, 1);
}

// A cancel for one job of a running batch sets that job's flag only: it
// ends Cancelled, the other three finish.
TEST(Worker, ACancelForOneJobOfARunningBatchCancelsItAlone) {
  BatchingWorker b(1500ms);
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  b.coord.send(scripted_welcome());
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kReady, 3000ms).has_value());
  for (int64_t job = 1; job <= 4; ++job) b.coord.send(assignment_of(job, "synthetic:tiny-sdxl", 30));
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kProgress, 3000ms).has_value());
  proto::Envelope cancel;
  cancel.mutable_cancel()->set_job_id(2);
  cancel.mutable_cancel()->set_attempt(1);
  b.coord.send(cancel);
  auto got = reports(b.coord, 4, 5000ms);
  ASSERT_EQ(got.size(), 4u);
  ASSERT_TRUE(got[2].has_error());
  EXPECT_EQ(got[2].error().code(), "Cancelled");
  for (int64_t job : {1, 3, 4}) {
    ASSERT_TRUE(got[job].has_result()) << "job " << job << " did not finish";
    EXPECT_EQ(got[job].result().batch_size(), 4);
  }
  EXPECT_EQ(b.stop().jobs_done, 3);
  EXPECT_EQ(b.stop().jobs_failed, 1);
}

// A Reconnect mid-batch: the hello claims every running job of the batch,
// and the batch goes on to report all four.
TEST(Worker, AHelloAfterAReconnectMidBatchClaimsEveryRunningJob) {
  BatchingWorker b(800ms);
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kHello, 3000ms).has_value());
  b.coord.send(scripted_welcome());
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kReady, 3000ms).has_value());
  for (int64_t job = 1; job <= 4; ++job) b.coord.send(assignment_of(job));
  ASSERT_TRUE(b.coord.expect(proto::Envelope::kProgress, 3000ms).has_value());
  proto::Envelope reconnect;
  reconnect.mutable_reconnect()->set_reason("unknown peer; send hello");
  b.coord.send(reconnect);
  auto hello = b.coord.expect(proto::Envelope::kHello, 3000ms);
  ASSERT_TRUE(hello.has_value());
  ASSERT_EQ(hello->hello().running_size(), 4);
  std::set<int64_t> claimed;
  for (const auto& r : hello->hello().running()) claimed.insert(r.job_id());
  EXPECT_EQ(claimed, (std::set<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(hello->hello().running_job_id(), hello->hello().running(0).job_id());
  b.coord.send(scripted_welcome());
  EXPECT_EQ(reports(b.coord, 4, 5000ms).size(), 4u);
  EXPECT_EQ(b.stop().given_back, 0);
}

// A batch outside 1..kMaxBatch is refused before anything connects.
TEST(Worker, ABatchOutsideItsRangeIsRefused) {
  zmq::context_t ctx;
  SleepEngine engine(10ms);
  for (int batch : {0, proto::kMaxBatch + 1}) {
    WorkerOptions o;
    o.endpoint = "tcp://127.0.0.1:1";
    o.batch = batch;
    Worker w(ctx, o, engine);
    Status s = w.run();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << batch;
    EXPECT_NE(s.message().find("--batch"), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace hipq::worker
