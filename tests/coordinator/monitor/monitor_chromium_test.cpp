// The live status page of a real coordinator, opened in headless Chromium
// while a batch runs (a SleepEngine worker, the test double, holds a long
// job): the page as the browser built it shows the running job, its worker,
// step and prompt, escaped; no console error. Skips when chromium is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "tests/coordinator/monitor/monitor_process_common.h"

namespace hipq::testing {
namespace {

std::string find_chromium() {
  if (const char* env = std::getenv("HIPQ_CHROMIUM")) return env;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const auto p = fs::path(dir) / name;
      if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  return "";
}

TEST(MonitorChromiumTest, TheStatusPageShowsTheRunningJobDuringABatch) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/setup --browser); the status page is not rendered";
  }
  TempDir tmp;
  std::string ep;
  HttpAddr addr;
  auto coord = start_monitored_coordinator(tmp.path(), &ep, &addr);
  auto worker = start_worker(tmp.path(), "gpu-box/w0", ep, "sleep:60s");
  fs::path manifest = write_sleep_manifest(tmp.path(), "live", 0, 2, 0, "a <b>bold</b> & \\\"quoted\\\" cat");
  ASSERT_EQ(run_hipq(tmp.path(), "submit", {"submit", manifest.string(), "--connect", ep}), 0);
  ASSERT_TRUE(wait_until([&] { return db_int(tmp.path() / "hipq.db",
                                             "SELECT COUNT(*) FROM jobs WHERE state = 'leased'") >= 1; },
                         std::chrono::seconds(15)));
  // The worker runs the first job it was leased and holds the second (credit 2).
  const int64_t running = db_int(tmp.path() / "hipq.db", "SELECT MIN(id) FROM jobs WHERE state = 'leased'");
  // Let the monitor's next database read see the lease.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  const fs::path dom = tmp.path() / "dom.html", log = tmp.path() / "chromium.log";
  const std::string cmd = "timeout 120 " + chromium +
                          " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                          " --disable-background-networking --disable-component-update --disable-sync"
                          " --enable-logging=stderr --v=0 --user-data-dir=" + (tmp.path() / "profile").string() +
                          " --dump-dom http://" + addr.host + ":" + std::to_string(addr.port) + "/ > " +
                          dom.string() + " 2> " + log.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << slurp(log);
  const std::string page = slurp(dom);
  EXPECT_NE(page.find("hipq — live status"), std::string::npos) << page;
  EXPECT_NE(page.find("data-running-job=\"" + std::to_string(running) + "\""), std::string::npos) << page;
  EXPECT_NE(page.find("job " + std::to_string(running) + " (batch 1)"), std::string::npos) << page;
  EXPECT_NE(page.find("gpu-box/w0"), std::string::npos);
  EXPECT_NE(page.find(">busy<"), std::string::npos);
  // The browser parsed the prompt as text: no <b> element came of it.
  EXPECT_EQ(page.find("<b>bold</b>"), std::string::npos) << page;
  EXPECT_NE(page.find("&lt;b&gt;bold&lt;/b&gt;"), std::string::npos) << page;
  const std::string console = slurp(log);
  EXPECT_EQ(console.find("Uncaught"), std::string::npos) << console;
  EXPECT_EQ(console.find("Refused to"), std::string::npos) << console;
}

}  // namespace
}  // namespace hipq::testing
