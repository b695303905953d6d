// Child processes: short commands whose output is wanted (RunProcess) and long-running
// servers that a supervisor watches (SpawnProcess), optionally as another user.
//
// Every child starts in a new session (its own process group), so signals sent to the
// parent's group (Ctrl-C) do not reach it and StopProcess can end the child with its own
// children. The environment is the parent's with `env` entries added or replaced.
// Thread-safe: fork happens with every argument prepared beforehand, and the child calls only
// async-signal-safe functions before exec.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace klutch::core {

// A local account to run a child as.
struct UserIds {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

// kNotFound naming the user when the account does not exist.
Result<UserIds> LookupUser(std::string_view name);

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is looked up on PATH when it has no '/'
  std::vector<std::string> env;   // "NAME=value", added to or replacing the parent's
  std::filesystem::path cwd;      // empty: the parent's
  std::optional<UserIds> user;    // setgid/setuid to this account before exec
  // Where the child's stdout and stderr go (appended; created 0600 by the child itself, after
  // it became `user`, and never through a symlink). Empty: /dev/null for SpawnProcess,
  // captured for RunProcess.
  std::filesystem::path output_file;
};

// Starts a long-running child and returns its PID; the caller reaps it (ReapIfExited) or
// ends it (StopProcess). kNotFound when the program does not exist, kInternal on fork
// failure.
Result<pid_t> SpawnProcess(const ProcessSpec& spec);

struct ProcessResult {
  int exit_code = -1;  // exit status, or 128 + signal when killed
  std::string output;  // stdout and stderr interleaved (capped at 4 MiB, the tail kept)
  bool timed_out = false;
};

// Runs a command to completion (the child dies with the calling thread, so that a tool never
// outlives a killed parent), feeding it `input` on stdin and capturing its output unless
// spec.output_file is set. After `timeout` the child's process group is killed and
// `timed_out` set. A non-zero exit is not an error here; kNotFound when the program does not
// exist.
Result<ProcessResult> RunProcess(const ProcessSpec& spec, std::chrono::milliseconds timeout,
                                 std::string_view input = {});

struct PipelineResult {
  std::vector<int> exit_codes;  // one per command, as ProcessResult::exit_code
  std::string output;           // every command's stderr and the last one's stdout (capped)
  bool timed_out = false;
};

// Runs `stages[0] | stages[1] | ...` to completion, as RunProcess runs one command (each
// dies with the calling thread; after `timeout` all are killed). The first reads /dev/null;
// output_file of the specs is ignored. A non-zero exit is not an error here.
Result<PipelineResult> RunPipeline(const std::vector<ProcessSpec>& stages,
                                   std::chrono::milliseconds timeout);

// Whether a process with this PID exists (also one of another user, or a zombie not yet
// reaped by its parent).
bool ProcessExists(pid_t pid);
// For a child of this process: reaps it when it has exited and returns its exit status
// (as ProcessResult::exit_code); nullopt while it runs. Not for non-children.
std::optional<int> ReapIfExited(pid_t pid);
// Sends `signal` (SIGTERM by default) to `pid` and its process group, waits up to `grace` for
// it to go (reaping it when it is a child), then sends SIGKILL to both. True when it ended
// within the grace period.
bool StopProcess(pid_t pid, std::chrono::milliseconds grace, int signal = 15);

// Whether `user` (with the credentials SpawnProcess gives a child: its uid and primary group,
// no supplementary groups) can reach the directory `dir`, i.e. search it and every directory
// above it; checked by a child running as `user`, so ACLs and mounts count as they will.
// kForbidden naming the first directory on the way it may not search, its mode and owner, and
// the fix; `role` says what the account does ("runs the data-service instances").
Status CheckReachableBy(const UserIds& user, const std::filesystem::path& dir,
                        std::string_view role);

// The argv of a running process as /proc reports it (empty when it is gone).
std::vector<std::string> ProcessCommandLine(pid_t pid);

}  // namespace klutch::core
