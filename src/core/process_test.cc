#include "core/process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/file.h"

namespace klutch::core::process_test {
namespace {

using std::chrono::milliseconds;

TEST(ProcessTest, RunCapturesOutputExitCodeAndInput) {
  auto r = RunProcess({.argv = {"sh", "-c", "cat; echo err >&2; exit 3"}}, milliseconds(5000),
                      "hello\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->output, "hello\nerr\n");
  EXPECT_FALSE(r->timed_out);
}

TEST(ProcessTest, RunAddsEnvironmentAndWorkingDirectory) {
  auto dir = std::filesystem::temp_directory_path();
  auto r =
      RunProcess({.argv = {"sh", "-c", "echo $KLUTCH_X; pwd"}, .env = {"KLUTCH_X=42"}, .cwd = dir},
                 milliseconds(5000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->output, "42\n" + std::filesystem::canonical(dir).string() + "\n");
}

TEST(ProcessTest, RunKillsOnTimeout) {
  auto r = RunProcess({.argv = {"sleep", "30"}}, milliseconds(200));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, 128 + SIGKILL);
}

TEST(ProcessTest, PipelineFeedsEachCommandTheOneBeforeAndReportsEveryExit) {
  auto r = RunPipeline({{.argv = {"sh", "-c", "cat; printf 'b\\na\\n'; echo one >&2"}},
                        {.argv = {"sort"}},
                        {.argv = {"sh", "-c", "cat; echo three >&2; exit 4"}}},
                       milliseconds(5000));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_codes, (std::vector<int>{0, 0, 4}));
  // The first reads /dev/null; every stderr and the last stdout are captured.
  EXPECT_NE(r->output.find("a\nb\n"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find("one\n"), std::string::npos) << r->output;
  EXPECT_NE(r->output.find("three\n"), std::string::npos) << r->output;
  EXPECT_FALSE(r->timed_out);
}

TEST(ProcessTest, PipelineWhoseReaderStopsEndsTheWriterAndKillsAllOnTimeout) {
  auto stopped =
      RunPipeline({{.argv = {"yes"}}, {.argv = {"head", "-n", "1"}}}, milliseconds(5000));
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->exit_codes, (std::vector<int>{128 + SIGPIPE, 0}));
  EXPECT_EQ(stopped->output, "y\n");

  auto slow = RunPipeline({{.argv = {"sleep", "30"}}, {.argv = {"cat"}}}, milliseconds(200));
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
  EXPECT_EQ(slow->exit_codes[0], 128 + SIGKILL);
  EXPECT_TRUE(IsNotFound(
      RunPipeline({{.argv = {"cat"}}, {.argv = {"klutch-no-such-program"}}}, milliseconds(1000))
          .status()));
}

TEST(ProcessTest, MissingProgramIsNotFound) {
  auto r = RunProcess({.argv = {"klutch-no-such-program"}}, milliseconds(1000));
  EXPECT_TRUE(IsNotFound(r.status()));
}

TEST(ProcessTest, SpawnWritesOutputFileAndStopEndsTheGroup) {
  auto dir = std::filesystem::temp_directory_path() /
             ("klutch-process-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto log = dir / "out.log";
  // The child starts a grandchild in its own group; StopProcess ends both.
  auto pid =
      SpawnProcess({.argv = {"sh", "-c", "echo started; sleep 30 & wait"}, .output_file = log});
  ASSERT_TRUE(pid.ok());
  EXPECT_TRUE(ProcessExists(*pid));
  EXPECT_FALSE(ReapIfExited(*pid).has_value());
  for (int i = 0; i < 200; ++i) {
    auto text = ReadFile(log);
    if (text.ok() && *text == "started\n") break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(*ReadFile(log), "started\n");
  EXPECT_FALSE(ProcessCommandLine(*pid).empty());
  EXPECT_TRUE(StopProcess(*pid, milliseconds(5000)));
  EXPECT_FALSE(ProcessExists(*pid));
  // No member of its group is left.
  EXPECT_NE(::kill(-*pid, 0), 0);
  std::filesystem::remove_all(dir);
}

TEST(ProcessTest, StopSendsTheSignalOnce) {
  // A server that stops gracefully on SIGTERM and takes a second one as "exit at once" must
  // see one: the group leader is signalled through its group only.
  auto dir = std::filesystem::temp_directory_path() /
             ("klutch-process-once-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto log = dir / "out.log";
  auto pid = SpawnProcess(
      {.argv = {"bash", "-c",
                "trap 'echo term; done=1' TERM; echo ready; while [ -z \"$done\" ]; do sleep "
                "0.02; done; sleep 0.3; exit 0"},
       .output_file = log});
  ASSERT_TRUE(pid.ok());
  for (int i = 0; i < 300; ++i) {
    auto text = ReadFile(log);
    if (text.ok() && text->find("ready") != std::string::npos) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(StopProcess(*pid, milliseconds(5000)));
  std::string out = *ReadFile(log);
  size_t terms = 0;
  for (size_t pos = out.find("term\n"); pos != std::string::npos;
       pos = out.find("term\n", pos + 1)) {
    ++terms;
  }
  EXPECT_EQ(terms, 1u) << out;
  std::filesystem::remove_all(dir);
}

TEST(ProcessTest, LookupUser) {
  auto root = LookupUser("root");
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->uid, 0u);
  EXPECT_TRUE(IsNotFound(LookupUser("klutch-no-such-user").status()));
}

// klutch up and klutch broker run as root and hand directories below their state directory to
// other accounts (postgres, glewlwyd): a parent those cannot search (a mktemp -d, /root) made
// every instance fail later with a bare "Permission denied".
TEST(ProcessTest, CheckReachableByNamesTheDirectoryInTheWayAndTheFix) {
  if (::getuid() != 0) GTEST_SKIP() << "needs root to run a child as another account";
  auto nobody = LookupUser("nobody");
  ASSERT_TRUE(nobody.ok());
  char tmpl[] = "/tmp/klutch-reach-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);  // mode 0700, like mktemp -d
  const std::filesystem::path top(tmpl);
  std::filesystem::create_directories(top / "state" / "broker");
  std::filesystem::permissions(
      top / "state", std::filesystem::perms::owner_all | std::filesystem::perms::others_exec);

  Status blocked = CheckReachableBy(*nobody, top / "state" / "broker", "runs the instances");
  EXPECT_EQ(blocked.reason(), Reason::kForbidden);
  EXPECT_NE(blocked.message().find("the account nobody, which runs the instances, cannot reach " +
                                   (top / "state" / "broker").string()),
            std::string::npos)
      << blocked.message();
  EXPECT_NE(blocked.message().find("may not search " + top.string() + " (mode 0700, owner root)"),
            std::string::npos)
      << blocked.message();
  EXPECT_NE(blocked.message().find("chmod o+x " + top.string()), std::string::npos);

  std::filesystem::permissions(top, std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  // Now only broker/ (0755 from the test's umask, or 0700) decides.
  std::filesystem::permissions(top / "state" / "broker", std::filesystem::perms::owner_all);
  Status inner = CheckReachableBy(*nobody, top / "state" / "broker", "runs the instances");
  EXPECT_NE(inner.message().find("may not search " + (top / "state" / "broker").string()),
            std::string::npos)
      << inner.message();
  std::filesystem::permissions(top / "state" / "broker", std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  EXPECT_TRUE(CheckReachableBy(*nobody, top / "state" / "broker", "runs the instances").ok());
  std::filesystem::remove_all(top);
}

}  // namespace
}  // namespace klutch::core::process_test
