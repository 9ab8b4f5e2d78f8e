// Server in-process on loopback, driven by raw DEALER sockets speaking the
// protocol, so each rule of the poll loop is checked on its own.
#include "coordinator/server.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "coordinator/client.h"
#include "db/database.h"
#include "db/statement.h"
#include "proto/codec.h"
#include "proto/transport.h"
#include "tests/coordinator/process_harness.h"

namespace hipq::coordinator {
namespace {

using hipq::testing::TempDir;
using hipq::testing::write_sleep_manifest;

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.db_path = tmp.path() / "hipq.db";
    o.bind = "tcp://127.0.0.1:*";
    auto s = Server::create(ctx, o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server = std::move(*s);
    thread = std::thread([this] { ASSERT_TRUE(server->run().ok()); });
  }
  void TearDown() override {
    server->request_stop();
    if (thread.joinable()) thread.join();
  }

  zmq::socket_t dealer() {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    proto::apply_socket_limits(s);
    s.connect(server->endpoint());
    return s;
  }
  // Next envelope of the given type (others, e.g. heartbeats, skipped).
  std::optional<proto::Envelope> expect(zmq::socket_t& s, proto::Envelope::BodyCase type,
                                        std::chrono::milliseconds timeout = std::chrono::milliseconds(3000)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
      auto f = proto::recv_frame(s);
      if (!f.ok() || !f->has_value()) continue;
      auto e = proto::decode(**f);
      if (e.ok() && e->body_case() == type) return *e;
    }
    return std::nullopt;
  }
  // A batch of `prompts` x `seeds` jobs of `model` (the SleepEngine manifest).
  int64_t submit(int prompts, int seeds, const std::string& model = "synthetic:tiny-sdxl") {
    ClientOptions co;
    co.endpoint = server->endpoint();
    auto c = Client::connect(ctx, co);
    EXPECT_TRUE(c.ok());
    const auto path = write_sleep_manifest(tmp.path(), "b" + std::to_string(++batches_), prompts, seeds);
    std::string text = hipq::testing::slurp(path);
    text.replace(text.find("synthetic:tiny-sdxl"), std::string("synthetic:tiny-sdxl").size(), model);
    std::ofstream(path) << text;
    auto r = (*c)->submit(path);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->batch_id() : 0;
  }
  proto::Envelope hello(const std::string& id) {
    proto::Envelope e;
    e.mutable_hello()->set_worker_id(id);
    e.mutable_hello()->set_backend("sleep");
    return e;
  }
  int64_t count(const std::string& sql) {
    auto db = db::Database::open(tmp.path() / "hipq.db");
    db::Statement s = (*db)->prepare(sql);
    auto row = s.step();
    return row.ok() && *row ? s.column_int64(0) : -1;
  }

  proto::Envelope ready(int credit) {
    proto::Envelope e;
    e.mutable_ready()->set_credit(credit);
    return e;
  }
  proto::Envelope result(const proto::JobAssignment& a) {
    proto::Envelope e;
    e.mutable_result()->set_job_id(a.job_id());
    e.mutable_result()->set_attempt(a.attempt());
    e.mutable_result()->mutable_parity()->set_verdict("NO_GOLDEN");
    return e;
  }
  // A result carrying the worker's next ask (protocol 6).
  proto::Envelope result_asking(const proto::JobAssignment& a, int credit) {
    proto::Envelope e = result(a);
    e.mutable_result()->mutable_next()->set_credit(credit);
    return e;
  }
  static bool acks(const proto::Envelope& assignment, const proto::JobAssignment& reported) {
    for (const auto& ack : assignment.assignment().acks()) {
      if (ack.job_id() == reported.job_id() && ack.attempt() == reported.attempt()) return true;
    }
    return false;
  }

  TempDir tmp;
  zmq::context_t ctx;
  std::unique_ptr<Server> server;
  std::thread thread;
  int batches_ = 0;
};

