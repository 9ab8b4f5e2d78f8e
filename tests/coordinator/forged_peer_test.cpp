// Peers that lie: a raw ZeroMQ DEALER (RawPeer) beside a real coordinator and
// real workers, sending hellos in another worker's name, reports for jobs it
// does not hold, outputs outside the job's directory, more credit than a
// worker can use, and leases it never works on. The database the real
// processes wrote says what was believed.
#include <gtest/gtest.h>

#include <fstream>

#include "db/database.h"
#include "db/statement.h"
#include "proto/curve_keys.h"
#include "tests/base/test_strings.h"
#include "tests/coordinator/process_harness.h"
#include "tests/coordinator/raw_peer.h"

namespace hipq::testing {
namespace {

using namespace std::chrono_literals;

int64_t query_int(const fs::path& db_path, const std::string& sql) {
  auto db = db::Database::open(db_path);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  if (!db.ok()) return -1;
  db::Statement s = (*db)->prepare(sql);
  auto row = s.step();
  EXPECT_TRUE(row.ok()) << row.status().ToString() << " in " << sql;
  if (!row.ok() || !*row) return -1;
  return s.column_int64(0);
}

class ForgedPeerTest : public ::testing::Test {
 public:
  fs::path db() const { return tmp.path() / "hipq.db"; }
  int64_t leased_to(const std::string& worker) {
    return query_int(db(), "SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND lease_worker = '" + worker + "'");
  }
  int64_t submit(const std::string& ep, int prompts, int seeds) {
    fs::path m = write_sleep_manifest(tmp.path(), numbered("b", ++batches_), prompts, seeds);
    EXPECT_EQ(run_hipq(tmp.path(), numbered("submit", batches_), {"submit", m.string(), "--connect", ep}), 0);
    return batches_;
  }
  TempDir tmp;
  int batches_ = 0;
};

// The forger sees the busy worker's id and job (`hipq workers`) and speaks
// for it: hello in its name claiming its job, then a PASS with an output
// outside the output root and a non-retryable error. Nothing of it counts.
void forge_for_busy_worker(ForgedPeerTest& t, const fs::path& db, const std::string& ep,
                           const std::optional<proto::CurveClientKeys>& keys, Process& coord) {
  ASSERT_TRUE(wait_until([&] { return t.leased_to("victim") == 1; }, 10s)) << coord.err();
  int64_t job = query_int(db, "SELECT id FROM jobs WHERE state = 'leased'");
  int attempt = static_cast<int>(query_int(db, "SELECT attempts FROM jobs WHERE id = " + std::to_string(job)));
  RawPeer forger(ep, keys);
  forger.send(hello("victim", job, attempt));
  std::this_thread::sleep_for(200ms);
  forger.send(pass_result(job, attempt, "../../../etc/forged.safetensors"));
  forger.send(fatal_error(job, attempt));
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'failed'"), 0);
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM attempts WHERE error LIKE '%forged%'"), 0);
  // The real worker finishes its job and it is recorded as its own.
  ASSERT_TRUE(wait_until([&] { return query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = 'done'") == 1; }, 15s))
      << coord.err();
  EXPECT_EQ(query_int(db, "SELECT COUNT(*) FROM results WHERE worker_id = 'victim' AND outputs NOT LIKE '%..%'"), 1);
  EXPECT_NE(coord.err().find("connected on another connection"), std::string::npos) << coord.err();
}

TEST_F(ForgedPeerTest, AHelloInABusyWorkersNameCannotReportForIt) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  auto victim = start_worker(tmp.path(), "victim", ep, "sleep:3s");
  submit(ep, 1, 1);
  forge_for_busy_worker(*this, db(), ep, std::nullopt, *coord);
}

TEST_F(ForgedPeerTest, WithCurveAnotherListedKeyCannotSpeakForAWorker) {
  const fs::path d = tmp.path();
  for (const char* k : {"server", "victim", "mallory"}) {
    ASSERT_EQ(run_hipq(d, std::string("keygen-") + k, {"keygen", (d / (std::string(k) + ".key")).string()}), 0);
  }
  auto pub = [&](const char* k) { return *proto::read_public_key((d / (std::string(k) + ".key.pub")).string()); };
  std::ofstream(d / "authorized") << pub("victim") << " victim worker,client\n" << pub("mallory") << " mallory worker\n";
  std::string ep;
  auto coord = start_coordinator(d, "coord", &ep, "tcp://127.0.0.1:*",
                                 {"--server-key", (d / "server.key").string(), "--authorized-keys",
                                  (d / "authorized").string()});
  auto victim = start_worker(d, "victim", ep, "sleep:3s",
                             {"--key", (d / "victim.key").string(), "--server-key", (d / "server.key.pub").string()});
  fs::path m = write_sleep_manifest(d, "curve", 1, 1);
  ASSERT_EQ(run_hipq(d, "submit", {"submit", m.string(), "--connect", ep, "--key", (d / "victim.key").string(),
                                   "--server-key", (d / "server.key.pub").string()}),
            0);
  auto mallory = proto::read_curve_key_file(d / "mallory.key");
  ASSERT_TRUE(mallory.ok());
  proto::CurveClientKeys keys{mallory->public_key, mallory->secret_key, pub("server")};
  forge_for_busy_worker(*this, db(), ep, keys, *coord);
}

// The key that registered a worker id owns it across a coordinator restart:
// the worker holding a lease is gone when the coordinator comes back, and a
// peer with another listed worker key says hello in its name claiming that
// lease. It is refused, saying why, and nothing it sends is recorded; the
// worker's own key is welcomed back and its result recorded.
TEST_F(ForgedPeerTest, WithCurveAWorkerIdStaysItsKeysAcrossACoordinatorRestart) {
  const fs::path d = tmp.path();
  for (const char* k : {"server", "victim", "mallory"}) {
    ASSERT_EQ(run_hipq(d, std::string("keygen-") + k, {"keygen", (d / (std::string(k) + ".key")).string()}), 0);
  }
  auto pub = [&](const char* k) { return *proto::read_public_key((d / (std::string(k) + ".key.pub")).string()); };
  std::ofstream(d / "authorized") << pub("victim") << " victim worker,client\n" << pub("mallory") << " mallory worker\n";
  const std::vector<std::string> curve = {"--server-key", (d / "server.key").string(), "--authorized-keys",
                                          (d / "authorized").string()};
  auto keys_of = [&](const char* k) {
    auto pair = proto::read_curve_key_file(d / (std::string(k) + ".key"));
    EXPECT_TRUE(pair.ok()) << pair.status().ToString();
    return proto::CurveClientKeys{pair->public_key, pair->secret_key, pub("server")};
  };
  std::string ep;
  auto coord = start_coordinator(d, "coord", &ep, "tcp://127.0.0.1:*", curve);
  fs::path m = write_sleep_manifest(d, "curve", 1, 1);
  ASSERT_EQ(run_hipq(d, "submit", {"submit", m.string(), "--connect", ep, "--key", (d / "victim.key").string(),
                                   "--server-key", (d / "server.key.pub").string()}),
            0);
  int64_t job = 0;
  int attempt = 0;
  {
    RawPeer victim(ep, keys_of("victim"));
    victim.send(hello("victim"));
    ASSERT_TRUE(victim.recv(3s, proto::Envelope::kWelcome)) << coord->err();
    victim.send(ready(1));
    auto a = victim.recv(3s, proto::Envelope::kAssignment);
    ASSERT_TRUE(a.has_value()) << coord->err();
    job = a->assignment().job_id();
    attempt = a->assignment().attempt();
  }
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM workers WHERE id = 'victim' AND curve_key = '" + pub("victim") + "'"),
            1);
  coord->signal(SIGKILL);
  ASSERT_EQ(coord->wait(), 128 + SIGKILL);
  coord = start_coordinator(d, "coord2", &ep, "tcp://127.0.0.1:*", curve);
  const int64_t last_seen_before = query_int(db(), "SELECT CAST(last_seen * 1000 AS INTEGER) FROM workers");

  RawPeer mallory(ep, keys_of("mallory"));
  mallory.send(hello("victim", job, attempt));
  auto refused = mallory.recv(3s, proto::Envelope::kErrorReply);
  ASSERT_TRUE(refused.has_value()) << "the other key was welcomed as victim: " << coord->err();
  EXPECT_EQ(refused->error_reply().code(), "PermissionDenied");
  const std::string& why = refused->error_reply().message();
  EXPECT_NE(why.find("worker id \"victim\" belongs to another key (\"victim\" registered it)"), std::string::npos)
      << why;
  EXPECT_NE(why.find("this connection's key is \"mallory\""), std::string::npos) << why;
  EXPECT_NE(why.find("another --id"), std::string::npos) << why;
  EXPECT_NE(why.find("hipq workers forget victim"), std::string::npos) << why;
  const std::string output_dir = [&] {
    auto dbh = db::Database::open(db());
    db::Statement st = (*dbh)->prepare("SELECT output_dir FROM jobs WHERE id = " + std::to_string(job));
    EXPECT_TRUE(*st.step());
    return st.column_text(0);
  }();
  mallory.send(pass_result(job, attempt, output_dir + "/forged.safetensors"));
  mallory.send(fatal_error(job, attempt));
  mallory.send(heartbeat(job, attempt));
  EXPECT_FALSE(mallory.recv(1s, proto::Envelope::kReportAck).has_value());
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE state <> 'running'"), 0);
  EXPECT_EQ(leased_to("victim"), 1);
  EXPECT_EQ(query_int(db(), "SELECT CAST(last_seen * 1000 AS INTEGER) FROM workers"), last_seen_before)
      << "the refused hello was recorded";
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM workers WHERE curve_key = '" + pub("victim") + "'"), 1);

  // The key that registered the id is welcomed back and keeps its lease.
  RawPeer victim(ep, keys_of("victim"));
  victim.send(hello("victim", job, attempt));
  ASSERT_TRUE(victim.recv(3s, proto::Envelope::kWelcome)) << coord->err();
  victim.send(pass_result(job, attempt, output_dir + "/latent.safetensors"));
  ASSERT_TRUE(victim.recv(3s, proto::Envelope::kReportAck)) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE worker_id = 'victim' AND outputs LIKE '%latent%'"), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs WHERE state = 'done'"), 1);
}

// Re-keying a worker: the operator unbinds the id (`hipq workers forget`),
// and the next worker key to say hello under it owns it.
TEST_F(ForgedPeerTest, WorkersForgetLetsANewKeyTakeAWorkerId) {
  const fs::path d = tmp.path();
  for (const char* k : {"server", "old", "new"}) {
    ASSERT_EQ(run_hipq(d, std::string("keygen-") + k, {"keygen", (d / (std::string(k) + ".key")).string()}), 0);
  }
  auto pub = [&](const char* k) { return *proto::read_public_key((d / (std::string(k) + ".key.pub")).string()); };
  std::ofstream(d / "authorized") << pub("old") << " old worker\n" << pub("new") << " new worker\n";
  auto keys_of = [&](const char* k) {
    auto pair = proto::read_curve_key_file(d / (std::string(k) + ".key"));
    EXPECT_TRUE(pair.ok()) << pair.status().ToString();
    return proto::CurveClientKeys{pair->public_key, pair->secret_key, pub("server")};
  };
  std::string ep;
  auto coord = start_coordinator(d, "coord", &ep, "tcp://127.0.0.1:*",
                                 {"--server-key", (d / "server.key").string(), "--authorized-keys",
                                  (d / "authorized").string()});
  {
    RawPeer old_key(ep, keys_of("old"));
    old_key.send(hello("box/cpu0"));
    ASSERT_TRUE(old_key.recv(3s, proto::Envelope::kWelcome)) << coord->err();
    proto::Envelope bye;
    bye.mutable_goodbye()->set_reason("leaving");
    old_key.send(bye);
    std::this_thread::sleep_for(100ms);  // the socket drops what has not left when it closes
  }
  {
    RawPeer new_key(ep, keys_of("new"));
    ASSERT_TRUE(wait_until(
        [&] {
          new_key.send(hello("box/cpu0"));
          return new_key.recv(300ms, proto::Envelope::kErrorReply).has_value();
        },
        10s))
        << coord->err();
  }
  std::string out, err;
  EXPECT_EQ(run_hipq(d, "forget-unknown", {"workers", "forget", "nobody", "--db", db().string()}, &out, &err), 2)
      << err;
  EXPECT_NE(err.find("worker nobody is not in database"), std::string::npos) << err;
  ASSERT_EQ(run_hipq(d, "forget", {"workers", "forget", "box/cpu0", "--db", db().string()}, &out, &err), 0) << err;
  EXPECT_NE(out.find("box/cpu0"), std::string::npos) << out;
  RawPeer new_key(ep, keys_of("new"));
  new_key.send(hello("box/cpu0"));
  ASSERT_TRUE(new_key.recv(3s, proto::Envelope::kWelcome)) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM workers WHERE id = 'box/cpu0' AND curve_key = '" + pub("new") + "'"),
            1);
}

