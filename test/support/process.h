// Test support: child processes (shell commands with captured output, long-running servers
// ended by PID) and temporary directories. For tests only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace klutch::testing {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "klutch-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  // Writes `content` to `name` below the directory (creating parent directories); returns
  // the full path.
  std::filesystem::path Write(const std::string& name, const std::string& content) const;

 private:
  std::filesystem::path path_;
};

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
};

// Runs `script` with bash -c in `cwd`, with `env` added to this process's environment;
// kills the whole process group after `timeout`.
CommandResult RunShell(const std::string& script, const std::map<std::string, std::string>& env,
                       const std::filesystem::path& cwd, std::chrono::seconds timeout);

// A long-running child (its own process group), stdout and stderr sent to files.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, const std::filesystem::path& log_file,
               const std::map<std::string, std::string>& env = {});
  ~ChildProcess();  // SIGTERM, then SIGKILL after 5 s
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // Sends `signal` to the process group; waits for exit up to `timeout`; returns the status.
  std::optional<int> Signal(int signal, std::chrono::seconds timeout);
  // Once reaped (by running() or Signal()): the exit status, or 128 + the signal that ended it.
  std::optional<int> exit_code() const;

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// A `klutch apiserver` process on 127.0.0.1 with a random port.
class ApiServerProcess {
 public:
  // Starts build/bin/klutch apiserver on `data_dir`; waits until it is ready. Aborts the
  // test (returns nullptr with `error` set) when it does not come up within 30 s.
  static std::unique_ptr<ApiServerProcess> Start(const std::filesystem::path& data_dir,
                                                 std::vector<std::string> extra_args,
                                                 std::string* error);
  const std::string& url() const { return url_; }
  std::filesystem::path kubeconfig() const { return data_dir_ / "admin.kubeconfig"; }
  ChildProcess& process() { return *child_; }
  std::string log() const;

 private:
  std::filesystem::path data_dir_;
  std::string url_;
  std::unique_ptr<ChildProcess> child_;
};

std::string ReadFileOrEmpty(const std::filesystem::path& p);

// The documents of a multi-document YAML text, split at "---" lines (each with its lines and
// their newlines; an empty text gives one empty document).
std::vector<std::string> SplitYamlDocuments(const std::string& text);

}  // namespace klutch::testing
