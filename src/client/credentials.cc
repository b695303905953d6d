#include "client/credentials.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"

extern char** environ;

namespace klutch::client {
namespace {

using machinery::Json;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr size_t kMaxPluginStdout = 4u << 20;
constexpr size_t kMaxPluginStderr = 64u << 10;
constexpr size_t kStderrExcerpt = 1024;
constexpr auto kTokenFileStatInterval = std::chrono::seconds(1);
// mtimes can be coarser than rotations; re-read anyway this often.
constexpr auto kTokenFileRereadInterval = std::chrono::seconds(60);

core::Status Unauthorized(std::string message) {
  return core::Status(core::Reason::kUnauthorized, std::move(message));
}

// Closes a file descriptor on scope exit.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

struct ProcessResult {
  int spawn_errno = 0;  // posix_spawn failed with this
  bool timed_out = false;
  bool stdout_overflow = false;
  bool exited = false;
  int exit_code = 0;
  int signal = 0;
  std::string out;
  std::string err;
};

// Runs `argv` with `envp`, stdin from /dev/null, in its own process group; collects stdout
// and (the start of) stderr; kills the group after `timeout` or when stdout grows too large.
core::Result<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                       const std::vector<std::string>& envp, milliseconds timeout) {
  ProcessResult result;
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return core::Internal(fmt::format("exec: pipe: {}", std::strerror(errno)));
  }
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    return core::Internal(fmt::format("exec: pipe: {}", std::strerror(errno)));
  }
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (const auto& e : envp) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t mask;
  sigemptyset(&mask);
  posix_spawnattr_setsigmask(&attr, &mask);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);  // its own group, so a timeout kills its children too
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, cargv[0], &actions, &attr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    result.spawn_errno = rc;
    return result;
  }
  out_w.Close();
  err_w.Close();

  const auto deadline = steady_clock::now() + timeout;
  pollfd fds[2] = {{out_r.get(), POLLIN, 0}, {err_r.get(), POLLIN, 0}};
  int open_fds = 2;
  bool kill_group = false;
  char buf[16384];
  while (open_fds > 0) {
    auto left = std::chrono::ceil<milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = kill_group = true;
      break;
    }
    int n = ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (n < 0) {
      if (errno == EINTR) continue;
      kill_group = true;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_fds;
        continue;
      }
      std::string& sink = i == 0 ? result.out : result.err;
      size_t cap = i == 0 ? kMaxPluginStdout + 1 : kMaxPluginStderr;
      if (sink.size() < cap)
        sink.append(buf, std::min(static_cast<size_t>(got), cap - sink.size()));
    }
    if (result.out.size() > kMaxPluginStdout) {
      result.stdout_overflow = kill_group = true;
      break;
    }
  }
  if (kill_group) ::kill(-pid, SIGKILL);

  // Reap. The pipes may close before the process ends (or never, if a grandchild keeps them),
  // so wait with the same deadline and kill the group when it passes.
  int status = 0;
  while (true) {
    pid_t r = ::waitpid(pid, &status, kill_group ? 0 : WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return core::Internal(fmt::format("exec: waitpid: {}", std::strerror(errno)));
    if (steady_clock::now() >= deadline) {
      result.timed_out = kill_group = true;
      ::kill(-pid, SIGKILL);
      continue;
    }
    struct timespec pause = {0, 5'000'000};
    ::nanosleep(&pause, nullptr);
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

// KUBERNETES_EXEC_INFO: the ExecCredential spec handed to the plugin.
std::string ExecInfo(const ExecConfig& exec, const RestConfig& config) {
  Json spec = {{"interactive", false}};
  if (exec.provide_cluster_info) {
    Json cluster = {{"server", config.server}};
    if (!config.tls_server_name.empty()) cluster["tls-server-name"] = config.tls_server_name;
    if (config.insecure_skip_tls_verify) cluster["insecure-skip-tls-verify"] = true;
    if (!config.ca_pem.empty()) {
      cluster["certificate-authority-data"] = core::Base64Encode(config.ca_pem);
    }
    if (config.disable_compression) cluster["disable-compression"] = true;
    spec["cluster"] = std::move(cluster);
  }
  Json info = {{"apiVersion", exec.api_version}, {"kind", "ExecCredential"}, {"spec", spec}};
  return machinery::Dump(info);
}

// This process's environment, then the plugin's env entries, then KUBERNETES_EXEC_INFO; a
// later entry replaces an earlier one of the same name.
std::vector<std::string> PluginEnvironment(const ExecConfig& exec, const std::string& info) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env.emplace_back(*e);
  auto set = [&](const std::string& name, const std::string& value) {
    std::string prefix = name + "=";
    std::erase_if(env, [&](const std::string& e) { return e.starts_with(prefix); });
    env.push_back(prefix + value);
  };
  for (const auto& [name, value] : exec.env) set(name, value);
  set("KUBERNETES_EXEC_INFO", info);
  return env;
}

std::string StderrExcerpt(const std::string& err) {
  std::string_view trimmed = core::Trim(err);
  if (trimmed.size() <= kStderrExcerpt) return std::string(trimmed);
  return std::string(trimmed.substr(0, kStderrExcerpt)) + "...";
}

std::string WithHint(std::string message, const ExecConfig& exec) {
  if (!exec.install_hint.empty()) message += "\n\n" + exec.install_hint;
  return message;
}

std::string Seconds(milliseconds d) {
  if (d.count() % 1000 == 0) return fmt::format("{}s", d.count() / 1000);
  return fmt::format("{}ms", d.count());
}

core::Status ValidateExecConfig(const ExecConfig& exec) {
  if (exec.command.empty()) return core::Invalid("exec.command: Required value");
  if (exec.api_version != kExecV1 && exec.api_version != kExecV1Beta1) {
    return core::Invalid(
        fmt::format("exec.apiVersion: Unsupported value: \"{}\": supported values: \"{}\", \"{}\"",
                    exec.api_version, kExecV1, kExecV1Beta1));
  }
  const std::string& mode = exec.interactive_mode;
  if (mode == "Always") {
    return core::Invalid(
        "exec.interactiveMode: interactiveMode Always needs a terminal for the plugin, and "
        "klutch never gives plugins one; use Never or IfAvailable");
  }
  if (!mode.empty() && mode != "Never" && mode != "IfAvailable") {
    return core::Invalid(
        fmt::format("exec.interactiveMode: Unsupported value: \"{}\": supported values: \"Never\", "
                    "\"IfAvailable\", \"Always\"",
                    mode));
  }
  if (exec.timeout.count() <= 0) return core::Invalid("exec timeout must be positive");
  return core::Status::Ok();
}

// The ExecCredential a plugin printed -> credentials, or why it is unusable.
core::Result<ExecResult> ParseExecCredential(const ExecConfig& exec, std::string_view out) {
  const std::string prefix = fmt::format("getting credentials: exec plugin \"{}\"", exec.command);
  auto parsed = machinery::ParseJson(out);
  if (!parsed.ok()) {
    return Unauthorized(fmt::format("{} printed malformed ExecCredential JSON: {}", prefix,
                                    parsed.status().message()));
  }
  const Json& cred = *parsed;
  if (!cred.is_object()) {
    return Unauthorized(prefix + " printed JSON that is not an ExecCredential object");
  }
  std::string api_version = machinery::ApiVersionOf(cred);
  if (api_version != exec.api_version) {
    return Unauthorized(
        fmt::format("{} is configured to use API version {}, plugin returned version \"{}\"",
                    prefix, exec.api_version, api_version));
  }
  std::string kind = machinery::Kind(cred);
  if (kind != "ExecCredential") {
    return Unauthorized(
        fmt::format("{} returned kind \"{}\", expected \"ExecCredential\"", prefix, kind));
  }
  const Json* status = machinery::Find(cred, {"status"});
  if (status == nullptr || !status->is_object()) {
    return Unauthorized(prefix + " didn't return a status field");
  }
  auto field = [&](std::string_view key, std::string& out_value) -> core::Status {
    auto it = status->find(key);
    if (it == status->end() || it->is_null()) return core::Status::Ok();
    const auto* text = it->get_ptr<const std::string*>();
    if (text == nullptr) {
      return Unauthorized(fmt::format("{} returned a non-string status.{}", prefix, key));
    }
    out_value = *text;
    return core::Status::Ok();
  };
  ExecResult result;
  std::string expiration;
  KLUTCH_RETURN_IF_ERROR(field("token", result.material.bearer_token));
  KLUTCH_RETURN_IF_ERROR(field("clientCertificateData", result.material.cert_pem));
  KLUTCH_RETURN_IF_ERROR(field("clientKeyData", result.material.key_pem));
  KLUTCH_RETURN_IF_ERROR(field("expirationTimestamp", expiration));
  const AuthMaterial& m = result.material;
  if (m.cert_pem.empty() != m.key_pem.empty()) {
    return Unauthorized(prefix + " returned only certificate or key, not both");
  }
  if (m.bearer_token.empty() && m.cert_pem.empty()) {
    return Unauthorized(prefix + " didn't return a token or cert/key pair");
  }
  if (!expiration.empty()) {
    result.expiry = core::ParseTime(expiration);
    if (!result.expiry) {
      return Unauthorized(
          fmt::format("{} returned an invalid status.expirationTimestamp \"{}\" (want RFC 3339)",
                      prefix, expiration));
    }
  }
  return result;
}

bool StatFile(const std::string& path, int64_t& mtime_ns, int64_t& size, uint64_t& inode,
              uint64_t& device, std::string& error) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {  // follows the kubelet's ..data symlinks
    error = std::strerror(errno);
    return false;
  }
  mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  size = st.st_size;
  inode = st.st_ino;
  device = st.st_dev;
  return true;
}

}  // namespace

