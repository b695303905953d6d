#include "sandbox/processes.h"

#include "core/log.h"

namespace klutch::sandbox {

namespace {

core::SupervisorOptions SandboxSupervision() {
  core::SupervisorOptions options;
  options.poll_interval = std::chrono::milliseconds(200);
  options.initial_backoff = std::chrono::seconds(1);
  options.max_backoff = std::chrono::seconds(30);
  options.reset_after = std::chrono::minutes(1);
  options.stop_all_at_once = false;  // newest first, one after the other
  return options;
}

}  // namespace

ProcessSet::ProcessSet(ExitListener on_exit)
    : on_exit_(std::move(on_exit)),
      processes_(SandboxSupervision(), [this](const core::SupervisorEvent& e) { OnEvent(e); }) {}

ProcessSet::~ProcessSet() { StopAll(); }

void ProcessSet::OnEvent(const core::SupervisorEvent& event) {
  if (event.kind == core::SupervisorEvent::Kind::kRestartFailed) {
    KLUTCH_LOG(kWarn, "sandbox", "restarting {}: {}", event.name, event.error);
  } else if (event.kind == core::SupervisorEvent::Kind::kExited) {
    KLUTCH_LOG(kWarn, "sandbox", "{} exited with status {}", event.name, event.exit_code);
    if (on_exit_) on_exit_(event.name, event.exit_code);
  }
}

void ProcessSet::LinkLogsInto(const std::filesystem::path& dir) {
  core::MutexLock lock(mu_);
  log_dir_ = dir;
}

core::Status ProcessSet::Start(ProcessOptions options) {
  core::MutexLock lock(mu_);
  core::SupervisedProcess process;
  process.name = options.name;
  process.spec = options.spec;
  process.grace = options.grace;
  process.restart = options.restart;
  KLUTCH_RETURN_IF_ERROR(processes_.Start(std::move(process)));
  LinkLog(options);
  return core::Status::Ok();
}

bool ProcessSet::Stop(const std::string& name) { return processes_.Stop(name).has_value(); }

void ProcessSet::StopAll() { processes_.StopAll(); }

void ProcessSet::KillAll() { processes_.KillAll(); }

bool ProcessSet::Running(const std::string& name) const {
  auto info = processes_.Get(name);
  return info && info->pid > 0;
}

std::vector<ProcessInfo> ProcessSet::List() const {
  std::vector<ProcessInfo> out;
  for (const auto& info : processes_.List()) {
    out.push_back({info.name, info.pid, info.restarts, info.output_file.string()});
  }
  return out;
}

// A link that cannot be made is logged, not fatal: the process runs and its log exists where
// it was.
void ProcessSet::LinkLog(const ProcessOptions& options) {
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

}  // namespace klutch::sandbox
