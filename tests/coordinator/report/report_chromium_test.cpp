// Renders the HTML report of a real run history (SQLite filled through
// JobStore, PNG outputs on disk) in headless Chromium and checks the page as
// the browser built it: every section, the values, the thumbnails, that the
// inline script ran, and that the console shows no error and no refused
// (network) load. Also takes a screenshot. Skips when chromium is missing.
// Set HIPQ_REPORT_ARTIFACTS=<dir> to keep report.html and report.png there.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "base/fs.h"
#include "coordinator/query_service.h"
#include "coordinator/report/html_report.h"
#include "coordinator/report/thumbnail.h"
#include "tests/db/run_history_fixture.h"

namespace hipq::coordinator::report {
namespace {

std::string find_chromium() {
  if (const char* env = std::getenv("HIPQ_CHROMIUM")) return env;
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    for (const char* name : {"chromium", "chromium-browser"}) {
      const auto p = std::filesystem::path(dir) / name;
      if (::access(p.c_str(), X_OK) == 0) return p.string();
    }
  }
  return "";
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// A 96×96 picture per job: a gradient whose hue depends on the seed.
void write_outputs(db::testing::RunHistory& h) {
  db::JobStore store(*h.db);
  for (int64_t job : h.done_jobs) {
    auto j = store.get_job(job);
    ASSERT_TRUE(j.ok());
    spec::RgbImage img;
    img.width = img.height = 96;
    img.rgb.resize(96 * 96 * 3);
    for (int y = 0; y < 96; ++y) {
      for (int x = 0; x < 96; ++x) {
        uint8_t* p = &img.rgb[(y * 96 + x) * 3];
        p[0] = static_cast<uint8_t>((x * 2 + j->seed * 70) % 256);
        p[1] = static_cast<uint8_t>((y * 2 + j->repeat_index * 90) % 256);
        p[2] = static_cast<uint8_t>(((x + y) + j->seed * 40) % 256);
      }
    }
    auto png = spec::encode_png(img);
    ASSERT_TRUE(png.ok());
    const auto path = std::filesystem::path(h.dir) / "out" / j->output_dir / "image.png";
    ASSERT_TRUE(write_file_atomic(path, *png).ok());
  }
}

TEST(ReportChromiumTest, RendersOfflineWithEverySectionAndNoConsoleErrors) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (apt-get install --no-install-recommends chromium); "
                    "the HTML report is not rendered";
  }
  db::testing::RunHistory h;
  db::testing::fill_run_history(h);
  write_outputs(h);
  auto data = run_query(*h.db, "report-data", {{"thumbnails", 24}});
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_EQ((*data)["thumbnails"].size(), h.done_jobs.size());
  auto html = render_html_report(*data);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  const auto page = h.dir / "report.html";
  ASSERT_TRUE(write_file_atomic(page, *html).ok());

  const auto profile = h.dir / "profile";
  const std::string common = "timeout 120 " + chromium +
                             " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                             " --disable-background-networking --disable-component-update --disable-sync"
                             " --enable-logging=stderr --v=0 --user-data-dir=" + profile.string();
  const auto dom_path = h.dir / "dom.html", log_path = h.dir / "chromium.log", shot = h.dir / "report.png";
  const std::string dump = common + " --dump-dom file://" + page.string() + " > " + dom_path.string() + " 2> " +
                           log_path.string();
  ASSERT_EQ(std::system(dump.c_str()), 0) << dump << "\n" << slurp(log_path);
  const std::string dom = slurp(dom_path);
  const std::string log = slurp(log_path);

