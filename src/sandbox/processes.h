// ProcessSet: the long-running processes of the sandbox (API servers, identity provider,
// backend, manager, broker, konnectors), each started from a core::ProcessSpec with its output
// appended to a log file, watched every 200 ms, and restarted with backoff (1 s doubling to
// 30 s, reset after a minute up) when it dies, on the one process supervisor
// (core/process_supervisor.h). Stop ends one; StopAll ends every one in the reverse order
// of their start (SIGTERM, SIGKILL after each one's grace period). With LinkLogsInto, one
// directory holds every process's log, also of those whose output file lies elsewhere (a
// konnector's sits next to its credentials). Thread-safe.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/process.h"
#include "core/process_supervisor.h"
#include "core/status.h"
#include "core/sync.h"

namespace klutch::sandbox {

struct ProcessOptions {
  std::string name;  // unique, e.g. "apiserver-control-plane", "konnector-app-2"
  core::ProcessSpec spec;
  // How long SIGTERM may take before SIGKILL (the broker stops its instances first).
  std::chrono::milliseconds grace{10000};
  bool restart = true;
};

struct ProcessInfo {
  std::string name;
  pid_t pid = -1;  // -1 while waiting to be restarted
  int restarts = 0;
  std::string log;  // the output file
};

class ProcessSet {
 public:
  // Called (from the watcher thread, outside the lock) when a process exits unexpectedly.
  using ExitListener = std::function<void(const std::string& name, int exit_code)>;
  explicit ProcessSet(ExitListener on_exit = {});
  ~ProcessSet();  // StopAll()
  ProcessSet(const ProcessSet&) = delete;
  ProcessSet& operator=(const ProcessSet&) = delete;

  // From now on, a process started with an output file outside `dir` also gets
  // `dir/<name>.log`, a relative symbolic link to that file (made when it starts; an existing
  // link of that name is replaced, any other file is left alone). `dir` is created.
  void LinkLogsInto(const std::filesystem::path& dir);
  // Starts the process now; kAlreadyExists when one of that name runs; the spawn error
  // otherwise (then nothing is registered).
  core::Status Start(ProcessOptions options);
  // Ends the named process and forgets it; false when there was none.
  bool Stop(const std::string& name);
  // Ends every process, newest first. Idempotent.
  void StopAll();
  // SIGKILLs the process group of every process, those a Stop is waiting for included; the
  // watcher may restart them (call it on the way out).
  void KillAll();
  bool Running(const std::string& name) const;
  std::vector<ProcessInfo> List() const;

 private:
  void OnEvent(const core::SupervisorEvent& event);
  // `log_dir_/<name>.log` -> the process's output file, when that lies elsewhere.
  void LinkLog(const ProcessOptions& options) REQUIRES(mu_);

  const ExitListener on_exit_;
  mutable core::Mutex mu_;
  std::filesystem::path log_dir_ GUARDED_BY(mu_);
  // Last: destroyed first, so that its watcher never calls OnEvent on members that are gone.
  core::ProcessSupervisor processes_;
};

}  // namespace klutch::sandbox
