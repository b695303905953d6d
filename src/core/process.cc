#include "core/process.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/strings.h"

extern char** environ;

namespace klutch::core {
namespace {

constexpr size_t kMaxOutput = 4u << 20;

// Waits for `pid` to end (through EINTR) and returns its raw wait status; -1 on failure.
int WaitFor(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

int DecodeWaitStatus(int status) {
  if (status == -1) return -1;  // WaitFor failed
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Everything the child needs, prepared before fork so that the child only makes
// async-signal-safe calls.
struct Prepared {
  std::string program;
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string cwd;
  std::string output;
  bool has_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

Result<std::string> FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) != 0) return NotFound(fmt::format("{}: not executable", name));
    return name;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (!dirs.empty()) {
    size_t colon = dirs.find(':');
    std::string_view dir = dirs.substr(0, colon);
    dirs = colon == std::string_view::npos ? std::string_view{} : dirs.substr(colon + 1);
    if (dir.empty()) continue;
    std::string candidate = fmt::format("{}/{}", dir, name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFound(fmt::format("{}: command not found on PATH", name));
}

Result<Prepared> Prepare(const ProcessSpec& spec) {
  if (spec.argv.empty()) return Invalid("process: empty argv");
  Prepared p;
  KLUTCH_ASSIGN_OR_RETURN(p.program, FindProgram(spec.argv[0]));
  p.args = spec.argv;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::string_view name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& add : spec.env) {
      if (std::string_view(add).substr(0, add.find('=')) == name) replaced = true;
    }
    if (!replaced) p.env.emplace_back(entry);
  }
  for (const auto& add : spec.env) p.env.push_back(add);
  for (auto& a : p.args) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  for (auto& e : p.env) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  p.cwd = spec.cwd.string();
  p.output = spec.output_file.string();
  if (spec.user) {
    p.has_user = true;
    p.uid = spec.user->uid;
    p.gid = spec.user->gid;
  }
  return p;
}

// In the child after fork: only async-signal-safe calls. Never returns.
// stdout_fd/stderr_fd < 0: both go to p.output (or /dev/null).
[[noreturn]] void ExecChild(const Prepared& p, int stdin_fd, int stdout_fd, int stderr_fd,
                            bool die_with_parent, pid_t parent) {
  ::setsid();
  // A tool run to completion (initdb, pg_dump, ...) must not outlive a killed parent and race
  // the operation that runs again after its restart.
  if (die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
  }
  if (stdin_fd >= 0) {
    ::dup2(stdin_fd, 0);
  } else {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, 0);
  }
  if (stdout_fd >= 0) {  // a capture pipe, or the pipe to the next command of a pipeline
    ::dup2(stdout_fd, 1);
    ::dup2(stderr_fd, 2);
  }
  // Close everything else the parent had open (sockets, files of other threads).
  ::close_range(3, ~0U, 0);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
  if (!p.cwd.empty() && ::chdir(p.cwd.c_str()) != 0) ::_exit(126);
  if (p.has_user) {
    if (::setgroups(0, nullptr) != 0 && ::getuid() == 0) ::_exit(126);
    if (::setgid(p.gid) != 0 || ::setuid(p.uid) != 0) ::_exit(126);
  }
  // The output file is opened as the child's own user and never through a symlink, so that a
  // file in a directory that user controls cannot point the parent's rights elsewhere.
  if (stdout_fd < 0) {
    int fd = -1;
    if (!p.output.empty()) {
      fd = ::open(p.output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    }
    if (fd < 0) fd = ::open("/dev/null", O_WRONLY);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      if (fd > 2) ::close(fd);
    }
  }
  ::execve(p.program.c_str(), p.argv.data(), p.envp.data());
  ::_exit(127);
}

}  // namespace

Result<UserIds> LookupUser(std::string_view name) {
  std::string n(name);
  struct passwd pw {};
  struct passwd* result = nullptr;
  std::vector<char> buffer(16384);
  if (::getpwnam_r(n.c_str(), &pw, buffer.data(), buffer.size(), &result) != 0 ||
      result == nullptr) {
    return NotFound(fmt::format("user {} does not exist on this machine", core::GoQuote(n)));
  }
  return UserIds{.uid = pw.pw_uid, .gid = pw.pw_gid, .name = n};
}