  EXPECT_NE(dom.find("data-scripted=\"1\""), std::string::npos) << "the inline script did not run";
  // The fixture's runs come from two builds: the history section is there.
  for (const char* id : {"summary", "workers", "distributions", "histograms", "step-traces", "stats", "parity",
                         "thumbnails", "history", "runs"}) {
    EXPECT_NE(dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_NE(dom.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(dom.find("AMD Radeon RX 6800"), std::string::npos);
  EXPECT_NE(dom.find("0.997100"), std::string::npos) << "worst cosine in the parity table";
  EXPECT_NE(dom.find("83.3%"), std::string::npos) << "pass rate 5/6";
  EXPECT_EQ(count(dom, "<img "), h.done_jobs.size());
  EXPECT_GE(count(dom, "<svg class=\"chart"), 8u);
  EXPECT_NE(dom.find("a lighthouse at dusk"), std::string::npos);
  EXPECT_NE(dom.find("synthetic failure: weights missing"), std::string::npos);
  // Console messages land in the log as CONSOLE lines; a blocked fetch as "Refused to".
  EXPECT_EQ(log.find("Refused to"), std::string::npos) << log;
  EXPECT_EQ(log.find("Uncaught"), std::string::npos) << log;
  EXPECT_EQ(log.find(":CONSOLE"), std::string::npos) << log;

  const std::string screenshot = common + " --hide-scrollbars --window-size=1400,2000 --screenshot=" +
                                 shot.string() + " file://" + page.string() + " > /dev/null 2>> " +
                                 log_path.string();
  ASSERT_EQ(std::system(screenshot.c_str()), 0) << screenshot << "\n" << slurp(log_path);
  auto png = spec::read_png(shot);
  ASSERT_TRUE(png.ok()) << png.status().ToString();
  EXPECT_EQ(png->width, 1400);
  EXPECT_EQ(png->height, 2000);
  // Not blank: the page has dark header pixels and light background pixels.
  size_t dark = 0;
  for (size_t i = 0; i < png->rgb.size(); i += 3) dark += png->rgb[i] < 64 && png->rgb[i + 1] < 64;
  EXPECT_GT(dark, 1000u);

  if (const char* keep = std::getenv("HIPQ_REPORT_ARTIFACTS")) {
    std::filesystem::create_directories(keep);
    std::filesystem::copy_file(page, std::filesystem::path(keep) / "report.html",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(shot, std::filesystem::path(keep) / "report.png",
                               std::filesystem::copy_options::overwrite_existing);
  }
}

// At a 1280 px wide window nothing is wider than its section: the page
// scrolls only vertically. A measuring script is appended to the page (the
// report's CSP allows inline script) and leaves its findings in the DOM.
TEST(ReportChromiumTest, EveryTableFitsA1280PixelWindow) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed; the report layout is not measured";
  db::testing::RunHistory h;
  db::testing::fill_run_history(h);
  write_outputs(h);
  auto data = run_query(*h.db, "report-data", {{"thumbnails", 24}});
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  // Long text as users write it: a long prompt and a long error.
  (*data)["runs"][0]["prompt"] = std::string(400, 'p') + " a very long prompt with words";
  (*data)["runs"][0]["error"] = "loading model /models/some/very/long/path/" + std::string(300, 'x');
  (*data)["parity"][0]["prompt"] = std::string(300, 'q');
  auto html = render_html_report(*data);
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  const char* measure = R"js(<script>
var wide=[];document.querySelectorAll('section').forEach(function(s){
  s.querySelectorAll('table,svg').forEach(function(t){
    if(t.getBoundingClientRect().right>s.getBoundingClientRect().right+0.5)wide.push(s.id+':'+t.tagName);});});
document.documentElement.setAttribute('data-wide',wide.join(' ')||'none');
document.documentElement.setAttribute('data-page-width',String(document.documentElement.scrollWidth));
</script>)js";
  std::string page_html = *html;
  page_html.insert(page_html.rfind("</body>"), measure);
  const auto page = h.dir / "report-1280.html";
  ASSERT_TRUE(write_file_atomic(page, page_html).ok());
  const auto dom_path = h.dir / "dom-1280.html", log_path = h.dir / "chromium-1280.log";
  const std::string cmd = "timeout 120 " + chromium +
                          " --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking"
                          " --disable-component-update --disable-sync --hide-scrollbars --window-size=1280,900"
                          " --user-data-dir=" + (h.dir / "profile-1280").string() + " --dump-dom file://" +
                          page.string() + " > " + dom_path.string() + " 2> " + log_path.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd << "\n" << slurp(log_path);
  const std::string dom = slurp(dom_path);
  EXPECT_NE(dom.find("data-wide=\"none\""), std::string::npos)
      << "wider than their section: " << dom.substr(dom.find("data-wide="), 200);
  EXPECT_NE(dom.find("data-page-width=\"1280\""), std::string::npos)
      << dom.substr(dom.find("data-page-width="), 40);
}

}  // namespace
}  // namespace hipq::coordinator::report