TEST_F(ForgedPeerTest, AuthorizedKeysGivingOneNameTwoKeysStopTheCoordinatorWithTheLine) {
  const fs::path d = tmp.path();
  for (const char* k : {"server", "a", "b"}) {
    ASSERT_EQ(run_hipq(d, std::string("keygen-") + k, {"keygen", (d / (std::string(k) + ".key")).string()}), 0);
  }
  auto pub = [&](const char* k) { return *proto::read_public_key((d / (std::string(k) + ".key.pub")).string()); };
  std::ofstream(d / "authorized") << pub("a") << " shared client\n" << pub("b") << " shared worker\n";
  std::string out, err;
  EXPECT_EQ(run_hipq(d, "coord", {"coordinator", "--db", db().string(), "--bind", "tcp://127.0.0.1:*",
                                  "--server-key", (d / "server.key").string(), "--authorized-keys",
                                  (d / "authorized").string()},
                     &out, &err, 10s),
            2);
  EXPECT_NE(err.find("authorized:2: name \"shared\" already names another key on line 1"), std::string::npos) << err;
}

TEST_F(ForgedPeerTest, AResultNamingOutputsOutsideTheJobDirectoryIsRefused) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 1, 1);
  RawPeer w(ep);
  w.send(hello("raw"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1));
  auto a = w.recv(3s, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value()) << coord->err();
  w.send(pass_result(a->assignment().job_id(), a->assignment().attempt(), "../elsewhere/x.safetensors"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kReportAck));
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 0);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE error LIKE '%result refused%'"), 1);
  EXPECT_EQ(query_int(db(), "SELECT state = 'queued' FROM jobs"), 1);
}

