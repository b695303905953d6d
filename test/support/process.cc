#include "test/support/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace klutch::testing {

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& prefix) {
  std::random_device rd;
  for (int i = 0; i < 100; ++i) {
    fs::path p = fs::temp_directory_path() /
                 (prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(rd() % 1000000));
    std::error_code ec;
    if (fs::create_directory(p, ec)) {
      path_ = p;
      return;
    }
  }
  path_ = fs::temp_directory_path() / prefix;
  fs::create_directories(path_);
}

fs::path TempDir::Write(const std::string& name, const std::string& content) const {
  fs::path p = path_ / name;
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
  return p;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {

std::vector<std::string> MergedEnv(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

CommandResult RunShell(const std::string& script, const std::map<std::string, std::string>& env,
                       const fs::path& cwd, std::chrono::seconds timeout) {
  int out_pipe[2], err_pipe[2];
  CommandResult res;
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return res;
  std::vector<std::string> envv = MergedEnv(env);
  std::vector<std::string> argv = {"/bin/bash", "-c", script};
  auto cargv = CStrings(argv);
  auto cenv = CStrings(envv);
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    close(out_pipe[0]);
    close(err_pipe[0]);
    if (chdir(cwd.c_str()) != 0) _exit(127);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      res.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min<long>(left, 1000)));
    if (n <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t r = read(fds[i].fd, buf, sizeof(buf));
      if (r <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? res.out : res.err).append(buf, static_cast<size_t>(r));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) close(f.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  // Stray children of the script (background jobs) go with it.
  kill(-pid, SIGKILL);
  if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) res.exit_code = 128 + WTERMSIG(status);
  return res;
}

ChildProcess::ChildProcess(std::vector<std::string> argv, const fs::path& log_file,
                           const std::map<std::string, std::string>& env) {
  std::vector<std::string> envv = MergedEnv(env);
  auto cargv = CStrings(argv);
  auto cenv = CStrings(envv);
  pid_ = fork();
  if (pid_ == 0) {
    setpgid(0, 0);
    int fd = open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    if (!Signal(SIGTERM, std::chrono::seconds(5))) Signal(SIGKILL, std::chrono::seconds(5));
  }
}

bool ChildProcess::running() {
  if (reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = status;
  }
  return !reaped_;
}

std::optional<int> ChildProcess::Signal(int signal, std::chrono::seconds timeout) {
  if (reaped_) return 0;
  kill(-pid_, signal);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      status_ = status;
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return std::nullopt;
}

std::optional<int> ChildProcess::exit_code() const {
  if (!reaped_) return std::nullopt;
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  return 128 + WTERMSIG(status_);
}

std::string ReadFileOrEmpty(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::unique_ptr<ApiServerProcess> ApiServerProcess::Start(const fs::path& data_dir,
                                                          std::vector<std::string> extra_args,
                                                          std::string* error) {
  auto p = std::unique_ptr<ApiServerProcess>(new ApiServerProcess());
  p->data_dir_ = data_dir;
  fs::create_directories(data_dir);
  std::vector<std::string> argv = {std::string(KLUTCH_BIN_DIR) + "/klutch",
                                   "apiserver",
                                   "--data-dir",
                                   data_dir.string(),
                                   "--listen",
                                   "127.0.0.1:0"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  fs::path log = data_dir / "apiserver.log";
  std::error_code ec;
  fs::remove(data_dir / "admin.kubeconfig", ec);
  fs::remove(log, ec);
  p->child_ = std::make_unique<ChildProcess>(argv, log);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text = ReadFileOrEmpty(log);
    auto pos = text.find("ready: ");
    if (pos != std::string::npos && text.find('\n', pos) != std::string::npos) {
      auto end = text.find(' ', pos + 7);
      p->url_ = text.substr(pos + 7, end - pos - 7);
      return p;
    }
    if (!p->child_->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (error) *error = "apiserver did not become ready; log:\n" + ReadFileOrEmpty(log);
  return nullptr;
}

std::string ApiServerProcess::log() const { return ReadFileOrEmpty(data_dir_ / "apiserver.log"); }

std::vector<std::string> SplitYamlDocuments(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> docs(1);
  for (std::string line; std::getline(in, line);) {
    if (line == "---" || line.starts_with("--- ")) {
      docs.emplace_back();
    } else {
      docs.back() += line + "\n";
    }
  }
  return docs;
}

}  // namespace klutch::testing
