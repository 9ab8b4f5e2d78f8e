// The queue end to end with real processes on loopback: a coordinator, SleepEngine
// workers (the test double: `--engine sleep:DURATION`), and the client commands, all
// the built `hipq` binary. Each test checks the database the processes wrote.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "db/database.h"
#include "db/statement.h"
#include "tests/base/test_strings.h"
#include "tests/coordinator/process_harness.h"

namespace hipq::testing {
namespace {

// One integer from a query on the test's database (read while processes write).
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

int64_t jobs_in(const fs::path& db, const std::string& state) {
  return query_int(db, "SELECT COUNT(*) FROM jobs WHERE state = '" + state + "'");
}

class QueueProcessTest : public ::testing::Test {
 protected:
  TempDir tmp;
  fs::path db() const { return tmp.path() / "hipq.db"; }
};

TEST_F(QueueProcessTest, FiftyJobsOverThreeWorkersEachRecordedExactlyOnce) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 3; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:20ms"));
  fs::path manifest = write_sleep_manifest(tmp.path(), "fifty", 10, 6);
  std::string out, err;
  int code = run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep, "--wait"}, &out, &err);
  ASSERT_EQ(code, 0) << out << err << coord->err();
  EXPECT_NE(out.find("60 jobs queued"), std::string::npos) << out;
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs"), 60);
  EXPECT_EQ(jobs_in(db(), "done"), 60);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 60);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(DISTINCT job_id) FROM results"), 60);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 60);
  // Pull-based dispatch spreads the work: every worker ran some of it.
  EXPECT_EQ(query_int(db(), "SELECT COUNT(DISTINCT worker_id) FROM results"), 3);
  EXPECT_EQ(query_int(db(), "SELECT state = 'done' FROM batches WHERE id = 1"), 1);
  std::string json;
  ASSERT_EQ(run_hipq(tmp.path(), "status", {"status", "1", "--connect", ep, "--format", "json"}, &json), 0);
  EXPECT_NE(json.find("\"done\": 60"), std::string::npos) << json;
  EXPECT_NE(json.find("\"NO_GOLDEN\": 60"), std::string::npos) << json;
}

TEST_F(QueueProcessTest, WorkerKilledMidJobHasItsJobAndItsPrefetchedJobRequeuedAndFinishedByAnother) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "kill", 3, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  // Credit 2 (the default): it runs one job and holds the next.
  auto slow = start_worker(tmp.path(), "slow", ep, "sleep:30s");
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 2; }, std::chrono::seconds(10)));
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND lease_worker = 'slow'"), 2);
  slow->signal(SIGKILL);
  EXPECT_EQ(slow->wait(), 128 + SIGKILL);
  auto fast = start_worker(tmp.path(), "fast", ep, "sleep:10ms");
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 3; }, std::chrono::seconds(15))) << coord->err();
  // Both of its leases expired (an attempt each) and ran again on the other worker.
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs WHERE attempts = 2"), 2);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE attempt = 1 AND state = 'expired' AND "
                            "worker_id = 'slow'"),
            2);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE worker_id = 'fast'"), 3);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(DISTINCT job_id) FROM results"), 3);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 3);
}

// A worker that stood still past its liveness window (SIGSTOP, as a frozen
// machine) was expired and its jobs leased to another; woken, it must not
// start the job it had prefetched while the other worker may run it.
TEST_F(QueueProcessTest, AFrozenWorkerWokenAfterExpiryGivesBackItsPrefetchedJobUnstarted) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "frozen", 2, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  Process frozen({"--log-level", "debug", "worker", "--connect", ep, "--engine", "sleep:2s", "--backend", "cpu",
                  "--id", "frozen"},
                 tmp.path() / "frozen");
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 2; }, std::chrono::seconds(10)));
  frozen.signal(SIGSTOP);
  auto other = start_worker(tmp.path(), "other", ep, "sleep:10ms");
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 2; }, std::chrono::seconds(15))) << coord->err();
  const int64_t prefetched = query_int(db(), "SELECT MAX(job_id) FROM attempts WHERE worker_id = 'frozen'");
  frozen.signal(SIGCONT);
  // Its running job's sleep is over: it reports it (dropped, the lease ended)
  // and hands the prefetched one back instead of starting it.
  const std::string given_back = "prefetched job " + std::to_string(prefetched) + " attempt 1 given back unstarted";
  ASSERT_TRUE(wait_until([&] { return frozen.err().find(given_back) != std::string::npos; }, std::chrono::seconds(10)))
      << frozen.err();
  EXPECT_EQ(frozen.err().find("job " + std::to_string(prefetched) + " attempt 1 started"), std::string::npos)
      << frozen.err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 2);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE worker_id = 'other'"), 2);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE state = 'done'"), 2);
}

