// ProcessSupervisor: keeps long-running child processes running, the one supervisor of the
// broker's instance nodes (broker/supervisor.h) and the sandbox's processes
// (sandbox/processes.h). Each process is started (or adopted: a running process a previous
// owner left, watched but not a child), polled every `poll_interval`, and restarted with
// backoff when it exits: `initial_backoff` doubling to `max_backoff`, back to
// `initial_backoff` after it had been up longer than `reset_after` (up: its readiness probe
// answered, or started when it has none). A spawn that fails counts as a further exit. What
// happens is told to a listener as events (called from the watcher thread, outside every
// lock), so each owner logs in its own words. The destructor only stops watching: processes
// keep running unless Stop/StopAll ended them. Time and the OS calls are injected (Clock,
// Control), so tests run the backoff in simulated time. Thread-safe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/process.h"
#include "core/status.h"

namespace klutch::core {

struct SupervisorOptions {
  std::chrono::milliseconds poll_interval{100};
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
  std::chrono::milliseconds reset_after{60000};
  // StopAll: true signals every process at once and then waits for each (they shut down in
  // parallel); false stops one after the other, newest first, the others still supervised.
  bool stop_all_at_once = false;
  const Clock* clock = &RealClock::Get();
};

struct SupervisedProcess {
  std::string name;   // unique among the supervisor's processes
  std::string group;  // for GroupUp (e.g. the instance whose node this is); may be ""
  ProcessSpec spec;
  int stop_signal = 15;                    // SIGTERM
  std::chrono::milliseconds grace{10000};  // before SIGKILL, on Stop/StopAll
  bool restart = true;                     // false: forgotten when it exits
  // A quick probe that the process answers (called from the watcher thread while it
  // starts); empty: up as soon as it is started.
  std::function<bool()> ready;
  // Watch this running process (not a child of ours) instead of spawning one.
  std::optional<pid_t> adopt;
};

enum class SupervisedState { kStarting, kUp, kDown };

struct SupervisorEvent {
  enum class Kind { kExited, kReady, kRestarted, kRestartFailed };
  Kind kind = Kind::kExited;
  std::string name;
  std::string group;
  pid_t pid = -1;          // the process exited, started or answering; -1 for kRestartFailed
  int exit_code = -1;      // kExited: its exit status; -1 when it was adopted (not ours to reap)
  bool restarting = true;  // kExited: whether it will be restarted
  std::string error;       // kRestartFailed: why the spawn failed
};

struct SupervisedInfo {
  std::string name;
  std::string group;
  pid_t pid = -1;  // -1 while waiting to be restarted
  SupervisedState state = SupervisedState::kStarting;
  int restarts = 0;         // successful restarts since Start
  int failed_restarts = 0;  // restarts whose spawn failed
  int exits = 0;            // how often the process exited since Start
  std::filesystem::path output_file;
};

class ProcessSupervisor {
 public:
  // The OS calls the supervisor makes; tests substitute simulated processes.
  class Control {
   public:
    virtual ~Control() = default;
    virtual Result<pid_t> Spawn(const ProcessSpec& spec) = 0;
    // nullopt while the process runs; its exit status once it has gone (a child is reaped;
    // -1 for a process that is not a child).
    virtual std::optional<int> Exited(pid_t pid, bool child) = 0;
    virtual void Signal(pid_t pid, int signal) = 0;
    // core::StopProcess: true when it ended within `grace`.
    virtual bool Stop(pid_t pid, std::chrono::milliseconds grace, int signal) = 0;
    // SIGKILL to the process group of `pid`.
    virtual void KillGroup(pid_t pid) = 0;
    // The real calls of core/process.h.
    static Control& Os();
  };

  using Listener = std::function<void(const SupervisorEvent& event)>;

  explicit ProcessSupervisor(SupervisorOptions options, Listener listener = {},
                             Control* control = nullptr);  // nullptr: Control::Os()
  ~ProcessSupervisor();
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts (or adopts) the process and supervises it; returns once it exists, not when it
  // is ready. kAlreadyExists when one of that name is supervised; the spawn error otherwise
  // (then nothing is registered).
  Status Start(SupervisedProcess process);
  // Ends the named process (its stop signal, SIGKILL after its grace period) and forgets
  // it. nullopt when there was none; otherwise whether it ended within the grace period.
  std::optional<bool> Stop(const std::string& name);
  // Stops watching the named process and leaves it running. False when there was none.
  bool Forget(const std::string& name);
  // Ends every process (see SupervisorOptions::stop_all_at_once). Idempotent.
  void StopAll();
  // SIGKILLs the process group of every process, those a Stop is waiting for included.
  void KillAll();

  std::optional<SupervisedInfo> Get(const std::string& name) const;
  std::vector<SupervisedInfo> List() const;  // by name
  // Whether the group has a process and every one of its processes is up.
  bool GroupUp(const std::string& group) const;

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace klutch::core