TEST_F(ForgedPeerTest, CreditIsCappedToTwoJobsAndABusyRefusalCostsNoAttempt) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 5, 4);  // 20 jobs
  RawPeer w(ep);
  w.send(hello("hoarder"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1024));
  auto running = w.recv(3s, proto::Envelope::kAssignment);
  ASSERT_TRUE(running.has_value()) << coord->err();
  // The running job and one prefetched: kMaxCredit, however much it claims.
  auto a = w.recv(3s, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value()) << coord->err();
  // More asks while it holds two get nothing.
  w.send(ready(1));
  w.send(heartbeat(running->assignment().job_id(), running->assignment().attempt()));
  EXPECT_FALSE(w.recv(1500ms, proto::Envelope::kAssignment).has_value());
  EXPECT_EQ(leased_to("hoarder"), 2);
  // "Busy": handed back unstarted, as a real worker does; no attempt counted.
  proto::Envelope busy;
  busy.mutable_error()->set_job_id(a->assignment().job_id());
  busy.mutable_error()->set_attempt(a->assignment().attempt());
  busy.mutable_error()->set_code("Unavailable");
  busy.mutable_error()->set_message("worker is busy with another job");
  busy.mutable_error()->set_retryable(true);
  busy.mutable_error()->set_not_started(true);
  w.send(busy);
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kReportAck));
  const std::string job = std::to_string(a->assignment().job_id());
  EXPECT_EQ(query_int(db(), "SELECT attempts FROM jobs WHERE id = " + job), 0);
  EXPECT_EQ(query_int(db(), "SELECT state = 'queued' FROM jobs WHERE id = " + job), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 1);  // the running job's
}

