#include "core/process_supervisor.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>

#include "core/sync.h"

namespace klutch::core {

namespace {

using std::chrono::milliseconds;

class OsProcessControl final : public ProcessSupervisor::Control {
 public:
  Result<pid_t> Spawn(const ProcessSpec& spec) override { return SpawnProcess(spec); }
  std::optional<int> Exited(pid_t pid, bool /*child*/) override {
    if (pid <= 0) return -1;
    // An adopted process may be a child of ours after all (one forgotten and adopted again,
    // as an engine does when a node's role changes): reaped, it does not linger as a zombie
    // that still "exists". For any other process this is the existence check.
    return ReapIfExited(pid);
  }
  void Signal(pid_t pid, int signal) override {
    if (pid > 0) ::kill(pid, signal);
  }
  bool Stop(pid_t pid, milliseconds grace, int signal) override {
    return StopProcess(pid, grace, signal);
  }
  void KillGroup(pid_t pid) override {
    if (pid > 0) ::kill(-pid, SIGKILL);
  }
};

struct SupervisedEntry {
  SupervisedEntry(SupervisedProcess p, int start_order)
      : process(std::move(p)), order(start_order) {}
  const SupervisedProcess process;
  const int order;
  // Held across every look at or change of the process (spawn, reap, stop), so that a Stop
  // and a restart never race: once `stopped`, nothing is spawned for this entry.
  Mutex mu;
  bool stopped GUARDED_BY(mu) = false;
  bool child GUARDED_BY(mu) = true;
  MonoTime restart_at GUARDED_BY(mu){};
  MonoTime up_since GUARDED_BY(mu){};
  milliseconds backoff GUARDED_BY(mu){0};
  // Read without `mu` by KillAll and the listings.
  std::atomic<pid_t> pid{-1};
  std::atomic<SupervisedState> state{SupervisedState::kStarting};
  std::atomic<int> restarts{0};
  std::atomic<int> failed_restarts{0};
  std::atomic<int> exits{0};
};

SupervisedInfo InfoOf(const SupervisedEntry& e) {
  return SupervisedInfo{e.process.name, e.process.group,           e.pid.load(),
                        e.state.load(), e.restarts.load(),         e.failed_restarts.load(),
                        e.exits.load(), e.process.spec.output_file};
}

}  // namespace

ProcessSupervisor::Control& ProcessSupervisor::Control::Os() {
  static OsProcessControl control;
  return control;
}

class ProcessSupervisor::Impl {
 public:
  Impl(SupervisorOptions options, Listener listener, Control* control)
      : options_(options),
        clock_(*options.clock),
        listener_(std::move(listener)),
        control_(control != nullptr ? *control : Control::Os()) {
    watcher_ = std::thread([this] { Watch(); });
  }

  ~Impl() {
    {
      MutexLock lock(mu_);
      quit_ = true;
    }
    cv_.SignalAll();
    watcher_.join();
  }

  Status Start(SupervisedProcess process) {
    MutexLock lock(mu_);
    if (entries_.count(process.name)) {
      return AlreadyExists("process " + process.name + " is already running");
    }
    pid_t pid = -1;
    bool child = true;
    if (process.adopt) {
      pid = *process.adopt;
      child = false;
    } else {
      KLUTCH_ASSIGN_OR_RETURN(pid, control_.Spawn(process.spec));
    }
    auto entry = std::make_shared<SupervisedEntry>(std::move(process), next_order_++);
    {
      MutexLock entry_lock(entry->mu);
      entry->child = child;
      entry->backoff = options_.initial_backoff;
      entry->pid = pid;
      MarkStarted(*entry, clock_.MonotonicNow());
    }
    entries_[entry->process.name] = entry;
    return Status::Ok();
  }

  std::optional<bool> Stop(const std::string& name) {
    std::shared_ptr<SupervisedEntry> entry = Remove(name);
    if (entry == nullptr) return std::nullopt;
    pid_t pid = -1;
    {
      MutexLock lock(entry->mu);
      entry->stopped = true;
      pid = entry->pid;
    }
    bool ended = pid <= 0 || control_.Stop(pid, entry->process.grace, entry->process.stop_signal);
    DoneStopping(entry);
    return ended;
  }

