// Hostile input end to end: the real `hipq` binary (check, submit,
// coordinator) fed bytes no well-behaved user writes — non-UTF-8 text, deep
// nesting, manifests that expand to millions of jobs, prompt files that are
// devices or FIFOs. Each must get a clear error naming file, line and
// column (or the limit), in bounded time and memory, and the coordinator
// must keep serving. A RawPeer sends what `hipq submit` would refuse locally.
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/coordinator/process_harness.h"
#include "tests/coordinator/raw_peer.h"

namespace hipq::testing {
namespace {

using namespace std::chrono_literals;

std::string manifest_with_prompts_file(const std::string& file) {
  return "model: synthetic:tiny-sdxl\nparity: {golden: none}\noutputs: {directory: out, save: [latent]}\n"
         "defaults: {width: 64, height: 64, steps: 2}\nprompts_file: " + file + "\n";
}

fs::path write(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override { coord_ = start_coordinator(tmp.path(), "coord", &ep_); }

  // A SubmitRequest straight to the coordinator, skipping client checks.
  std::optional<proto::Envelope> raw_submit(const fs::path& manifest_path, const std::string& text,
                                            std::chrono::milliseconds timeout = 5s) {
    RawPeer peer(ep_);
    proto::Envelope e;
    e.mutable_submit()->set_manifest_path(manifest_path.string());
    e.mutable_submit()->set_manifest_text(text);
    return peer.call(e, timeout);
  }
  void expect_coordinator_serves() {
    ASSERT_TRUE(coord_->running()) << coord_->err();
    std::string out, err;
    EXPECT_EQ(run_hipq(tmp.path(), "status", {"status", "--connect", ep_, "--timeout", "5"}, &out, &err), 0)
        << err << coord_->err();
  }

  TempDir tmp;
  std::string ep_;
  std::unique_ptr<Process> coord_;
};

TEST_F(HostileInputTest, Latin1PromptFileIsRefusedWithLineAndColumnAndTheCoordinatorLives) {
  for (const std::string name : {"prompts.txt", "prompts.tsv"}) {
    SCOPED_TRACE(name);
    std::string body = name == "prompts.tsv" ? "Prompt\tCategory\nfine\tx\ncaf\xe9\tx\n" : "fine\ncaf\xe9\n";
    write(tmp.path() / name, body);
    fs::path m = write(tmp.path() / "m.yaml", manifest_with_prompts_file(name));
    std::string out, err;
    EXPECT_EQ(run_hipq(tmp.path(), "check", {"check", m.string()}, &out, &err), 2) << out << err;
    const std::string where = (tmp.path() / name).string() + (name == "prompts.tsv" ? ":3:4:" : ":2:4:");
    EXPECT_NE(err.find(where), std::string::npos) << err;
    EXPECT_NE(err.find("invalid UTF-8 byte 0xE9"), std::string::npos) << err;
    // The JSON form of the same report must itself be valid JSON.
    EXPECT_EQ(run_hipq(tmp.path(), "check-json", {"check", m.string(), "--format", "json", "--list-jobs"}, &out, &err),
              2)
        << out << err;
    EXPECT_NE(out.find("\"ok\": false"), std::string::npos) << out << err;
    EXPECT_EQ(run_hipq(tmp.path(), "submit", {"submit", m.string(), "--connect", ep_}, &out, &err), 2) << err;
    EXPECT_NE(err.find("0xE9"), std::string::npos) << err;
    auto reply = raw_submit(m, manifest_with_prompts_file(name));
    ASSERT_TRUE(reply.has_value()) << "no reply; coordinator: " << coord_->err();
    ASSERT_TRUE(reply->has_error_reply()) << reply->DebugString();
    EXPECT_NE(reply->error_reply().message().find(where), std::string::npos) << reply->error_reply().message();
    expect_coordinator_serves();
  }
}

TEST_F(HostileInputTest, NonUtf8InlinePromptIsRefusedWithItsLine) {
  fs::path m = write(tmp.path() / "inline.yaml",
                     "model: synthetic:tiny-sdxl\nparity: {golden: none}\nprompts:\n  - fine\n  - caf\xe9 au lait\n");
  std::string out, err;
  EXPECT_EQ(run_hipq(tmp.path(), "submit", {"submit", m.string(), "--connect", ep_}, &out, &err), 2) << err;
  EXPECT_NE(err.find(m.string() + ":5:8: manifest: invalid UTF-8 byte 0xE9"), std::string::npos) << err;
  expect_coordinator_serves();
}

TEST_F(HostileInputTest, DeepJsonlNestingIsRefusedNotACrash) {
  write(tmp.path() / "brackets.jsonl", std::string(200000, '[') + "\n");
  std::string tags = "{\"prompt\": \"a cat\", \"tags\": " + std::string(100000, '[') + "\"x\"" +
                     std::string(100000, ']') + "}\n";
  write(tmp.path() / "tags.jsonl", "{\"prompt\": \"fine\"}\n" + tags);
  for (const std::string name : {"brackets.jsonl", "tags.jsonl"}) {
    SCOPED_TRACE(name);
    fs::path m = write(tmp.path() / "m.yaml", manifest_with_prompts_file(name));
    std::string out, err;
    EXPECT_EQ(run_hipq(tmp.path(), "check", {"check", m.string()}, &out, &err), 2) << out << err;
    EXPECT_NE(err.find("nested more than 32 levels"), std::string::npos) << err;
    EXPECT_EQ(run_hipq(tmp.path(), "submit", {"submit", m.string(), "--connect", ep_}, &out, &err), 2) << err;
    auto reply = raw_submit(m, manifest_with_prompts_file(name));
    ASSERT_TRUE(reply.has_value()) << "no reply; coordinator: " << coord_->err();
    EXPECT_TRUE(reply->has_error_reply()) << reply->DebugString();
    expect_coordinator_serves();
  }
}

TEST_F(HostileInputTest, DeepYamlNestingIsRefusedNotACrash) {
  const std::string flow = "model: synthetic:tiny-sdxl\nprompts: " + std::string(100000, '[') + "\n";
  std::string block = "model: synthetic:tiny-sdxl\nprompts:\n";
  for (int i = 0; i < 20000; ++i) block += "- ";
  block += "x\n";
  for (const auto& [name, text] : {std::pair{"flow.yaml", flow}, std::pair{"block.yaml", block}}) {
    SCOPED_TRACE(name);
    fs::path m = write(tmp.path() / name, text);
    std::string out, err;
    int code = run_hipq(tmp.path(), "check", {"check", m.string()}, &out, &err);
    EXPECT_EQ(code, 2) << out << err;
    EXPECT_NE(err.find(m.string() + ":"), std::string::npos) << err;
    auto reply = raw_submit(m, text);
    ASSERT_TRUE(reply.has_value()) << "no reply; coordinator: " << coord_->err();
    EXPECT_TRUE(reply->has_error_reply()) << reply->DebugString();
    expect_coordinator_serves();
  }
}

TEST_F(HostileInputTest, AmplifyingManifestIsRefusedQuicklyInBoundedMemory) {
  std::ostringstream m;
  m << "model: synthetic:tiny-sdxl\nparity: {golden: none}\nprompts:\n";
  for (int i = 0; i < 2000; ++i) m << "  - {text: p" << i << ", seeds: {from: 0, count: 100000}}\n";
  fs::path path = write(tmp.path() / "amplify.yaml", m.str());
  ASSERT_LT(fs::file_size(path), 110 * 1024u);
  auto t0 = std::chrono::steady_clock::now();
  std::string out, err;
  EXPECT_EQ(run_hipq(tmp.path(), "check", {"check", path.string()}, &out, &err), 2) << err;
  double check_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  struct rusage ru {};
  getrusage(RUSAGE_CHILDREN, &ru);  // the largest child so far: hipq check
  EXPECT_NE(err.find("more than 100000 seeds"), std::string::npos) << err;
  EXPECT_LT(check_s, 5.0);  // 0.6 s on an idle machine; it was 1.6 GiB and 11 s
  EXPECT_LT(ru.ru_maxrss, 256 * 1024) << "KiB";
  t0 = std::chrono::steady_clock::now();
  auto reply = raw_submit(path, m.str());
  double submit_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(reply.has_value()) << coord_->err();
  EXPECT_TRUE(reply->has_error_reply()) << reply->DebugString().substr(0, 2000);
  // Well under the 3 s heartbeat timeout, even on a loaded machine.
  EXPECT_LT(submit_s, 2.0) << "the coordinator's turn must stay well under the heartbeat timeout";
  std::cout << "[ figures  ] amplifying manifest of " << fs::file_size(path) << " bytes: check " << check_s
            << " s, peak RSS " << ru.ru_maxrss / 1024 << " MiB; coordinator refused it in " << submit_s << " s\n";
  expect_coordinator_serves();
}

TEST_F(HostileInputTest, PromptFilesThatAreDevicesFifosOrHugeAreRefusedNamingWhy) {
  ASSERT_EQ(mkfifo((tmp.path() / "fifo.txt").c_str(), 0600), 0);
  {
    std::ofstream big(tmp.path() / "big.txt", std::ios::binary);
    std::string line(1023, 'a');
    line += '\n';
    for (int i = 0; i < 65 * 1024; ++i) big << line;
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "a character device"},
      {"fifo.txt", "a FIFO"},
      {"big.txt", "the limit for this kind of file is 67108864 bytes"},
  };
  for (const auto& [file, why] : cases) {
    SCOPED_TRACE(file);
    fs::path m = write(tmp.path() / "m.yaml", manifest_with_prompts_file(file) + "");
    // /dev/zero has no extension: name the format.
    if (file == "/dev/zero") write(m, manifest_with_prompts_file("{path: /dev/zero, format: txt}"));
    std::string out, err;
    EXPECT_EQ(run_hipq(tmp.path(), "check", {"check", m.string()}, &out, &err, 10s), 2) << err;
    EXPECT_NE(err.find(why), std::string::npos) << err;
    auto reply = raw_submit(m, slurp(m));
    ASSERT_TRUE(reply.has_value()) << coord_->err();
    EXPECT_TRUE(reply->has_error_reply());
  }
  expect_coordinator_serves();
}

TEST_F(HostileInputTest, ManifestOverTheWireLimitIsRefusedByTheClientNamingTheLimit) {
  std::string text = "model: synthetic:tiny-sdxl\nparity: {golden: none}\nprompts:\n";
  std::string prompt = "  - " + std::string(1000, 'x') + "\n";
  while (text.size() <= 8 * 1024 * 1024) text += prompt;
  fs::path m = write(tmp.path() / "huge.yaml", text);
  std::string out, err;
  EXPECT_EQ(run_hipq(tmp.path(), "submit", {"submit", m.string(), "--connect", ep_}, &out, &err), 2) << err;
  EXPECT_NE(err.find("8388608 bytes"), std::string::npos) << err;
  EXPECT_EQ(err.find("no answer"), std::string::npos) << err;
}

}  // namespace
}  // namespace hipq::testing