TEST(ServerBatchCapTest, ABatchPastTheCoordinatorsCapIsRefusedNamingTheSettingAndOneAtItIsQueuedWhole) {
  TempDir tmp;
  zmq::context_t ctx;
  ServerOptions o;
  o.db_path = tmp.path() / "hipq.db";
  o.bind = "tcp://127.0.0.1:*";
  o.max_batch_jobs = 0;
  auto refused = Server::create(ctx, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--max-batch-jobs"), std::string::npos) << refused.status().message();
  o.max_batch_jobs = 6;
  auto s = Server::create(ctx, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::unique_ptr<Server> server = std::move(*s);
  std::thread loop([&] { ASSERT_TRUE(server->run().ok()); });
  ClientOptions co;
  co.endpoint = server->endpoint();
  auto c = Client::connect(ctx, co);
  ASSERT_TRUE(c.ok());
  auto fits = (*c)->submit(write_sleep_manifest(tmp.path(), "fits", 3, 2));
  auto over = (*c)->submit(write_sleep_manifest(tmp.path(), "over", 7, 1));
  server->request_stop();
  loop.join();
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  EXPECT_EQ(fits->jobs(), 6);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("expands to 7 jobs, more than 6 jobs, the batch cap (--max-batch-jobs"),
            std::string::npos)
      << over.status().message();
  auto db = db::Database::open(tmp.path() / "hipq.db");
  ASSERT_TRUE(db.ok());
  db::Statement n = (*db)->prepare("SELECT COUNT(*), MAX(b.job_count) FROM jobs j JOIN batches b ON b.id = j.batch_id");
  ASSERT_TRUE(n.step().ok());
  EXPECT_EQ(n.column_int64(0), 6);
  EXPECT_EQ(n.column_int64(1), 6);
}

// A peer of protocol version 1 (settings as a JSON string) is told why it is
// refused, in an envelope of its own version that it can decode.
TEST_F(ServerTest, AnOlderProtocolVersionIsAnsweredWithARefusalInItsVersion) {
  auto s = dealer();
  proto::Envelope old;
  old.set_version(1);
  old.set_request_id(5);
  old.mutable_submit()->set_manifest_text("model: synthetic:tiny-sdxl\n");
  std::string bytes = old.SerializeAsString();  // not through encode(): keeps version 1
  s.send(zmq::buffer(bytes), zmq::send_flags::none);
  std::optional<proto::Envelope> refusal;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(3000);
  while (!refusal && std::chrono::steady_clock::now() < end) {
    zmq::pollitem_t item{static_cast<void*>(s), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    auto f = proto::recv_frame(s);
    if (!f.ok() || !f->has_value()) continue;
    proto::Envelope e;
    if (e.ParseFromString(**f) && e.has_error_reply()) refusal = e;
  }
  ASSERT_TRUE(refusal.has_value()) << "no answer to a version-1 submit";
  EXPECT_EQ(refusal->version(), 1u);
  EXPECT_EQ(refusal->request_id(), 5u);
  EXPECT_EQ(refusal->error_reply().code(), "FailedPrecondition");
  EXPECT_NE(refusal->error_reply().message().find("protocol version 1, the coordinator speaks version " +
                                                  std::to_string(proto::kProtocolVersion)),
            std::string::npos)
      << refusal->error_reply().message();
  EXPECT_EQ(count("SELECT COUNT(*) FROM batches"), 0) << "nothing queued from the old peer";
}

TEST_F(ServerTest, GarbageAndWrongVersionsAreDroppedAndTheServerKeepsAnswering) {
  auto s = dealer();
  s.send(zmq::str_buffer("\xff\xff not protobuf"), zmq::send_flags::none);
  proto::Envelope old;
  old.mutable_status();
  old.set_version(99);
  std::string bytes = old.SerializeAsString();  // not through encode(): keeps version 99
  s.send(zmq::buffer(bytes), zmq::send_flags::none);
  proto::Envelope invalid;
  invalid.mutable_cancel_request();  // neither batch nor job
  ASSERT_TRUE(proto::send_envelope(s, invalid).ok());
  // Two frames instead of one.
  s.send(zmq::str_buffer("a"), zmq::send_flags::sndmore);
  s.send(zmq::str_buffer("b"), zmq::send_flags::none);
  proto::Envelope ok;
  ok.set_request_id(7);
  ok.mutable_status();
  ASSERT_TRUE(proto::send_envelope(s, ok).ok());
  auto reply = expect(s, proto::Envelope::kStatusReply);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->request_id(), 7u);
  server->request_stop();
  thread.join();
  EXPECT_EQ(server->counters().dropped_messages, 4);
}

TEST_F(ServerTest, AWorkerGetsAJobOnlyAfterAskingForOne) {
  submit(2, 1);
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kWelcome).has_value());
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(300)).has_value());
  proto::Envelope ready;
  ready.mutable_ready()->set_credit(1);
  ASSERT_TRUE(proto::send_envelope(w, ready).ok());
  auto a = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->assignment().attempt(), 1);
  EXPECT_EQ(a->assignment().model(), "synthetic:tiny-sdxl");
  // Credit 1 = one job, however many are queued.
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(300)).has_value());
}