Status CheckReachableBy(const UserIds& user, const std::filesystem::path& dir,
                        std::string_view role) {
  namespace fs = std::filesystem;
  const fs::path target = fs::absolute(dir).lexically_normal();
  // One shell for the whole walk: it prints the first directory the account may not search.
  ProcessSpec spec{
      .argv = {"/bin/sh", "-c", "for d; do test -x \"$d\" || { printf %s \"$d\"; exit 1; }; done",
               "sh"},
      .user = user};
  fs::path walked;
  for (const fs::path& part : target) {
    walked /= part;
    spec.argv.push_back(walked.string());
  }
  KLUTCH_ASSIGN_OR_RETURN(ProcessResult r, RunProcess(spec, std::chrono::seconds(10)));
  if (r.exit_code == 0) return Status::Ok();
  if (r.exit_code != 1 || r.output.empty()) {
    return Internal(fmt::format("checking whether {} can reach {}: exit {}: {}", user.name,
                                target.string(), r.exit_code, r.output));
  }
  const std::string& blocked = r.output;
  std::string mode = "?", owner = "?";
  struct stat st {};
  if (::stat(blocked.c_str(), &st) == 0) {
    mode = fmt::format("{:04o}", st.st_mode & 07777);
    struct passwd pw {};
    struct passwd* found = nullptr;
    std::vector<char> buffer(16384);
    owner = ::getpwuid_r(st.st_uid, &pw, buffer.data(), buffer.size(), &found) == 0 && found
                ? pw.pw_name
                : std::to_string(st.st_uid);
  }
  return Forbidden(fmt::format(
      "the account {}, which {}, cannot reach {}: it may not search {} (mode {}, owner {}); "
      "choose a directory it can reach (for example under /var/lib or /srv), or allow it to "
      "pass with: chmod o+x {}",
      user.name, role, target.string(), blocked, mode, owner, blocked));
}

Result<pid_t> SpawnProcess(const ProcessSpec& spec) {
  KLUTCH_ASSIGN_OR_RETURN(Prepared p, Prepare(spec));
  pid_t pid = ::fork();
  if (pid < 0) return Internal(fmt::format("fork: {}", std::strerror(errno)));
  if (pid == 0) ExecChild(p, -1, -1, -1, false, 0);
  return pid;
}