core::Result<ExecResult> RunExecPlugin(const ExecConfig& exec, const RestConfig& cluster) {
  try {
    KLUTCH_RETURN_IF_ERROR(ValidateExecConfig(exec));
    std::vector<std::string> argv{exec.command};
    argv.insert(argv.end(), exec.args.begin(), exec.args.end());
    auto run = RunProcess(argv, PluginEnvironment(exec, ExecInfo(exec, cluster)), exec.timeout);
    if (!run.ok()) return run.status();
    const ProcessResult& p = *run;
    const std::string cmd = exec.command;
    if (p.spawn_errno == ENOENT) {
      std::string msg = fmt::format("getting credentials: exec: executable \"{}\" not found", cmd);
      if (!exec.install_hint.empty()) {
        msg +=
            "\n\nIt looks like you are trying to use a client-go credential plugin that is "
            "not installed.\n\n" +
            exec.install_hint;
      }
      return Unauthorized(std::move(msg));
    }
    if (p.spawn_errno != 0) {
      return Unauthorized(WithHint(fmt::format("getting credentials: exec: starting \"{}\": {}",
                                               cmd, std::strerror(p.spawn_errno)),
                                   exec));
    }
    std::string err = StderrExcerpt(p.err);
    std::string err_suffix = err.empty() ? "" : ": " + err;
    if (p.timed_out) {
      return Unauthorized(fmt::format(
          "getting credentials: exec: executable \"{}\" did not finish within {} and was "
          "killed{}",
          cmd, Seconds(exec.timeout), err_suffix));
    }
    if (p.stdout_overflow) {
      return Unauthorized(fmt::format(
          "getting credentials: exec: executable \"{}\" printed more than {} bytes and was "
          "killed",
          cmd, kMaxPluginStdout));
    }
    if (!p.exited) {
      return Unauthorized(WithHint(
          fmt::format("getting credentials: exec: executable \"{}\" was killed by signal {}{}", cmd,
                      p.signal, err_suffix),
          exec));
    }
    if (p.exit_code != 0) {
      return Unauthorized(WithHint(
          fmt::format("getting credentials: exec: executable \"{}\" failed with exit code {}{}",
                      cmd, p.exit_code, err_suffix),
          exec));
    }
    return ParseExecCredential(exec, p.out);
  } catch (const std::exception& e) {
    return core::Internal(fmt::format("getting credentials: exec: {}", e.what()));
  }
}