TEST_F(ServerTest, CreditTwoLeasesTheNextJobWhileTheFirstRunsAndNeverAThird) {
  submit(5, 1);
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kWelcome).has_value());
  ASSERT_TRUE(proto::send_envelope(w, ready(1024)).ok());  // capped at kMaxCredit
  auto first = expect(w, proto::Envelope::kAssignment);
  auto second = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(first.has_value() && second.has_value());
  EXPECT_NE(first->assignment().job_id(), second->assignment().job_id());
  // Asking again while holding two gets nothing: the worker holds at most two.
  ASSERT_TRUE(proto::send_envelope(w, ready(1)).ok());
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(400)).has_value());
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND lease_worker = 'w1'"), 2);
  // The first reported, one slot is free again: one more, not two, however
  // much the report's ask claims; the report's ack rides on that assignment.
  ASSERT_TRUE(proto::send_envelope(w, result_asking(first->assignment(), 2)).ok());
  auto third = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(third.has_value());
  EXPECT_TRUE(acks(*third, first->assignment())) << third->DebugString();
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(400)).has_value());
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND lease_worker = 'w1'"), 2);
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE state = 'done'"), 1);
}

// Protocol 6: a result carries the ask for the next job. Holding a
// prefetched job, the worker reports the running one asking for one more:
// the held job becomes the running one and one job is leased in the same
// turn, its assignment acknowledging the result. The same report replayed
// (a resend, a forged copy) is acknowledged alone and grants nothing: the
// worker already holds two.
TEST_F(ServerTest, AResultCarryingAnAskWhileAJobIsHeldGetsOneJobAndAReplayNone) {
  submit(6, 1);
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kWelcome).has_value());
  ASSERT_TRUE(proto::send_envelope(w, ready(2)).ok());
  auto running = expect(w, proto::Envelope::kAssignment);
  auto held = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(running.has_value() && held.has_value());
  EXPECT_EQ(running->assignment().acks_size(), 0);
  ASSERT_TRUE(proto::send_envelope(w, result_asking(running->assignment(), 1)).ok());
  auto next = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(next.has_value());
  EXPECT_TRUE(acks(*next, running->assignment())) << next->DebugString();
  EXPECT_NE(next->assignment().job_id(), held->assignment().job_id());
  // Replayed: a lone ack (the result is recorded already), no assignment.
  ASSERT_TRUE(proto::send_envelope(w, result_asking(running->assignment(), 1)).ok());
  auto ack = expect(w, proto::Envelope::kReportAck);
  ASSERT_TRUE(ack.has_value());
  EXPECT_EQ(ack->report_ack().job_id(), running->assignment().job_id());
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(400)).has_value());
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND lease_worker = 'w1'"), 2);
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 1);
  // The held job reported with an ask: again exactly one more.
  ASSERT_TRUE(proto::send_envelope(w, result_asking(held->assignment(), 1)).ok());
  auto after = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(after.has_value());
  EXPECT_TRUE(acks(*after, held->assignment()));
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(400)).has_value());
  server->request_stop();
  thread.join();
  EXPECT_EQ(server->counters().results_recorded, 2);
  EXPECT_EQ(server->counters().results_duplicate, 1);
  EXPECT_EQ(server->counters().assignments, 4);
}

