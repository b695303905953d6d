#include "broker/supervisor.h"

#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <map>
#include <optional>
#include <thread>

#include "core/file.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/sync.h"

namespace klutch::broker {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

enum class NodeState { kStarting, kUp, kDown };

struct Node {
  // Held across every look at or change of the process (spawn, reap, stop), so that Stop and
  // a restart never race: after Stop nothing is spawned for this node.
  core::Mutex mu;
  bool stopped GUARDED_BY(mu) = false;
  NodeSpec spec;
  pid_t pid = -1;
  bool child = true;  // false: adopted from an earlier broker (cannot be reaped here)
  std::atomic<NodeState> state{NodeState::kStarting};
  Clock::time_point restart_at{};
  Clock::time_point up_since{};
  milliseconds backoff{200};
  std::atomic<int64_t> restarts{0};
  std::atomic<int> exits{0};
};

// The PID in `pid_file` when it names a live process whose command line contains `match`.
std::optional<pid_t> FindRunning(const NodeSpec& spec) {
  if (spec.pid_file.empty()) return std::nullopt;
  auto text = core::ReadFile(spec.pid_file);
  if (!text.ok()) return std::nullopt;
  auto first = core::Trim(std::string_view(*text).substr(0, text->find('\n')));
  auto pid = core::ParseInt64(first);
  if (!pid || *pid <= 1 || !core::ProcessExists(static_cast<pid_t>(*pid))) return std::nullopt;
  std::string cmdline = core::Join(core::ProcessCommandLine(static_cast<pid_t>(*pid)), " ");
  if (cmdline.find(spec.match) == std::string::npos) return std::nullopt;
  return static_cast<pid_t>(*pid);
}

bool Alive(Node& node) {
  if (node.pid <= 0) return false;
  if (node.child) return !core::ReapIfExited(node.pid).has_value();
  return core::ProcessExists(node.pid);
}

}  // namespace