TEST_F(ForgedPeerTest, ARepeatedHelloOnOneConnectionKeepsItsJobsAndGetsNoThird) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 2, 2);
  RawPeer w(ep);
  w.send(hello("twice"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kAssignment).has_value());
  // As after a coordinator restart: hellos sent before the job arrived. The
  // first ask while it runs a job gets the one it may prefetch; no more.
  for (int i = 0; i < 4; ++i) {
    w.send(hello("twice"));
    w.send(ready(1));
  }
  EXPECT_TRUE(w.recv(1500ms, proto::Envelope::kAssignment).has_value());
  EXPECT_FALSE(w.recv(1500ms, proto::Envelope::kAssignment).has_value());
  EXPECT_EQ(leased_to("twice"), 2);
}

TEST_F(ForgedPeerTest, ALeaseWithoutProgressIsTakenBackWithoutCountingAnAttempt) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep, "tcp://127.0.0.1:*", {"--stall-timeout", "1.5"});
  submit(ep, 1, 1);
  RawPeer w(ep);
  w.send(hello("silent"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1));
  auto a = w.recv(3s, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value());
  // Heartbeats keep the lease alive; no progress ever comes.
  bool cancelled = false;
  for (int i = 0; i < 30 && !cancelled; ++i) {
    w.send(heartbeat(a->assignment().job_id(), a->assignment().attempt()));
    cancelled = w.recv(100ms, proto::Envelope::kCancel).has_value();
  }
  EXPECT_TRUE(cancelled) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT state = 'queued' AND attempts = 0 FROM jobs"), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 0);
}