// A report without an ask takes no job: with nothing asked, the ack goes
// alone; an ask on a report whose lease is gone still counts (the worker is
// alive and idle), so the worker is not left waiting.
TEST_F(ServerTest, AReportWithoutAnAskIsAckedAloneAndALateReportsAskIsServed) {
  submit(3, 1);
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kWelcome).has_value());
  ASSERT_TRUE(proto::send_envelope(w, ready(1)).ok());
  auto a = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(proto::send_envelope(w, result(a->assignment())).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kReportAck).has_value());
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(300)).has_value());
  // The same result again, now asking: a duplicate, acked; the ask is served.
  ASSERT_TRUE(proto::send_envelope(w, result_asking(a->assignment(), 1)).ok());
  auto b = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(b.has_value());
  EXPECT_TRUE(acks(*b, a->assignment()));
  EXPECT_FALSE(expect(w, proto::Envelope::kAssignment, std::chrono::milliseconds(300)).has_value());
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 1);
}

// A version-6 worker (one running job in its hello and heartbeats, however
// many it runs) is told why in its own version and gets no welcome: nothing
// is recorded for it.
TEST_F(ServerTest, AVersionSixWorkerIsRefusedInItsVersionAndGetsNoWelcome) {
  submit(1, 1);
  auto w = dealer();
  proto::Envelope old = hello("old");
  old.set_version(6);
  std::string bytes = old.SerializeAsString();  // not through encode(): keeps version 6
  w.send(zmq::buffer(bytes), zmq::send_flags::none);
  std::optional<proto::Envelope> refusal;
  bool welcomed = false;
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < end) {
    zmq::pollitem_t item{static_cast<void*>(w), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, std::chrono::milliseconds(50));
    auto f = proto::recv_frame(w);
    if (!f.ok() || !f->has_value()) continue;
    proto::Envelope e;
    if (!e.ParseFromString(**f)) continue;
    if (e.has_error_reply()) refusal = e;
    if (e.has_welcome()) welcomed = true;
  }
  ASSERT_TRUE(refusal.has_value()) << "no answer to a version-6 hello";
  EXPECT_FALSE(welcomed);
  EXPECT_EQ(refusal->version(), 6u);
  EXPECT_EQ(refusal->error_reply().code(), "FailedPrecondition");
  EXPECT_NE(refusal->error_reply().message().find("protocol version 6, the coordinator speaks version " +
                                                 std::to_string(proto::kProtocolVersion)),
            std::string::npos)
      << refusal->error_reply().message();
  EXPECT_EQ(count("SELECT COUNT(*) FROM workers"), 0);
  EXPECT_EQ(count("SELECT COUNT(*) FROM jobs WHERE state = 'leased'"), 0);
}

TEST_F(ServerTest, APrefetchedJobIsChosenForTheModelTheRunningJobLoads) {
  // Queued in this order: A (model x), B (model y), C (model x).
  submit(1, 1, "synthetic:tiny-sdxl");
  submit(1, 1, "synthetic:tiny-sdxl@3");
  submit(1, 1, "synthetic:tiny-sdxl");
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kWelcome).has_value());
  ASSERT_TRUE(proto::send_envelope(w, ready(2)).ok());
  auto first = expect(w, proto::Envelope::kAssignment);
  auto second = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(first.has_value() && second.has_value());
  // It holds no model: the oldest job first; the next one is for the model
  // it will hold after that job, not the older job of the other model.
  EXPECT_EQ(first->assignment().job_id(), 1);
  EXPECT_EQ(second->assignment().job_id(), 3);
  EXPECT_EQ(second->assignment().model(), "synthetic:tiny-sdxl");
}

