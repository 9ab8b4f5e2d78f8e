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

TEST_F(ForgedPeerTest, CreditIsCappedToOneJobAndABusyRefusalCostsNoAttempt) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 5, 4);  // 20 jobs
  RawPeer w(ep);
  w.send(hello("hoarder"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1024));
  auto a = w.recv(3s, proto::Envelope::kAssignment);
  ASSERT_TRUE(a.has_value()) << coord->err();
  // More asks while it holds a job get nothing.
  w.send(ready(1));
  w.send(heartbeat(a->assignment().job_id(), a->assignment().attempt()));
  EXPECT_FALSE(w.recv(1500ms, proto::Envelope::kAssignment).has_value());
  EXPECT_EQ(leased_to("hoarder"), 1);
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
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 0);
}

TEST_F(ForgedPeerTest, ARepeatedHelloOnOneConnectionKeepsItsJobAndGetsNoSecond) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  submit(ep, 2, 2);
  RawPeer w(ep);
  w.send(hello("twice"));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kWelcome));
  w.send(ready(1));
  ASSERT_TRUE(w.recv(3s, proto::Envelope::kAssignment).has_value());
  // As after a coordinator restart: hellos sent before the job arrived.
  for (int i = 0; i < 4; ++i) {
    w.send(hello("twice"));
    w.send(ready(1));
  }
  EXPECT_FALSE(w.recv(1500ms, proto::Envelope::kAssignment).has_value());
  EXPECT_EQ(leased_to("twice"), 1);
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

}  // namespace
}  // namespace hipq::testing