TEST_F(QueueProcessTest, CoordinatorKilledAndRestartedMidBatchLosesAndDoublesNothing) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord1", &ep);
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(start_worker(tmp.path(), numbered("w", i), ep, "sleep:100ms"));
  fs::path manifest = write_sleep_manifest(tmp.path(), "restart", 8, 4);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") >= 6; }, std::chrono::seconds(15)));
  coord->signal(SIGKILL);
  coord->wait();
  int64_t done_at_kill = jobs_in(db(), "done");
  EXPECT_LT(done_at_kill, 32);
  // Same port: the workers keep their endpoint (the OS chose it for the first run).
  std::string ep2;
  auto coord2 = start_coordinator(tmp.path(), "coord2", &ep2, ep);
  ASSERT_EQ(ep2, ep);
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 32; }, std::chrono::seconds(30))) << coord2->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 32);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(DISTINCT job_id) FROM results"), 32);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs WHERE state <> 'done'"), 0);
  EXPECT_EQ(query_int(db(), "SELECT state = 'done' FROM batches WHERE id = 1"), 1);
  // Every result belongs to an attempt that ended done, one per job.
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE state = 'done'"), 32);
  // Reconnecting workers say hello several times; none is handed a second
  // job while it runs one, so no attempt is lost to "busy".
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE error LIKE '%busy%'"), 0);
}

// ---- batching across jobs (protocol 7; docs/protocol.md, "Batching") ---------

// A worker with --batch 4 takes four leases at once and runs the four jobs
// as one batch: each is recorded once, with batch_size 4.
TEST_F(QueueProcessTest, ABatchFourWorkerTakesFourLeasesAtOnceAndRunsThemAsOneBatch) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "four", 4, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  auto w = start_worker(tmp.path(), "b4", ep, "sleep:2s", {"--batch", "4"});
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 4; }, std::chrono::seconds(10))) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs WHERE state = 'leased' AND lease_worker = 'b4'"), 4);
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 4; }, std::chrono::seconds(15))) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(DISTINCT job_id) FROM results"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE batch_size = 4"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 4);
  // The run history says which jobs shared a batch.
  std::string out;
  ASSERT_EQ(run_hipq(tmp.path(), "runs", {"runs", "--db", db().string(), "--format", "json"}, &out), 0) << out;
  EXPECT_NE(out.find("\"batch_size\": 4"), std::string::npos) << out;
}

// `hipq cancel job:N` for one job of a running batch stops that job alone:
// the worker is told to cancel it, and the other three finish.
TEST_F(QueueProcessTest, CancellingOneJobOfARunningBatchCancelsItAloneAndTheOthersFinish) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "four", 4, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  auto w = start_worker(tmp.path(), "b4", ep, "sleep:4s", {"--batch", "4"});
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 4; }, std::chrono::seconds(10))) << coord->err();
  std::string out;
  ASSERT_EQ(run_hipq(tmp.path(), "cancel", {"cancel", "job:2", "--connect", ep}, &out), 0) << out;
  EXPECT_NE(out.find("1 running job(s) told to stop"), std::string::npos) << out;
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 3; }, std::chrono::seconds(15))) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT state = 'cancelled' FROM jobs WHERE id = 2"), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE job_id = 2"), 0);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE batch_size = 4"), 3);
  EXPECT_NE(w->err().find("job 2 cancelled by the coordinator"), std::string::npos) << w->err();
}