  bool Forget(const std::string& name) {
    std::shared_ptr<SupervisedEntry> entry;
    {
      MutexLock lock(mu_);
      auto it = entries_.find(name);
      if (it == entries_.end()) return false;
      entry = it->second;
      entries_.erase(it);
    }
    MutexLock lock(entry->mu);
    entry->stopped = true;
    return true;
  }

  void StopAll() {
    if (!options_.stop_all_at_once) {
      std::vector<std::pair<int, std::string>> order;
      {
        MutexLock lock(mu_);
        for (const auto& [name, e] : entries_) order.emplace_back(e->order, name);
      }
      std::sort(order.rbegin(), order.rend());
      for (const auto& [unused, name] : order) Stop(name);
      return;
    }
    std::vector<std::shared_ptr<SupervisedEntry>> all;
    {
      MutexLock lock(mu_);
      for (auto& [name, e] : entries_) {
        all.push_back(e);
        stopping_.push_back(e);
      }
      entries_.clear();
    }
    // Signal all first, then wait: they shut down in parallel.
    std::vector<pid_t> pids;
    for (auto& e : all) {
      MutexLock lock(e->mu);
      e->stopped = true;
      pids.push_back(e->pid);
      if (e->pid > 0) control_.Signal(e->pid, e->process.stop_signal);
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (pids[i] > 0) control_.Stop(pids[i], all[i]->process.grace, all[i]->process.stop_signal);
      DoneStopping(all[i]);
    }
  }

  void KillAll() {
    MutexLock lock(mu_);
    for (const auto& [name, e] : entries_) control_.KillGroup(e->pid);
    for (const auto& e : stopping_) control_.KillGroup(e->pid);
  }

  std::optional<SupervisedInfo> Get(const std::string& name) const {
    MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return std::nullopt;
    return InfoOf(*it->second);
  }

  std::vector<SupervisedInfo> List() const {
    MutexLock lock(mu_);
    std::vector<SupervisedInfo> out;
    for (const auto& [name, e] : entries_) out.push_back(InfoOf(*e));
    return out;
  }

  bool GroupUp(const std::string& group) const {
    MutexLock lock(mu_);
    bool any = false;
    for (const auto& [name, e] : entries_) {
      if (e->process.group != group) continue;
      any = true;
      if (e->state != SupervisedState::kUp) return false;
    }
    return any;
  }

 private:
  void MarkStarted(SupervisedEntry& e, MonoTime now) REQUIRES(e.mu) {
    if (e.process.ready) {
      e.state = SupervisedState::kStarting;
    } else {
      e.state = SupervisedState::kUp;
      e.up_since = now;
    }
  }

  std::shared_ptr<SupervisedEntry> Remove(const std::string& name) {
    MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return nullptr;
    auto entry = it->second;
    entries_.erase(it);
    stopping_.push_back(entry);
    return entry;
  }

  void DoneStopping(const std::shared_ptr<SupervisedEntry>& entry) {
    MutexLock lock(mu_);
    stopping_.erase(std::remove(stopping_.begin(), stopping_.end(), entry), stopping_.end());
  }

  // Every poll_interval: look at each process once, then tell the listener.
  void Watch() {
    MonoTime next = clock_.MonotonicNow();
    while (true) {
      std::vector<std::shared_ptr<SupervisedEntry>> entries;
      {
        MutexLock lock(mu_);
        while (!quit_ && clock_.MonotonicNow() < next) clock_.WaitUntil(cv_, mu_, next);
        if (quit_) return;
        for (const auto& [name, e] : entries_) entries.push_back(e);
      }
      std::vector<SupervisorEvent> events;
      for (const auto& e : entries) Check(e, events);
      if (listener_) {
        for (const auto& event : events) listener_(event);
      }
      next = clock_.MonotonicNow() + options_.poll_interval;
    }
  }

