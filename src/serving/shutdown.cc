#include "serving/shutdown.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <thread>

#include "core/log.h"

namespace klutch::serving {

namespace {
sigset_t ShutdownSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSet();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int WaitForShutdownSignal() {
  sigset_t set = ShutdownSet();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  KLUTCH_LOG(kInfo, "shutdown", "signal {} received: shutting down (again to exit at once)", sig);
  std::thread([set] {
    int again = 0;
    while (sigwait(&set, &again) != 0) {
    }
    _exit(1);
  }).detach();
  return sig;
}

}  // namespace klutch::serving