Credentials::Credentials(RestConfig config, const core::Clock& clock)
    : config_(std::move(config)), clock_(clock) {}

core::Result<std::unique_ptr<Credentials>> Credentials::For(const RestConfig& config,
                                                            const core::Clock& clock) {
  if (config.exec) KLUTCH_RETURN_IF_ERROR(ValidateExecConfig(*config.exec));
  std::unique_ptr<Credentials> creds(new Credentials(config, clock));
  if (!config.bearer_token_file.empty()) {
    core::MutexLock lock(creds->mu_);
    core::Status status = creds->RefreshTokenFile();
    if (!status.ok() && config.bearer_token.empty()) return core::Invalid(status.message());
  }
  return creds;
}

AuthMaterial Credentials::Static() const {
  AuthMaterial m;
  m.bearer_token = config_.bearer_token;
  m.cert_pem = config_.cert_pem;
  m.key_pem = config_.key_pem;
  m.username = config_.username;
  m.password = config_.password;
  return m;
}

core::Result<AuthMaterial> Credentials::Current() {
  if (config_.exec) return CurrentFromExec();
  if (!config_.bearer_token_file.empty()) return CurrentFromTokenFile();
  return Static();
}

core::Status Credentials::RefreshTokenFile() {
  const core::SystemTime now = clock_.Now();
  const bool reread_due = !last_read_ || now - *last_read_ >= kTokenFileRereadInterval;
  if (!reread_due && last_stat_ && now - *last_stat_ < kTokenFileStatInterval) {
    return core::Status::Ok();
  }
  last_stat_ = now;
  const std::string& path = config_.bearer_token_file;
  FileState state;
  std::string error;
  if (!StatFile(path, state.mtime_ns, state.size, state.inode, state.device, error)) {
    return Unauthorized(fmt::format("unable to read token file \"{}\": {}", path, error));
  }
  state.valid = true;
  const FileState& old = file_state_;
  bool changed = !old.valid || old.mtime_ns != state.mtime_ns || old.size != state.size ||
                 old.inode != state.inode || old.device != state.device;
  if (!changed && !reread_due) return core::Status::Ok();
  auto content = ReadConfigFile(path);
  if (!content.ok()) {
    return Unauthorized(fmt::format("unable to read token file: {}", content.status().message()));
  }
  std::string token(core::Trim(*content));
  if (token.empty()) return Unauthorized(fmt::format("token file \"{}\" is empty", path));
  file_token_ = std::move(token);
  file_state_ = state;
  last_read_ = now;
  return core::Status::Ok();
}