  void Check(const std::shared_ptr<SupervisedEntry>& entry, std::vector<SupervisorEvent>& events) {
    SupervisedEntry& e = *entry;
    SupervisorEvent event{.name = e.process.name, .group = e.process.group};
    bool forget = false;
    {
      MutexLock lock(e.mu);
      if (e.stopped) return;
      MonoTime now = clock_.MonotonicNow();
      if (e.state == SupervisedState::kDown) {
        if (now < e.restart_at) return;
        auto pid = control_.Spawn(e.process.spec);
        if (!pid.ok()) {
          ++e.failed_restarts;
          ScheduleRestart(e, now);
          event.kind = SupervisorEvent::Kind::kRestartFailed;
          event.error = pid.status().message();
        } else {
          e.pid = *pid;
          e.child = true;
          ++e.restarts;
          MarkStarted(e, now);
          event.kind = SupervisorEvent::Kind::kRestarted;
          event.pid = *pid;
        }
      } else if (auto code = control_.Exited(e.pid, e.child)) {
        bool was_up = e.state == SupervisedState::kUp;
        ++e.exits;
        if (was_up && now - e.up_since > options_.reset_after) {
          e.backoff = options_.initial_backoff;
        }
        event.kind = SupervisorEvent::Kind::kExited;
        event.pid = e.pid;
        event.exit_code = *code;
        event.restarting = e.process.restart;
        e.pid = -1;
        e.state = SupervisedState::kDown;
        ScheduleRestart(e, now);
        if (!e.process.restart) {
          e.stopped = true;
          forget = true;
        }
      } else if (e.state == SupervisedState::kStarting && e.process.ready && e.process.ready()) {
        e.state = SupervisedState::kUp;
        e.up_since = now;
        event.kind = SupervisorEvent::Kind::kReady;
        event.pid = e.pid;
      } else {
        return;
      }
    }
    if (forget) {
      MutexLock lock(mu_);
      auto it = entries_.find(e.process.name);
      if (it != entries_.end() && it->second == entry) entries_.erase(it);
    }
    events.push_back(std::move(event));
  }

  void ScheduleRestart(SupervisedEntry& e, MonoTime now) REQUIRES(e.mu) {
    e.restart_at = now + e.backoff;
    e.backoff = std::min(e.backoff * 2, options_.max_backoff);
  }

  const SupervisorOptions options_;
  const Clock& clock_;
  const Listener listener_;
  Control& control_;
  mutable Mutex mu_;
  CondVar cv_;
  bool quit_ GUARDED_BY(mu_) = false;
  std::map<std::string, std::shared_ptr<SupervisedEntry>> entries_ GUARDED_BY(mu_);
  // Being stopped by Stop/StopAll, for KillAll.
  std::vector<std::shared_ptr<SupervisedEntry>> stopping_ GUARDED_BY(mu_);
  int next_order_ GUARDED_BY(mu_) = 0;
  std::thread watcher_;
};

ProcessSupervisor::ProcessSupervisor(SupervisorOptions options, Listener listener, Control* control)
    : impl_(std::make_unique<Impl>(options, std::move(listener), control)) {}
ProcessSupervisor::~ProcessSupervisor() = default;
Status ProcessSupervisor::Start(SupervisedProcess process) {
  return impl_->Start(std::move(process));
}
std::optional<bool> ProcessSupervisor::Stop(const std::string& name) { return impl_->Stop(name); }
bool ProcessSupervisor::Forget(const std::string& name) { return impl_->Forget(name); }
void ProcessSupervisor::StopAll() { impl_->StopAll(); }
void ProcessSupervisor::KillAll() { impl_->KillAll(); }
std::optional<SupervisedInfo> ProcessSupervisor::Get(const std::string& name) const {
  return impl_->Get(name);
}
std::vector<SupervisedInfo> ProcessSupervisor::List() const { return impl_->List(); }
bool ProcessSupervisor::GroupUp(const std::string& group) const { return impl_->GroupUp(group); }

}  // namespace klutch::core
