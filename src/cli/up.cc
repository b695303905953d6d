#include "cli/up.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "sandbox/sandbox.h"
#include "serving/shutdown.h"

namespace klutch::cli {

namespace {

// Ctrl-C / SIGTERM, as counted by the thread that takes them: the first cancels a start in
// progress or stops a running sandbox (instances included, which takes seconds); the second
// kills every process at once and exits. Static: the thread outlives RunUp's frame.
std::atomic<int> signals_taken{0};
std::atomic<sandbox::Sandbox*> running_sandbox{nullptr};

void TakeSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    if (signals_taken.fetch_add(1) + 1 == 1) {
      signals_taken.notify_all();
      continue;
    }
    static constexpr char kKilled[] =
        "\nklutch up: second signal, killing every process; the next `make up` adopts the "
        "data-service instances still running\n";
    (void)!::write(STDERR_FILENO, kKilled, sizeof(kKilled) - 1);
    if (sandbox::Sandbox* s = running_sandbox.load()) s->Kill();
    ::_exit(130);
  }
}

}  // namespace

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
  std::thread(TakeSignals).detach();
  auto started_at = std::chrono::steady_clock::now();
  std::cout << "klutch up: starting the sandbox in " << f.state_dir << "\n" << std::flush;
  auto sandbox = sandbox::Sandbox::Start({.state_dir = f.state_dir,
                                          .app_clusters = f.app_clusters,
                                          .log = &std::cout,
                                          .cancelled = [] { return signals_taken.load() > 0; }});
  if (!sandbox.ok()) {
    if (signals_taken.load() > 0) {
      std::cerr << "klutch up: start cancelled; what had started is stopped again.\n";
      return 130;
    }
    std::cerr << "klutch up: " << sandbox.status().message() << "\n";
    return sandbox.status().reason() == core::Reason::kAlreadyExists ? 3 : 1;
  }
  running_sandbox.store(sandbox->get());
  if (signals_taken.load() == 0) {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_at).count();
    std::cout << (*sandbox)->Banner() << "(ready in " << static_cast<int>(seconds * 10) / 10.0
              << " s)\n"
              << std::flush;
    signals_taken.wait(0);
  }
  std::cout << "\nklutch up: stopping every process (data-service instances too; Ctrl-C again "
               "to kill them at once)...\n"
            << std::flush;
  (*sandbox)->Stop();
  running_sandbox.store(nullptr);
  std::cout << "klutch up: stopped; `make up` resumes with the same state.\n";
  return 0;
}

}  // namespace klutch::cli