// A batching worker SIGKILLed mid-batch: all four leases expire and another
// worker runs the four jobs; none is lost, none recorded twice.
TEST_F(QueueProcessTest, AWorkerKilledMidBatchLosesNoJobAndDoublesNone) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "kill", 4, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  auto slow = start_worker(tmp.path(), "slow", ep, "sleep:30s", {"--batch", "4"});
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 4; }, std::chrono::seconds(10))) << coord->err();
  slow->signal(SIGKILL);
  EXPECT_EQ(slow->wait(), 128 + SIGKILL);
  auto fast = start_worker(tmp.path(), "fast", ep, "sleep:10ms", {"--batch", "4"});
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 4; }, std::chrono::seconds(15))) << coord->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE attempt = 1 AND state = 'expired' AND "
                            "worker_id = 'slow'"),
            4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE worker_id = 'fast'"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(DISTINCT job_id) FROM results"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results"), 4);
}

// The coordinator killed and restarted mid-batch: the worker's hello claims
// every running job of its batch, so the four keep their leases (no second
// attempt) and are recorded once each, from the batch.
TEST_F(QueueProcessTest, ACoordinatorRestartMidBatchKeepsEveryRunningJobClaimed) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord1", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "restart", 4, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  auto w = start_worker(tmp.path(), "b4", ep, "sleep:6s", {"--batch", "4"});
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 4; }, std::chrono::seconds(10))) << coord->err();
  coord->signal(SIGKILL);
  coord->wait();
  std::string ep2;
  auto coord2 = start_coordinator(tmp.path(), "coord2", &ep2, ep);
  ASSERT_EQ(ep2, ep);
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 4; }, std::chrono::seconds(20))) << coord2->err();
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 4) << "a job of the batch was leased again";
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE attempt = 1 AND state = 'done'"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE batch_size = 4 AND worker_id = 'b4'"), 4);
  EXPECT_EQ(coord2->err().find("never received"), std::string::npos) << coord2->err();
}

TEST_F(QueueProcessTest, CancelBatchStopsQueuedAndRunningJobs) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  auto w = start_worker(tmp.path(), "w0", ep, "sleep:20s");
  fs::path manifest = write_sleep_manifest(tmp.path(), "cancel", 5, 2);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 2; }, std::chrono::seconds(10)));  // one prefetched
  std::string out;
  ASSERT_EQ(run_hipq(tmp.path(), "cancel", {"cancel", "1", "--connect", ep}, &out), 0);
  EXPECT_NE(out.find("cancelled 10 job(s); 2 running job(s) told to stop"), std::string::npos) << out;
  EXPECT_EQ(jobs_in(db(), "cancelled"), 10);
  EXPECT_EQ(query_int(db(), "SELECT state = 'cancelled' FROM batches WHERE id = 1"), 1);
  // The worker stopped its 20 s job and is free: a new batch runs on it at once.
  // Both its jobs stop: the running one and the prefetched one.
  ASSERT_TRUE(wait_until([&] { return w->err().find("w0: job") != std::string::npos &&
                                      w->err().find("w0: prefetched job") != std::string::npos; },
                         std::chrono::seconds(5)))
      << w->err();
  EXPECT_NE(w->err().find("cancelled by the coordinator"), std::string::npos) << w->err();
  // Cancelling a finished batch is refused with a clear error.
  std::string err;
  EXPECT_NE(run_hipq(tmp.path(), "cancel2", {"cancel", "1", "--connect", ep}, &out, &err), 0);
  EXPECT_NE(err.find("FailedPrecondition"), std::string::npos) << err;
}

TEST_F(QueueProcessTest, CancelOneJobLeavesTheRest) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path manifest = write_sleep_manifest(tmp.path(), "one", 4, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  std::string out;
  ASSERT_EQ(run_hipq(tmp.path(), "cancel", {"cancel", "job:2", "--connect", ep}, &out), 0) << out;
  auto w = start_worker(tmp.path(), "w0", ep, "sleep:10ms");
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "done") == 3; }, std::chrono::seconds(10)));
  EXPECT_EQ(query_int(db(), "SELECT state = 'cancelled' FROM jobs WHERE id = 2"), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM results WHERE job_id = 2"), 0);
}