class Supervisor::Impl {
 public:
  explicit Impl(Listener listener) : listener_(std::move(listener)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Impl() {
    {
      core::MutexLock lock(mu_);
      stopping_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }

  core::Status Start(const std::string& instance, int index, NodeSpec spec) {
    auto node = std::make_shared<Node>();
    node->spec = std::move(spec);
    if (auto running = FindRunning(node->spec)) {
      node->pid = *running;
      node->child = false;
      KLUTCH_LOG(kInfo, "broker", "adopted running node {}/{} (pid {})", instance, index,
                 node->pid);
    } else {
      KLUTCH_ASSIGN_OR_RETURN(node->pid, core::SpawnProcess(node->spec.process));
    }
    core::MutexLock lock(mu_);
    nodes_[{instance, index}] = node;
    return core::Status::Ok();
  }

  bool Stop(const std::string& instance, int index) {
    std::shared_ptr<Node> node;
    {
      core::MutexLock lock(mu_);
      auto it = nodes_.find({instance, index});
      if (it == nodes_.end()) return true;
      node = it->second;
      nodes_.erase(it);
    }
    core::MutexLock lock(node->mu);
    node->stopped = true;
    return core::StopProcess(node->pid, std::chrono::seconds(30), node->spec.stop_signal);
  }

  void StopAll() {
    std::map<std::pair<std::string, int>, std::shared_ptr<Node>> nodes;
    {
      core::MutexLock lock(mu_);
      nodes.swap(nodes_);
    }
    // Signal all first, then wait: instances shut down in parallel.
    for (auto& [key, node] : nodes) {
      core::MutexLock lock(node->mu);
      node->stopped = true;
      if (node->pid > 0) ::kill(node->pid, node->spec.stop_signal);
    }
    for (auto& [key, node] : nodes) {
      core::MutexLock lock(node->mu);
      core::StopProcess(node->pid, std::chrono::seconds(30), node->spec.stop_signal);
    }
  }

  int Exits(const std::string& instance, int index) const {
    core::MutexLock lock(mu_);
    auto it = nodes_.find({instance, index});
    return it == nodes_.end() ? 0 : it->second->exits.load();
  }

  bool InstanceUp(const std::string& instance) const {
    core::MutexLock lock(mu_);
    bool any = false;
    for (const auto& [key, node] : nodes_) {
      if (key.first != instance) continue;
      any = true;
      if (node->state != NodeState::kUp) return false;
    }
    return any;
  }

  NodeCounts Counts() const {
    core::MutexLock lock(mu_);
    NodeCounts c;
    for (const auto& [key, node] : nodes_) {
      if (node->state == NodeState::kUp) ++c.up;
      if (node->state == NodeState::kStarting) ++c.starting;
      if (node->state == NodeState::kDown) ++c.down;
      c.restarts += node->restarts;
    }
    return c;
  }

 private:
  void Run() {
    while (true) {
      std::vector<std::pair<std::pair<std::string, int>, std::shared_ptr<Node>>> nodes;
      {
        core::MutexLock lock(mu_);
        if (stopping_) return;
        for (const auto& entry : nodes_) nodes.emplace_back(entry);
      }
      for (auto& [key, node] : nodes) Check(key.first, key.second, *node);
      core::MutexLock lock(mu_);
      if (stopping_) return;
      cv_.WaitFor(mu_, milliseconds(100));
    }
  }

  void Check(const std::string& instance, int index, Node& node) {
    std::optional<std::pair<bool, std::string>> notify;
    {
      core::MutexLock lock(node.mu);
      if (node.stopped) return;
      auto now = Clock::now();
      if (node.state == NodeState::kDown) {
        if (now < node.restart_at) return;
        auto pid = core::SpawnProcess(node.spec.process);
        ++node.restarts;
        if (!pid.ok()) {
          node.backoff = std::min(node.backoff * 2, milliseconds(10000));
          node.restart_at = now + node.backoff;
          return;
        }
        node.pid = *pid;
        node.child = true;
        node.state = NodeState::kStarting;
        KLUTCH_LOG(kInfo, "broker", "restarted node {}/{} (pid {})", instance, index, node.pid);
        return;
      }
      if (!Alive(node)) {
        bool was_up = node.state == NodeState::kUp;
        node.state = NodeState::kDown;
        ++node.exits;
        if (was_up && now - node.up_since > std::chrono::seconds(60)) {
          node.backoff = milliseconds(200);
        }
        node.restart_at = now + node.backoff;
        node.backoff = std::min(node.backoff * 2, milliseconds(10000));
        KLUTCH_LOG(kWarn, "broker", "node {}/{} (pid {}) exited; restarting", instance, index,
                   node.pid);
        notify = std::make_pair(false, fmt::format("node {} (pid {}) exited", index, node.pid));
      } else if (node.state == NodeState::kStarting && node.spec.ready && node.spec.ready()) {
        node.state = NodeState::kUp;
        node.up_since = now;
        notify = std::make_pair(true, std::string());
      }
    }
    // Outside the node's lock: the listener asks InstanceUp, which reads every node.
    if (notify && listener_) listener_(instance, index, notify->first, notify->second);
  }

  Listener listener_;
  mutable core::Mutex mu_;
  core::CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::map<std::pair<std::string, int>, std::shared_ptr<Node>> nodes_ GUARDED_BY(mu_);
  std::thread thread_;
};

Supervisor::Supervisor(Listener listener) : impl_(std::make_unique<Impl>(std::move(listener))) {}
Supervisor::~Supervisor() = default;
core::Status Supervisor::Start(const std::string& instance, int node, NodeSpec spec) {
  return impl_->Start(instance, node, std::move(spec));
}
bool Supervisor::Stop(const std::string& instance, int node) { return impl_->Stop(instance, node); }
int Supervisor::Exits(const std::string& instance, int node) const {
  return impl_->Exits(instance, node);
}
void Supervisor::StopAll() { impl_->StopAll(); }
bool Supervisor::InstanceUp(const std::string& instance) const {
  return impl_->InstanceUp(instance);
}
NodeCounts Supervisor::Counts() const { return impl_->Counts(); }

}  // namespace klutch::broker
