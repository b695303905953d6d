#include "cli/up.h"

#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "sandbox/sandbox.h"
#include "serving/shutdown.h"

namespace klutch::cli {

void AddUpFlags(CLI::App* cmd, UpFlags& f) {
  cmd->add_option("--state-dir,--data-dir", f.state_dir,
                  "Directory for the sandbox's state: clusters, identity provider, broker and "
                  "its data-service instances, logs")
      ->capture_default_str();
  cmd->add_option("--app-clusters", f.app_clusters, "How many App Clusters to run")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
}

int RunUp(const UpFlags& f) {
  // Keys, kubeconfigs and databases under the state directory are the user's alone.
  ::umask(077);
  serving::BlockShutdownSignals();
  auto started_at = std::chrono::steady_clock::now();
  std::cout << "klutch up: starting the sandbox in " << f.state_dir << "\n" << std::flush;
  auto sandbox = sandbox::Sandbox::Start(
      {.state_dir = f.state_dir, .app_clusters = f.app_clusters, .log = &std::cout});
  if (!sandbox.ok()) {
    std::cerr << "klutch up: " << sandbox.status().message() << "\n";
    return sandbox.status().reason() == core::Reason::kAlreadyExists ? 3 : 1;
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count();
  std::cout << (*sandbox)->Banner() << "(ready in " << static_cast<int>(seconds * 10) / 10.0
            << " s)\n"
            << std::flush;
  int signal = serving::WaitForShutdownSignal();
  std::cout << "\nklutch up: signal " << signal
            << ", stopping every process (data-service instances too)...\n"
            << std::flush;
  (*sandbox)->Stop();
  std::cout << "klutch up: stopped; `make up` resumes with the same state.\n";
  return 0;
}

}  // namespace klutch::cli
