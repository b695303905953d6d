#include "engines/supervisor.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <optional>

#include "core/file.h"
#include "core/log.h"
#include "core/strings.h"

namespace klutch::engines {

namespace {

// The PID in `pid_file` when it names a live process whose command line contains `match`;
// with find_by_match, any process whose command line contains it.
std::optional<pid_t> FindRunningNode(const NodeSpec& spec) {
  if (spec.find_by_match && !spec.match.empty()) return FindProcess(spec.match);
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

// Node `node` of instance `instance` is supervised as "<instance>/<node>" in group
// `instance` (instance IDs never hold a slash: osb.h CheckId).
std::string NodeName(const std::string& instance, int node) {
  return fmt::format("{}/{}", instance, node);
}

int NodeIndex(const core::SupervisorEvent& event) {
  auto index = core::ParseInt64(std::string_view(event.name).substr(event.group.size() + 1));
  return index ? static_cast<int>(*index) : -1;
}

core::SupervisorOptions BrokerSupervision() {
  core::SupervisorOptions options;
  options.poll_interval = std::chrono::milliseconds(100);
  options.initial_backoff = std::chrono::milliseconds(200);
  options.max_backoff = std::chrono::milliseconds(10000);
  options.reset_after = std::chrono::seconds(60);
  options.stop_all_at_once = true;  // instances shut down in parallel
  return options;
}

}  // namespace

Supervisor::Supervisor(Listener listener)
    : listener_(std::move(listener)),
      processes_(BrokerSupervision(), [this](const core::SupervisorEvent& e) { OnEvent(e); }) {}

Supervisor::~Supervisor() = default;

void Supervisor::OnEvent(const core::SupervisorEvent& event) {
  using Kind = core::SupervisorEvent::Kind;
  int node = NodeIndex(event);
  switch (event.kind) {
    case Kind::kExited:
      KLUTCH_LOG(kWarn, "engines", "node {}/{} (pid {}) exited{}", event.group, node, event.pid,
                 event.restarting ? "; restarting" : "");
      if (listener_) {
        listener_(event.group, node, false,
                  fmt::format("node {} (pid {}) exited", node, event.pid));
      }
      break;
    case Kind::kRestarted:
      KLUTCH_LOG(kInfo, "engines", "restarted node {}/{} (pid {})", event.group, node, event.pid);
      break;
    case Kind::kReady:
      if (listener_) listener_(event.group, node, true, std::string());
      break;
    case Kind::kRestartFailed:
      break;
  }
}

core::Status Supervisor::Start(const std::string& instance, int node, NodeSpec spec) {
  core::SupervisedProcess process;
  process.name = NodeName(instance, node);
  process.group = instance;
  process.spec = std::move(spec.process);
  process.stop_signal = spec.stop_signal;
  process.grace = std::chrono::seconds(30);
  process.ready = std::move(spec.ready);
  process.restart = spec.restart;
  process.adopt = FindRunningNode(spec);
  if (process.adopt) {
    KLUTCH_LOG(kInfo, "engines", "adopted running node {}/{} (pid {})", instance, node,
               *process.adopt);
  }
  // A node started again replaces the one watched under its name (as an engine that
  // provisions a failed instance again does); its process was adopted above when it runs.
  processes_.Forget(process.name);
  return processes_.Start(std::move(process));
}

bool Supervisor::Stop(const std::string& instance, int node) {
  return processes_.Stop(NodeName(instance, node)).value_or(true);
}

int Supervisor::Exits(const std::string& instance, int node) const {
  auto info = processes_.Get(NodeName(instance, node));
  return info ? info->exits : 0;
}

bool Supervisor::Alive(const std::string& instance, int node) const {
  return processes_.Get(NodeName(instance, node)).has_value();
}

void Supervisor::StopAll() { processes_.StopAll(); }

bool Supervisor::InstanceUp(const std::string& instance) const {
  return processes_.GroupUp(instance);
}

NodeCounts Supervisor::Counts() const {
  NodeCounts c;
  for (const auto& info : processes_.List()) {
    if (info.state == core::SupervisedState::kUp) ++c.up;
    if (info.state == core::SupervisedState::kStarting) ++c.starting;
    if (info.state == core::SupervisedState::kDown) ++c.down;
    c.restarts += info.restarts + info.failed_restarts;
  }
  return c;
}

}  // namespace klutch::engines