TEST_F(ServerTest, AnIdleWorkerIsServedBeforeAnotherWorkersPrefetch) {
  auto busy = dealer();
  ASSERT_TRUE(proto::send_envelope(busy, hello("busy")).ok());
  ASSERT_TRUE(expect(busy, proto::Envelope::kWelcome).has_value());
  submit(1, 1);
  ASSERT_TRUE(proto::send_envelope(busy, ready(1)).ok());
  auto running = expect(busy, proto::Envelope::kAssignment);
  ASSERT_TRUE(running.has_value());
  ASSERT_TRUE(proto::send_envelope(busy, ready(1)).ok());  // asks for a prefetch first
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto idle = dealer();
  ASSERT_TRUE(proto::send_envelope(idle, hello("idle")).ok());
  ASSERT_TRUE(expect(idle, proto::Envelope::kWelcome).has_value());
  ASSERT_TRUE(proto::send_envelope(idle, ready(2)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  submit(1, 1);  // one job for two askers: the idle one gets it
  EXPECT_TRUE(expect(idle, proto::Envelope::kAssignment).has_value());
  EXPECT_FALSE(expect(busy, proto::Envelope::kAssignment, std::chrono::milliseconds(400)).has_value());
}

TEST_F(ServerTest, AResultIsRecordedOnceAndARepeatIsAcknowledgedAndDropped) {
  submit(1, 1);
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  proto::Envelope ready;
  ready.mutable_ready()->set_credit(1);
  ASSERT_TRUE(proto::send_envelope(w, ready).ok());
  auto a = expect(w, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value());
  proto::Envelope result;
  result.mutable_result()->set_job_id(a->assignment().job_id());
  result.mutable_result()->set_attempt(1);
  result.mutable_result()->mutable_parity()->set_verdict("NO_GOLDEN");
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(proto::send_envelope(w, result).ok());
    ASSERT_TRUE(expect(w, proto::Envelope::kReportAck).has_value());
  }
  EXPECT_EQ(count("SELECT COUNT(*) FROM results"), 1);
  server->request_stop();
  thread.join();
  EXPECT_EQ(server->counters().results_recorded, 1);
  EXPECT_EQ(server->counters().results_duplicate, 1);
}

// An idle coordinator takes the write lock only for its periodic lease check,
// not on every poll-loop turn.
TEST_F(ServerTest, AnIdleCoordinatorOpensATransactionOnlyWhenATurnMayWrite) {
  auto w = dealer();
  ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
  ASSERT_TRUE(expect(w, proto::Envelope::kWelcome).has_value());
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // idle: heartbeats and lease checks only
  server->request_stop();
  thread.join();
  const ServerCounters& c = server->counters();
  std::printf("  turns %lld, lease checks %lld, group commits %lld, messages %lld\n", (long long)c.turns,
              (long long)c.lease_checks, (long long)c.group_commits, (long long)c.messages);
  EXPECT_GE(c.lease_checks, 2);
  EXPECT_GT(c.turns, c.group_commits) << "idle turns opened transactions";
  // Writing turns: the lease checks plus those that read a message (the hello).
  EXPECT_LE(c.group_commits, c.lease_checks + c.messages);
}

TEST_F(ServerTest, AnUnknownPeerIsAskedToSayHelloAgain) {
  auto w = dealer();
  proto::Envelope hb;
  hb.mutable_heartbeat();
  ASSERT_TRUE(proto::send_envelope(w, hb).ok());
  EXPECT_TRUE(expect(w, proto::Envelope::kReconnect).has_value());
}

TEST_F(ServerTest, ASilentWorkerLosesItsLeaseAndTheJobIsRequeued) {
  submit(1, 1);
  {
    auto w = dealer();
    ASSERT_TRUE(proto::send_envelope(w, hello("w1")).ok());
    proto::Envelope ready;
    ready.mutable_ready()->set_credit(1);
    ASSERT_TRUE(proto::send_envelope(w, ready).ok());
    ASSERT_TRUE(expect(w, proto::Envelope::kAssignment).has_value());
  }  // the worker vanishes without a word
  ASSERT_TRUE(hipq::testing::wait_until([&] { return count("SELECT COUNT(*) FROM jobs WHERE state = 'queued'") == 1; },
                                        std::chrono::seconds(6)));
  EXPECT_EQ(count("SELECT COUNT(*) FROM attempts WHERE state = 'expired'"), 1);
}

TEST(IsLoopbackEndpoint, KnowsWhichAddressesStayOnThisMachine) {
  EXPECT_TRUE(is_loopback_endpoint("tcp://127.0.0.1:5555"));
  EXPECT_TRUE(is_loopback_endpoint("tcp://localhost:5555"));
  EXPECT_TRUE(is_loopback_endpoint("tcp://[::1]:5555"));
  EXPECT_TRUE(is_loopback_endpoint("inproc://x"));
  EXPECT_TRUE(is_loopback_endpoint("ipc:///tmp/x"));
  EXPECT_FALSE(is_loopback_endpoint("tcp://0.0.0.0:5555"));
  EXPECT_FALSE(is_loopback_endpoint("tcp://*:5555"));
  EXPECT_FALSE(is_loopback_endpoint("tcp://10.0.0.2:5555"));
}

}  // namespace
}  // namespace hipq::coordinator