Result<ProcessResult> RunProcess(const ProcessSpec& spec, std::chrono::milliseconds timeout,
                                 std::string_view input) {
  KLUTCH_ASSIGN_OR_RETURN(Prepared p, Prepare(spec));
  int in_pipe[2] = {-1, -1};
  int out_pipe[2] = {-1, -1};
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return Internal("pipe: " + std::string(strerror(errno)));
  bool capture = p.output.empty();
  if (capture && ::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return Internal("pipe: " + std::string(strerror(errno)));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) {
      if (fd >= 0) ::close(fd);
    }
    return Internal(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    const int out = capture ? out_pipe[1] : -1;
    ExecChild(p, in_pipe[0], out, out, true, parent);
  }
  ::close(in_pipe[0]);
  if (capture) ::close(out_pipe[1]);
  int in_fd = in_pipe[1];
  int out_fd = capture ? out_pipe[0] : -1;
  ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
  if (input.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }

  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  size_t written = 0;
  char buffer[65536];
  int status = 0;
  bool exited = false;
  while (true) {
    std::vector<pollfd> fds;
    if (out_fd >= 0) fds.push_back({.fd = out_fd, .events = POLLIN, .revents = 0});
    if (in_fd >= 0) fds.push_back({.fd = in_fd, .events = POLLOUT, .revents = 0});
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    if (fds.empty()) {
      // Output goes to a file: wait for the child itself.
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(left.count(), 5)));
      continue;
    }
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (const auto& f : fds) {
      if (f.fd == out_fd && (f.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        ssize_t got = ::read(out_fd, buffer, sizeof(buffer));
        if (got > 0) {
          result.output.append(buffer, static_cast<size_t>(got));
          if (result.output.size() > kMaxOutput) {
            result.output.erase(0, result.output.size() - kMaxOutput);
          }
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(out_fd);
          out_fd = -1;
        }
      } else if (f.fd == in_fd && (f.revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
        ssize_t put = ::write(in_fd, input.data() + written, input.size() - written);
        if (put > 0) written += static_cast<size_t>(put);
        if (put < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
        if (written >= input.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
      }
    }
    if (out_fd < 0 && in_fd < 0 && capture) {
      status = WaitFor(pid);
      exited = true;
      break;
    }
  }
  if (in_fd >= 0) ::close(in_fd);
  if (out_fd >= 0) ::close(out_fd);
  if (!exited) {
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    status = WaitFor(pid);
  }
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

Result<PipelineResult> RunPipeline(const std::vector<ProcessSpec>& stages,
                                   std::chrono::milliseconds timeout) {
  if (stages.empty()) return Invalid("pipeline: no commands");
  std::vector<Prepared> prepared;
  for (const auto& spec : stages) {
    KLUTCH_ASSIGN_OR_RETURN(Prepared p, Prepare(spec));
    prepared.push_back(std::move(p));
  }
  int capture[2] = {-1, -1};
  if (::pipe2(capture, O_CLOEXEC) != 0) return Internal("pipe: " + std::string(strerror(errno)));
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  int next_stdin = -1;  // the read end of the pipe from the previous command
  Status started = Status::Ok();
  for (size_t i = 0; i < prepared.size(); ++i) {
    int link[2] = {-1, -1};
    const bool last = i + 1 == prepared.size();
    if (!last && ::pipe2(link, O_CLOEXEC) != 0) {
      started = Internal("pipe: " + std::string(strerror(errno)));
      break;
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      ExecChild(prepared[i], next_stdin, last ? capture[1] : link[1], capture[1], true, parent);
    }
    if (next_stdin >= 0) ::close(next_stdin);
    next_stdin = link[0];
    if (link[1] >= 0) ::close(link[1]);
    if (pid < 0) {
      started = Internal(fmt::format("fork: {}", std::strerror(errno)));
      break;
    }
    pids.push_back(pid);
  }
  if (next_stdin >= 0) ::close(next_stdin);
  ::close(capture[1]);

  // The capture pipe ends when every command has exited (each held its write end).
  PipelineResult result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[65536];
  while (started.ok()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    pollfd fd{.fd = capture[0], .events = POLLIN, .revents = 0};
    int n = ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) {
      started = Internal(fmt::format("poll: {}", std::strerror(errno)));
      break;
    }
    if (n <= 0) continue;
    ssize_t got = ::read(capture[0], buffer, sizeof(buffer));
    if (got > 0) {
      result.output.append(buffer, static_cast<size_t>(got));
      if (result.output.size() > kMaxOutput) {
        result.output.erase(0, result.output.size() - kMaxOutput);
      }
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
      break;
    }
  }
  ::close(capture[0]);
  if (!started.ok() || result.timed_out) {
    for (pid_t pid : pids) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
  }
  for (pid_t pid : pids) result.exit_codes.push_back(DecodeWaitStatus(WaitFor(pid)));
  if (!started.ok()) return started;
  return result;
}

bool ProcessExists(pid_t pid) {
  if (pid <= 0) return false;
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

std::optional<int> ReapIfExited(pid_t pid) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return DecodeWaitStatus(status);
  if (r < 0 && errno == ECHILD) return ProcessExists(pid) ? std::nullopt : std::optional<int>(-1);
  return std::nullopt;
}

bool StopProcess(pid_t pid, std::chrono::milliseconds grace, int signal) {
  if (pid <= 0) return true;
  // A group leader gets the signal through its group, once: a process that takes a second
  // SIGTERM as "exit at once" (serving/shutdown.h) would otherwise skip its graceful stop.
  if (::getpgid(pid) == pid) {
    ::kill(-pid, signal);
  } else {
    ::kill(pid, signal);
  }
  // Done when the process and every member of its group are gone (a group member that
  // outlives its leader would keep files and ports).
  auto gone = [pid] {
    ReapIfExited(pid);
    return !ProcessExists(pid) && ::kill(-pid, 0) != 0;
  };
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (gone()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  for (int i = 0; i < 500 && !gone(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::vector<std::string> ProcessCommandLine(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/cmdline", pid), std::ios::binary);
  std::vector<std::string> args;
  std::string arg;
  while (std::getline(in, arg, '\0')) args.push_back(arg);
  return args;
}

}  // namespace klutch::core
