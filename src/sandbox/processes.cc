#include "sandbox/processes.h"

#include <signal.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "core/log.h"
#include "core/sync.h"

namespace klutch::sandbox {

class ProcessSet::Impl {
 public:
  explicit Impl(ExitListener on_exit) : on_exit_(std::move(on_exit)) {
    watcher_ = std::thread([this] { Watch(); });
  }
  ~Impl() {
    StopAll();
    {
      core::MutexLock lock(mu_);
      quit_ = true;
    }
    cv_.SignalAll();
    watcher_.join();
  }

  void LinkLogsInto(const std::filesystem::path& dir) {
    core::MutexLock lock(mu_);
    log_dir_ = dir;
  }

  core::Status Start(ProcessOptions options) {
    core::MutexLock lock(mu_);
    if (entries_.count(options.name)) {
      return core::AlreadyExists("process " + options.name + " is already running");
    }
    KLUTCH_ASSIGN_OR_RETURN(pid_t pid, core::SpawnProcess(options.spec));
    LinkLog(options);
    Entry e;
    e.options = std::move(options);
    e.pid = pid;
    e.started = std::chrono::steady_clock::now();
    e.order = next_order_++;
    entries_[e.options.name] = std::move(e);
    return core::Status::Ok();
  }

  bool Stop(const std::string& name) {
    pid_t pid = -1;
    std::chrono::milliseconds grace{0};
    {
      core::MutexLock lock(mu_);
      auto it = entries_.find(name);
      if (it == entries_.end()) return false;
      pid = it->second.pid;
      grace = it->second.options.grace;
      entries_.erase(it);
      if (pid > 0) stopping_.insert(pid);
    }
    if (pid > 0) core::StopProcess(pid, grace);
    core::MutexLock lock(mu_);
    stopping_.erase(pid);
    return true;
  }

  void KillAll() {
    core::MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) {
      if (e.pid > 0) ::kill(-e.pid, SIGKILL);
    }
    for (pid_t pid : stopping_) ::kill(-pid, SIGKILL);
  }

  void StopAll() {
    std::vector<std::pair<int, std::string>> order;
    {
      core::MutexLock lock(mu_);
      for (const auto& [name, e] : entries_) order.emplace_back(e.order, name);
    }
    std::sort(order.rbegin(), order.rend());
    for (const auto& [unused, name] : order) Stop(name);
  }

  bool Running(const std::string& name) const {
    core::MutexLock lock(mu_);
    auto it = entries_.find(name);
    return it != entries_.end() && it->second.pid > 0;
  }

  std::vector<ProcessInfo> List() const {
    core::MutexLock lock(mu_);
    std::vector<ProcessInfo> out;
    for (const auto& [name, e] : entries_) {
      out.push_back({name, e.pid, e.restarts, e.options.spec.output_file.string()});
    }
    return out;
  }

 private:
  struct Entry {
    ProcessOptions options;
    pid_t pid = -1;
    int restarts = 0;
    std::chrono::milliseconds backoff{1000};
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point restart_at;
    int order = 0;
  };

  // `log_dir_/<name>.log` -> the process's output file, when that lies elsewhere. A link that
  // cannot be made is logged, not fatal: the process runs and its log exists where it was.
  void LinkLog(const ProcessOptions& options) REQUIRES(mu_) {
    namespace fs = std::filesystem;
    const fs::path& output = options.spec.output_file;
    if (log_dir_.empty() || output.empty()) return;
    std::error_code ec;
    fs::create_directories(log_dir_, ec);
    fs::path target = fs::absolute(output).lexically_normal();
    fs::path dir = fs::absolute(log_dir_).lexically_normal();
    if (target.parent_path() == dir) return;
    fs::path link = dir / (options.name + ".log");
    if (fs::is_symlink(fs::symlink_status(link, ec))) {
      fs::remove(link, ec);
    } else if (fs::exists(fs::symlink_status(link, ec))) {
      return;
    }
    fs::path relative = target.lexically_relative(dir);
    fs::create_symlink(relative.empty() ? target : relative, link, ec);
    if (ec) {
      KLUTCH_LOG(kWarn, "sandbox", "linking {} to {}: {}", link.string(), target.string(),
                 ec.message());
    }
  }

  // Every 200 ms: reap exited children, restart the ones whose backoff has passed.
  void Watch() {
    while (true) {
      std::vector<std::pair<std::string, int>> exited;
      {
        core::MutexLock lock(mu_);
        if (quit_) return;
        cv_.WaitFor(mu_, std::chrono::milliseconds(200));
        if (quit_) return;
        auto now = std::chrono::steady_clock::now();
        for (auto it = entries_.begin(); it != entries_.end();) {
          Entry& e = it->second;
          if (e.pid > 0) {
            std::optional<int> code = core::ReapIfExited(e.pid);
            if (!code) {
              if (now - e.started > std::chrono::minutes(1)) e.backoff = std::chrono::seconds(1);
              ++it;
              continue;
            }
            exited.emplace_back(e.options.name, *code);
            if (!e.options.restart) {
              it = entries_.erase(it);
              continue;
            }
            e.pid = -1;
            e.restart_at = now + e.backoff;
            e.backoff =
                std::min<std::chrono::milliseconds>(e.backoff * 2, std::chrono::seconds(30));
          }
          if (e.pid < 0 && now >= e.restart_at) {
            auto pid = core::SpawnProcess(e.options.spec);
            if (pid.ok()) {
              e.pid = *pid;
              e.started = now;
              ++e.restarts;
            } else {
              KLUTCH_LOG(kWarn, "sandbox", "restarting {}: {}", e.options.name,
                         pid.status().message());
              e.restart_at = now + e.backoff;
            }
          }
          ++it;
        }
      }
      for (const auto& [name, code] : exited) {
        KLUTCH_LOG(kWarn, "sandbox", "{} exited with status {}", name, code);
        if (on_exit_) on_exit_(name, code);
      }
    }
  }

  const ExitListener on_exit_;
  mutable core::Mutex mu_;
  core::CondVar cv_;
  std::map<std::string, Entry> entries_ GUARDED_BY(mu_);
  std::set<pid_t> stopping_ GUARDED_BY(mu_);  // being stopped by Stop, for KillAll
  int next_order_ GUARDED_BY(mu_) = 0;
  std::filesystem::path log_dir_ GUARDED_BY(mu_);
  bool quit_ GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

ProcessSet::ProcessSet(ExitListener on_exit) : impl_(std::make_unique<Impl>(std::move(on_exit))) {}
ProcessSet::~ProcessSet() = default;
void ProcessSet::LinkLogsInto(const std::filesystem::path& dir) { impl_->LinkLogsInto(dir); }
core::Status ProcessSet::Start(ProcessOptions options) { return impl_->Start(std::move(options)); }
bool ProcessSet::Stop(const std::string& name) { return impl_->Stop(name); }
void ProcessSet::StopAll() { impl_->StopAll(); }
bool ProcessSet::Running(const std::string& name) const { return impl_->Running(name); }
std::vector<ProcessInfo> ProcessSet::List() const { return impl_->List(); }
void ProcessSet::KillAll() { impl_->KillAll(); }

}  // namespace klutch::sandbox