TEST_F(QueueProcessTest, DrainedWorkerFinishesItsJobAndLeaves) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  auto w = start_worker(tmp.path(), "w0", ep, "sleep:1s");
  fs::path manifest = write_sleep_manifest(tmp.path(), "drain", 5, 1);
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  ASSERT_TRUE(wait_until([&] { return jobs_in(db(), "leased") == 2; }, std::chrono::seconds(10)));  // one prefetched
  std::string out;
  ASSERT_EQ(run_hipq(tmp.path(), "drain", {"drain", "w0", "--connect", ep}, &out), 0) << out;
  EXPECT_NE(out.find("1 worker(s) draining"), std::string::npos);
  EXPECT_EQ(w->wait(std::chrono::seconds(10)), 0) << w->err();
  // It finished the job it ran, gave the prefetched one back unstarted (no
  // attempt counted) and took no other.
  EXPECT_EQ(jobs_in(db(), "done"), 1);
  EXPECT_EQ(jobs_in(db(), "queued"), 4);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts"), 1);
  EXPECT_EQ(query_int(db(), "SELECT SUM(attempts) FROM jobs"), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM workers WHERE id = 'w0' AND state = 'gone'"), 1);
  // Unknown worker: a clear error.
  std::string err;
  EXPECT_NE(run_hipq(tmp.path(), "drain2", {"drain", "nobody", "--connect", ep}, &out, &err), 0);
  EXPECT_NE(err.find("no connected worker"), std::string::npos) << err;
}

TEST_F(QueueProcessTest, FailedJobIsReportedAndTheWorkerCarriesOn) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  auto w = start_worker(tmp.path(), "w0", ep, "sleep:10ms");
  fs::path manifest = write_sleep_manifest(tmp.path(), "fails", 3, 1, 0, "bad one [fail]");
  std::string out;
  EXPECT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep, "--wait"}, &out), 1) << out;
  EXPECT_EQ(jobs_in(db(), "done"), 3);
  EXPECT_EQ(jobs_in(db(), "failed"), 1);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM attempts WHERE error LIKE '%asks to fail%'"), 1);
  EXPECT_TRUE(w->running());
}

TEST_F(QueueProcessTest, MalformedManifestReportsEveryProblemAndQueuesNothing) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  fs::path bad = tmp.path() / "bad.yaml";
  std::ofstream(bad) << "batch: bad\n"
                        "model: synthetic:tiny-sdxl\n"
                        "defaults:\n"
                        "  widht: 64\n"
                        "  steps: many\n"
                        "outputs:\n"
                        "  directory: out\n"
                        "prompts:\n"
                        "  - a cat\n";
  std::string out, err;
  EXPECT_EQ(run_hipq(tmp.path(), "submit", {"submit", bad.string(), "--connect", ep}, &out, &err), 2);
  EXPECT_NE(err.find(bad.string() + ":4:3"), std::string::npos) << err;
  EXPECT_NE(err.find(bad.string() + ":5:"), std::string::npos) << err;
  EXPECT_NE(err.find("nothing was queued"), std::string::npos) << err;
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM batches"), 0);
  EXPECT_EQ(query_int(db(), "SELECT COUNT(*) FROM jobs"), 0);
}

TEST_F(QueueProcessTest, CurveRefusesUnknownKeysAndAdmitsListedOnes) {
  const fs::path d = tmp.path();
  ASSERT_EQ(run_hipq(d, "k1", {"keygen", (d / "server.key").string()}), 0);
  ASSERT_EQ(run_hipq(d, "k2", {"keygen", (d / "alice.key").string()}), 0);
  ASSERT_EQ(run_hipq(d, "k3", {"keygen", (d / "mallory.key").string()}), 0);
  EXPECT_EQ(fs::status(d / "alice.key").permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);
  std::string alice_pub = slurp(d / "alice.key.pub");
  auto pos = alice_pub.find("\"public_key\": \"");
  ASSERT_NE(pos, std::string::npos);
  std::string key = alice_pub.substr(pos + 15, 40);
  std::ofstream(d / "authorized") << "# test allow-list\n" << key << " alice worker,client\n";
  std::string ep;
  auto coord = start_coordinator(d, "coord", &ep, "tcp://127.0.0.1:*",
                                 {"--server-key", (d / "server.key").string(), "--authorized-keys",
                                  (d / "authorized").string()});
  std::string out, err;
  EXPECT_EQ(run_hipq(d, "alice", {"status", "--connect", ep, "--key", (d / "alice.key").string(), "--server-key",
                                  (d / "server.key.pub").string(), "--timeout", "5"},
                     &out, &err),
            0)
      << err;
  EXPECT_NE(run_hipq(d, "mallory", {"status", "--connect", ep, "--key", (d / "mallory.key").string(),
                                    "--server-key", (d / "server.key.pub").string(), "--timeout", "1.5"},
                     &out, &err),
            0);
  EXPECT_NE(err.find("no answer"), std::string::npos) << err;
  // Without keys at all the CURVE server does not answer either.
  EXPECT_NE(run_hipq(d, "plain", {"status", "--connect", ep, "--timeout", "1"}, &out, &err), 0);
  EXPECT_TRUE(wait_until([&] { return coord->err().find("unknown public key") != std::string::npos; },
                         std::chrono::seconds(2)))
      << coord->err();
}

