// Shutdown on SIGTERM/SIGINT for server binaries, as Kubernetes stops a Pod: the first signal
// starts an orderly shutdown (stop taking work, drain, release leases, exit 0); a second one
// exits at once with status 1.
//
// Call BlockShutdownSignals() first thing in main, before any thread starts, so every thread
// inherits the mask and the signal is only ever taken by WaitForShutdownSignal(). Thread-safe.
#pragma once

namespace klutch::serving {

// Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts later) and
// ignores SIGPIPE (a peer closing a socket is an error value, not a process kill).
void BlockShutdownSignals();

// Waits for SIGTERM or SIGINT and returns its number. From then on a second signal ends the
// process immediately (_exit(1)), for an operator who does not want to wait for the drain.
int WaitForShutdownSignal();

}  // namespace klutch::serving