// Protocol 7: a hello or heartbeat names the jobs its worker runs. One
// naming more than kMaxBatch, one twice, or a zero id is refused at the
// boundary (no welcome); a well-formed one naming another worker's job
// claims nothing (its worker is told to stop it) and extends nothing: the
// owner's lease runs out on its own clock.
TEST_F(ForgedPeerTest, ARunningListTooLongOrNamingAnotherWorkersJobIsRefusedAndExtendsNoLease) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 1, 1);
  auto with_running = [](proto::Envelope e, const std::vector<std::pair<int64_t, int>>& jobs) {
    auto* list = e.has_hello() ? e.mutable_hello()->mutable_running() : e.mutable_heartbeat()->mutable_running();
    for (const auto& [id, at] : jobs) {
      proto::RunningJob r;
      r.set_job_id(id);
      r.set_attempt(at);
      *list->Add() = r;
    }
    return e;
  };
  std::vector<std::pair<int64_t, int>> too_many;
  for (int i = 1; i <= proto::kMaxBatch + 1; ++i) too_many.emplace_back(i, 1);
  const std::vector<std::vector<std::pair<int64_t, int>>> refused = {
      too_many, {{5, 1}, {5, 1}}, {{0, 1}}, {{5, 0}}};
  for (const auto& list : refused) {
    RawPeer bad(ep);
    bad.send(with_running(hello(numbered("bad", static_cast<int>(list.size()))), list));
    EXPECT_FALSE(bad.recv(700ms, proto::Envelope::kWelcome).has_value()) << list.size() << " job(s) listed";
  }
  proto::Envelope over = hello("over");
  over.mutable_hello()->set_max_batch(proto::kMaxBatch + 1);
  RawPeer over_peer(ep);
  over_peer.send(over);
  EXPECT_FALSE(over_peer.recv(700ms, proto::Envelope::kWelcome).has_value()) << "max_batch past kMaxBatch";

  // A well-formed hello claiming the victim's job, then heartbeats naming it
  // while the victim is silent (less than its lease).
  RawPeer victim(ep);
  victim.send(hello("victim"));
  ASSERT_TRUE(victim.recv(3s, proto::Envelope::kWelcome));
  victim.send(ready(1));
  auto a = victim.recv(3s, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value()) << coord->err();
  const int64_t job = a->assignment().job_id();
  const int attempt = a->assignment().attempt();
  const auto deadline = [&] {
    auto d = db::Database::open(db());
    db::Statement s = (*d)->prepare("SELECT lease_deadline FROM jobs WHERE id = " + std::to_string(job));
    EXPECT_TRUE(s.step().ok());
    return s.column_double(0);
  };
  const double before = deadline();
  RawPeer forger(ep);
  forger.send(with_running(hello("forger"), {{job, attempt}}));
  ASSERT_TRUE(forger.recv(3s, proto::Envelope::kWelcome).has_value());
  auto cancel = forger.recv(2s, proto::Envelope::kCancel);
  ASSERT_TRUE(cancel.has_value()) << "a claim of another worker's job was not refused";
  EXPECT_EQ(cancel->cancel().job_id(), job);
  for (int i = 0; i < 8; ++i) {
    forger.send(with_running(heartbeat(), {{job, attempt}}));
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(deadline(), before) << "a forged heartbeat extended the victim's lease";
  EXPECT_EQ(leased_to("victim"), 1);
  EXPECT_EQ(leased_to("forger"), 0);
}

// A worker that says it runs batches of 4 may hold four leases, whatever
// credit it claims; its credit is replaced, never added to, so asks while it
// holds them get nothing.
TEST_F(ForgedPeerTest, ABatchingWorkersCreditIsCappedToItsBatch) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 5, 4);  // 20 jobs
  RawPeer w(ep);
  proto::Envelope h = hello("batcher");
  h.mutable_hello()->set_max_batch(4);
  w.send(h);
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1024));
  int got = 0;
  while (w.recv(1500ms, proto::Envelope::kAssignment).has_value()) ++got;
  EXPECT_EQ(got, 4) << coord->err();
  w.send(ready(4));
  w.send(heartbeat());
  EXPECT_FALSE(w.recv(1000ms, proto::Envelope::kAssignment).has_value()) << "a fifth lease while it holds four";
  EXPECT_EQ(leased_to("batcher"), 4);
}

}  // namespace
}  // namespace hipq::testing