TEST_F(QueueProcessTest, NonLoopbackBindWithoutKeysIsRefused) {
  std::string out, err;
  EXPECT_EQ(run_hipq(tmp.path(), "coord",
                     {"coordinator", "--db", db().string(), "--bind", "tcp://0.0.0.0:*"}, &out, &err),
            2);
  EXPECT_NE(err.find("--insecure"), std::string::npos) << err;
}

TEST_F(QueueProcessTest, WorkerBacksOffAfterRetryableFailuresSoAttemptsAreSpreadOut) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  auto w = start_worker(tmp.path(), "w0", ep, "sleep:10ms");
  // "[oom]": the SleepEngine test double fails it with a retryable ResourceExhausted.
  fs::path manifest = write_sleep_manifest(tmp.path(), "oom", 0, 1, 0, "always [oom]");
  std::string out, err;
  // --wait exits 1: the batch ended with a dead job.
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep, "--wait"}, &out, &err), 1)
      << out << err;
  EXPECT_EQ(jobs_in(db(), "dead"), 1);
  auto db = db::Database::open(this->db());
  ASSERT_TRUE(db.ok());
  db::Statement s = (*db)->prepare("SELECT started_at FROM attempts ORDER BY attempt");
  std::vector<double> starts;
  while (*s.step()) starts.push_back(s.column_double(0));
  ASSERT_EQ(starts.size(), 3u);
  // 1 s after the first failure, 2 s after the second (less the 10 ms job).
  EXPECT_GE(starts[1] - starts[0], 0.9);
  EXPECT_GE(starts[2] - starts[1], 1.9);
  EXPECT_NE(w->err().find("asking for work again in 2000 ms"), std::string::npos) << w->err();
}

// `key=value` lines of a worker health file (worker/health_file.h); empty when absent.
std::map<std::string, std::string> read_health(const fs::path& p) {
  std::map<std::string, std::string> kv;
  std::istringstream in(slurp(p));
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

TEST_F(QueueProcessTest, HealthFileIsRefreshedWhileAliveSaysReconnectingAndIsRemovedOnExit) {
  std::string ep;
  auto coord = start_coordinator(tmp.path(), "coord", &ep);
  // The folder does not exist yet: the worker creates it.
  fs::path health = tmp.path() / "run" / "health" / "w0";
  auto w = start_worker(tmp.path(), "w0", ep, "sleep:10ms", {"--health-file", health.string()});
  ASSERT_TRUE(wait_until([&] { return read_health(health)["state"] == "connected"; }, std::chrono::seconds(10)))
      << w->err();
  auto first = read_health(health);
  EXPECT_EQ(first["worker"], "w0");
  EXPECT_EQ(first["job"], "0");
  // Rewritten on each heartbeat tick (1 s).
  const double t0 = std::stod(first["updated_unix"]);
  EXPECT_TRUE(wait_until([&] { auto h = read_health(health); return h.count("updated_unix") && std::stod(h["updated_unix"]) > t0; },
                         std::chrono::seconds(5)));
  // The coordinator goes away: the worker is alive and says it is reconnecting.
  coord->signal(SIGKILL);
  coord->wait();
  EXPECT_TRUE(wait_until([&] { return read_health(health)["state"] == "reconnecting"; }, std::chrono::seconds(15)))
      << slurp(health) << w->err();
  EXPECT_GE(std::stoll(read_health(health)["coordinator_silent_ms"]), 3000);
  // A clean exit removes it, so a stale file never claims health.
  w->signal(SIGTERM);
  EXPECT_EQ(w->wait(), 0) << w->err();
  EXPECT_FALSE(fs::exists(health));
}

}  // namespace
}  // namespace hipq::testing
