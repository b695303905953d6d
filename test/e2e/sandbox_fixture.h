// What the e2e suites that run a whole `klutch up` sandbox share: starting it and reading what
// its banner says. Each suite starts one sandbox in SetUpTestSuite and shares it (a start costs
// seconds; see test/e2e/README.md).
#pragma once

#include <filesystem>
#include <regex>
#include <string>

#include "core/file.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {

// The sandbox's user, that user's password and the bind backend's URL, as the banner says them.
struct SandboxBanner {
  std::string user, password, backend;
};

// The text of `path` ("" when unreadable).
inline std::string ReadText(const std::filesystem::path& path) {
  auto text = core::ReadFile(path);
  return text.ok() ? *text : "";
}

// Starts `klutch up --state-dir <state> --app-clusters <app_clusters>` with its output in `log`
// and waits (at most 180 s) for its banner. Returns "" with `*up` running it and `*banner`
// filled, or why it did not start (with its output); `*up` is set either way.
inline std::string StartSandbox(const std::filesystem::path& bin_dir,
                                const std::filesystem::path& state, int app_clusters,
                                const std::filesystem::path& log, ChildProcess** up,
                                SandboxBanner* banner) {
  using namespace std::chrono_literals;
  *up = new ChildProcess({(bin_dir / "klutch").string(), "up", "--state-dir", state.string(),
                          "--app-clusters", std::to_string(app_clusters)},
                         log);
  ChildProcess* process = *up;
  bool ready = Eventually(
      [&] { return ReadText(log).find("(ready in") != std::string::npos || !process->running(); },
      180s);
  std::string text = ReadText(log);
  if (!ready || !process->running()) return "klutch up did not become ready:\n" + text;
  std::smatch m;
  if (std::regex_search(text, m, std::regex("user (\\S+) password (\\S+)"))) {
    banner->user = m[1];
    banner->password = m[2];
  }
  if (std::regex_search(text, m, std::regex("backend: (https://\\S+)"))) banner->backend = m[1];
  return "";
}

}  // namespace klutch::testing
