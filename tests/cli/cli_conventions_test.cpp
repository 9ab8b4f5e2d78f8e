// The CLI's conventions and the preflight, through the real hipq binary:
// --version, help SUBCOMMAND, did-you-mean, usage errors exit 2, --log-level
// after the subcommand, examples in every --help, and `hipq check` / `hipq
// run` refusing what would fail once work started.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "../coordinator/process_harness.h"
#include "cli/conventions.h"

namespace hipq {
namespace {

using testing::run_hipq;
using testing::TempDir;

TEST(CliConventions, VersionFlagAndHelpSubcommand) {
  TempDir dir;
  std::string out, err;
  ASSERT_EQ(run_hipq(dir.path(), "v", {"--version"}, &out, &err), 0) << err;
  EXPECT_EQ(out.rfind("hipq ", 0), 0u) << out;
  ASSERT_EQ(run_hipq(dir.path(), "h", {"help", "run"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("--new-batch"), std::string::npos) << out;
  ASSERT_EQ(run_hipq(dir.path(), "h2", {"help", "golden", "promote"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("batch:N"), std::string::npos) << out;
  EXPECT_EQ(run_hipq(dir.path(), "h3", {"help", "rnu"}, &out, &err), 2);
  EXPECT_NE(err.find("did you mean 'run'"), std::string::npos) << err;
}

TEST(CliConventions, MisspeltCommandsAndFlagsGetASuggestionAndExit2) {
  TempDir dir;
  std::string out, err;
  EXPECT_EQ(run_hipq(dir.path(), "c", {"sumbit", "x.yaml"}, &out, &err), 2);
  EXPECT_NE(err.find("did you mean 'submit'"), std::string::npos) << err;
  EXPECT_EQ(run_hipq(dir.path(), "f", {"run", "x.yaml", "--new-bach"}, &out, &err), 2);
  EXPECT_NE(err.find("did you mean '--new-batch'"), std::string::npos) << err;
  EXPECT_EQ(run_hipq(dir.path(), "k", {"coordinator", "--keys", "keys/"}, &out, &err), 2);
  EXPECT_NE(err.find("--keys"), std::string::npos) << err;
  EXPECT_EQ(run_hipq(dir.path(), "m", {"run"}, &out, &err), 2) << "a missing argument is a usage error";
  EXPECT_EQ(run_hipq(dir.path(), "n", {}, &out, &err), 2) << "no subcommand is a usage error";
  EXPECT_EQ(run_hipq(dir.path(), "b", {"runs", "--limit", "many"}, &out, &err), 2) << "a bad value is a usage error";
}

TEST(CliConventions, LogLevelIsAcceptedAfterTheSubcommand) {
  TempDir dir;
  std::string out, err;
  EXPECT_EQ(run_hipq(dir.path(), "l", {"version", "--log-level", "debug"}, &out, &err), 0) << err;
  EXPECT_EQ(run_hipq(dir.path(), "l2", {"--log-level", "warn", "version"}, &out, &err), 0) << err;
  EXPECT_EQ(run_hipq(dir.path(), "l3", {"version", "--log-level", "loud"}, &out, &err), 2) << err;
}

TEST(CliConventions, EveryHelpEndsWithExamples) {
  TempDir dir;
  std::vector<std::vector<std::string>> commands;
  for (const auto& [path, lines] : cli::help_examples()) {
    std::vector<std::string> words;
    std::istringstream in(path);
    std::string w;
    in >> w;  // "hipq"
    while (in >> w) words.push_back(w);
    commands.push_back(words);
  }
  // Every subcommand hipq lists has an entry.
  std::string out, err;
  ASSERT_EQ(run_hipq(dir.path(), "top", {"--help"}, &out, &err), 0);
  for (const char* sub : {"version", "coordinator", "worker", "submit", "status", "cancel", "workers", "drain", "run",
                          "keygen", "check", "weights", "generate", "golden", "runs", "stats", "compare", "report",
                          "tokenize", "randn"}) {
    EXPECT_NE(out.find(std::string("  ") + sub), std::string::npos) << sub;
    EXPECT_EQ(cli::help_examples().count(std::string("hipq ") + sub), 1u) << sub << " has no examples";
  }
  for (auto words : commands) {
    words.push_back("--help");
    ASSERT_EQ(run_hipq(dir.path(), "help", words, &out, &err), 0) << err;
    size_t at = out.rfind("Examples:");
    ASSERT_NE(at, std::string::npos) << "hipq " << words[0] << " --help:\n" << out;
    EXPECT_NE(out.find("\n  hipq ", at), std::string::npos) << out;
  }
}

TEST(Preflight, CheckRefusesAnOutputRootThatCannotBeCreated) {
  TempDir dir;
  std::ofstream(dir.path() / "blocker") << "a file, not a folder\n";
  std::ofstream(dir.path() / "m.yaml") << "model: synthetic:tiny-sdxl\noutputs: {directory: blocker/out}\n"
                                       << "prompts: [a]\nparity: {golden: none}\n";
  std::string out, err;
  EXPECT_EQ(run_hipq(dir.path(), "check", {"check", (dir.path() / "m.yaml").string()}, &out, &err), 2) << out;
  EXPECT_NE(err.find((dir.path() / "blocker").string() + "' exists and is not a directory"), std::string::npos) << err;
  EXPECT_EQ(run_hipq(dir.path(), "run",
                     {"run", (dir.path() / "m.yaml").string(), "--db", (dir.path() / "h.db").string(), "--engine",
                      "sleep:0", "--backend", "cpu"},
                     &out, &err),
            2);
  EXPECT_NE(err.find("nothing was run"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "h.db")) << "nothing may be queued";
}

TEST(Preflight, TheCoordinatorRefusesASubmitWhoseOutputRootCannotBeCreated) {
  TempDir dir;
  std::ofstream(dir.path() / "blocker") << "a file, not a folder\n";
  std::ofstream(dir.path() / "m.yaml") << "model: synthetic:tiny-sdxl\noutputs: {directory: blocker/out}\n"
                                       << "prompts: [a]\nparity: {golden: none}\n";
  std::string endpoint;
  auto coordinator = testing::start_coordinator(dir.path(), "coordinator", &endpoint);
  std::string out, err;
  EXPECT_NE(run_hipq(dir.path(), "submit", {"submit", (dir.path() / "m.yaml").string(), "--connect", endpoint}, &out,
                     &err),
            0);
  EXPECT_NE(err.find("FailedPrecondition: output root"), std::string::npos) << err;
  EXPECT_NE(err.find("blocker' exists and is not a directory"), std::string::npos) << err;
  ASSERT_EQ(run_hipq(dir.path(), "status", {"status", "--connect", endpoint, "--format", "json"}, &out, &err), 0)
      << err;
  EXPECT_NE(out.find("\"batches\": []"), std::string::npos) << "nothing may be queued: " << out;
}

TEST(Preflight, CheckRefusesAMisspeltSyntheticModelAndOverlongFolders) {
  TempDir dir;
  std::ofstream(dir.path() / "model.yaml") << "model: synthetic:tiny-sdx\nprompts: [a]\nparity: {golden: none}\n";
  std::string out, err;
  EXPECT_EQ(run_hipq(dir.path(), "model", {"check", (dir.path() / "model.yaml").string()}, &out, &err), 2) << out;
  EXPECT_NE(err.find("unknown synthetic model 'tiny-sdx'; did you mean 'tiny-sdxl'?"), std::string::npos) << err;

  std::ofstream(dir.path() / "long.yaml") << "model: synthetic:tiny-sdxl\nprompts: [a]\nparity: {golden: none}\n"
                                          << "outputs: {layout: \"" << std::string(300, 'x') << "{prompt}\"}\n";
  EXPECT_EQ(run_hipq(dir.path(), "long", {"check", (dir.path() / "long.yaml").string()}, &out, &err), 2) << out;
  EXPECT_NE(err.find("more than the 255 a file name may have"), std::string::npos) << err;

  std::ofstream(dir.path() / "nul.yaml") << "model: synthetic:tiny-sdxl\nprompts: [a]\nparity: {golden: none}\n"
                                         << "outputs: {layout: \"a\\0b/{prompt}\"}\n";
  EXPECT_EQ(run_hipq(dir.path(), "nul", {"check", (dir.path() / "nul.yaml").string()}, &out, &err), 2) << out;
  EXPECT_NE(err.find("holds a NUL byte"), std::string::npos) << err;
}

}  // namespace
}  // namespace hipq

namespace hipq {
namespace {

TEST(QueueCommands, StatusAndCancelTakeABatchNameAndStatusShowsTheReason) {
  TempDir dir;
  std::string endpoint;
  auto coordinator = testing::start_coordinator(dir.path(), "coordinator", &endpoint);
  auto worker = testing::start_worker(dir.path(), "w1", endpoint, "sleep:100ms");
  auto failing = testing::write_sleep_manifest(dir.path(), "named", 1, 1, 0, "this fails [fail]");
  std::string out, err;
  EXPECT_EQ(run_hipq(dir.path(), "submit", {"submit", failing.string(), "--connect", endpoint, "--wait"}, &out, &err),
            1)
      << out << err;
  ASSERT_EQ(run_hipq(dir.path(), "status", {"status", "named", "--connect", endpoint}, &out, &err), 0) << err;
  EXPECT_NE(out.find("named"), std::string::npos) << out;
  EXPECT_NE(out.find("job 2: InvalidArgument: sleep test double"), std::string::npos) << out;
  ASSERT_EQ(run_hipq(dir.path(), "json", {"status", "named", "--connect", endpoint, "--format", "json"}, &out, &err),
            0);
  EXPECT_NE(out.find("\"reason\": \"job 2: InvalidArgument: sleep test double: prompt asks to fail ([fail])\""),
            std::string::npos)
      << out;
  EXPECT_EQ(run_hipq(dir.path(), "unknown", {"status", "nosuch", "--connect", endpoint}, &out, &err), 2);
  EXPECT_NE(err.find("no batch named \"nosuch\""), std::string::npos) << err;

  auto slow = testing::write_sleep_manifest(dir.path(), "tocancel", 20, 2);
  ASSERT_EQ(run_hipq(dir.path(), "submit2", {"submit", slow.string(), "--connect", endpoint}, &out, &err), 0) << err;
  ASSERT_EQ(run_hipq(dir.path(), "cancel", {"cancel", "tocancel", "--connect", endpoint}, &out, &err), 0) << err;
  EXPECT_NE(out.find("cancelled "), std::string::npos) << out;
  ASSERT_EQ(run_hipq(dir.path(), "status2", {"status", "tocancel", "--connect", endpoint, "--format", "json"}, &out,
                     &err),
            0);
  EXPECT_NE(out.find("\"state\": \"cancelled\""), std::string::npos) << out;
  EXPECT_EQ(run_hipq(dir.path(), "cancel2", {"cancel", "tocancel", "--connect", endpoint}, &out, &err), 2)
      << "no active batch of that name is left";
}

}  // namespace
}  // namespace hipq
