#include "sandbox/processes.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/file.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::sandbox {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

ProcessOptions Echo(const std::string& name, const fs::path& output, const std::string& text) {
  ProcessOptions p;
  p.name = name;
  p.spec.argv = {"/bin/sh", "-c", "echo " + text + "; exec sleep 60"};
  p.spec.output_file = output;
  p.grace = 1s;
  return p;
}

std::string Read(const fs::path& p) {
  auto text = core::ReadFile(p);
  return text.ok() ? *text : "";
}

// The README says every log is under .data/logs; a konnector's log file sits next to its
// credentials in konnectors/, so the log directory links to it under the process's name.
TEST(ProcessSet, AnOutputFileElsewhereIsLinkedIntoTheLogDirectory) {
  testing::TempDir dir("klutch-processes");
  ProcessSet processes;
  processes.LinkLogsInto(dir.path() / "logs");
  fs::create_directories(dir.path() / "konnectors");
  ASSERT_TRUE(
      processes
          .Start(Echo("konnector-app-1-klutch-bind-konnector",
                      dir.path() / "konnectors" / "konnector-app-1-klutch-bind-konnector.log",
                      "synced"))
          .ok());
  fs::path link = dir.path() / "logs" / "konnector-app-1-klutch-bind-konnector.log";
  EXPECT_TRUE(testing::Eventually([&] { return Read(link) == "synced\n"; }, 10s)) << Read(link);
  EXPECT_TRUE(fs::is_symlink(link));
  // Relative: the state directory may be moved.
  EXPECT_EQ(fs::read_symlink(link),
            fs::path("../konnectors/konnector-app-1-klutch-bind-konnector.log"));
  processes.StopAll();
}

TEST(ProcessSet, ALogInTheLogDirectoryItselfOrAnotherFileOfTheNameIsLeftAlone) {
  testing::TempDir dir("klutch-processes");
  ProcessSet processes;
  processes.LinkLogsInto(dir.path() / "logs");
  fs::create_directories(dir.path() / "logs");
  ASSERT_TRUE(processes.Start(Echo("backend", dir.path() / "logs" / "backend.log", "up")).ok());
  EXPECT_TRUE(testing::Eventually(
      [&] { return Read(dir.path() / "logs" / "backend.log") == "up\n"; }, 10s));
  EXPECT_FALSE(fs::is_symlink(dir.path() / "logs" / "backend.log"));

  // A regular file named as the link would be is not replaced.
  dir.Write("logs/manager.log", "an older log\n");
  ASSERT_TRUE(processes.Start(Echo("manager", dir.path() / "elsewhere.log", "new")).ok());
  EXPECT_TRUE(
      testing::Eventually([&] { return Read(dir.path() / "elsewhere.log") == "new\n"; }, 10s));
  EXPECT_EQ(Read(dir.path() / "logs" / "manager.log"), "an older log\n");

  // A stale link of a process's earlier run is replaced.
  processes.Stop("backend");
  fs::create_directories(dir.path() / "idp");
  fs::create_symlink("../nowhere.log", dir.path() / "logs" / "identity-provider.log");
  ASSERT_TRUE(
      processes.Start(Echo("identity-provider", dir.path() / "idp" / "glewlwyd.log", "idp")).ok());
  EXPECT_TRUE(testing::Eventually(
      [&] { return Read(dir.path() / "logs" / "identity-provider.log") == "idp\n"; }, 10s));
  processes.StopAll();
}

}  // namespace
}  // namespace klutch::sandbox