core::Result<AuthMaterial> Credentials::CurrentFromTokenFile() {
  core::MutexLock lock(mu_);
  core::Status status = RefreshTokenFile();
  AuthMaterial m = Static();
  if (!file_token_.empty()) {
    m.bearer_token = file_token_;
  } else if (m.bearer_token.empty()) {
    return status.ok() ? Unauthorized("no token available") : status;
  }
  if (!status.ok()) {
    KLUTCH_LOG(kWarn, "client", "{}; using the last token read", status.message());
  }
  return m;
}

AuthMaterial Credentials::WithPlugin(const AuthMaterial& plugin) const {
  // The config's own token or basic auth wins over the plugin's token, as in kubectl (a request
  // that already carries Authorization is left alone); a plugin certificate replaces the
  // configured one.
  AuthMaterial m = Static();
  if (m.bearer_token.empty() && m.username.empty() && m.password.empty()) {
    m.bearer_token = plugin.bearer_token;
  }
  if (!plugin.cert_pem.empty()) {
    m.cert_pem = plugin.cert_pem;
    m.key_pem = plugin.key_pem;
  }
  return m;
}

bool Credentials::ExecCacheFresh() const {
  return exec_cache_ && (!exec_cache_->expiry || clock_.Now() < *exec_cache_->expiry);
}

core::Result<AuthMaterial> Credentials::CurrentFromExec() {
  {
    core::MutexLock lock(mu_);
    if (ExecCacheFresh()) return WithPlugin(exec_cache_->material);
  }
  // One plugin run at a time; whoever waited behind a run uses its result.
  core::MutexLock run_lock(run_mu_);
  {
    core::MutexLock lock(mu_);
    if (ExecCacheFresh()) return WithPlugin(exec_cache_->material);
  }
  auto result = RunExecPlugin(*config_.exec, config_);
  if (!result.ok()) return result.status();
  core::MutexLock lock(mu_);
  exec_cache_ = ExecCache{result->material, result->expiry};
  return WithPlugin(result->material);
}

void Credentials::InvalidateLocked() {
  exec_cache_.reset();
  last_stat_.reset();
  last_read_.reset();
}

void Credentials::Invalidate() {
  core::MutexLock lock(mu_);
  InvalidateLocked();
}

void Credentials::Invalidate(const AuthMaterial& rejected) {
  core::MutexLock lock(mu_);
  if (config_.exec) {
    // Already invalidated (maybe being refreshed), or already replaced: nothing to do.
    if (!exec_cache_ || !(WithPlugin(exec_cache_->material) == rejected)) return;
  } else if (!config_.bearer_token_file.empty()) {
    if (!file_token_.empty() && file_token_ != rejected.bearer_token) return;
  }
  InvalidateLocked();
}

}  // namespace klutch::client
