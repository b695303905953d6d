#include "engines/resource_limits.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <system_error>
#include <vector>

#include "core/file.h"
#include "core/strings.h"

namespace klutch::engines {
namespace {

namespace fs = std::filesystem;

core::Status WriteValue(const fs::path& file, const std::string& value) {
  std::ofstream out(file);
  out << value;
  out.close();
  if (!out) return core::Internal(fmt::format("write {} to {}", value, file.string()));
  return core::Status::Ok();
}

// `pid` and the processes whose parent it is (from /proc/<pid>/task/*/children).
std::vector<pid_t> WithChildren(pid_t pid) {
  std::vector<pid_t> out = {pid};
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(fmt::format("/proc/{}/task", pid), ec)) {
    auto text = core::ReadFile(task.path() / "children");
    if (!text.ok()) continue;
    for (auto word : core::Split(*text, ' ')) {
      if (auto child = core::ParseInt64(core::Trim(word)))
        out.push_back(static_cast<pid_t>(*child));
    }
  }
  return out;
}

bool Writable(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  return !ec && fs::exists(dir / "cgroup.procs");
}

}  // namespace

std::optional<ResourceLimiter> ResourceLimiter::Detect(const fs::path& root,
                                                       const std::string& prefix) {
  std::error_code ec;
  if (fs::exists(root / "memory" / "cgroup.procs", ec) &&
      fs::exists(root / "cpu" / "cgroup.procs", ec)) {
    if (Writable(root / "memory" / prefix) && Writable(root / "cpu" / prefix)) {
      return ResourceLimiter(root, prefix, false);
    }
    return std::nullopt;
  }
  if (fs::exists(root / "cgroup.controllers", ec)) {
    // v2: the controllers must be enabled for the groups below ours.
    if (!WriteValue(root / "cgroup.subtree_control", "+cpu +memory").ok()) return std::nullopt;
    if (!Writable(root / prefix)) return std::nullopt;
    if (!WriteValue(root / prefix / "cgroup.subtree_control", "+cpu +memory").ok()) {
      return std::nullopt;
    }
    return ResourceLimiter(root, prefix, true);
  }
  return std::nullopt;
}

fs::path ResourceLimiter::Group(const std::string& controller, const std::string& name) const {
  return v2_ ? root_ / prefix_ / name : root_ / controller / prefix_ / name;
}

core::Status ResourceLimiter::Apply(const std::string& name, pid_t pid, double cpu,
                                    int64_t memory_bytes) const {
  const fs::path memory = Group("memory", name);
  const fs::path cpus = Group("cpu", name);
  for (const fs::path& dir : {memory, cpus}) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return core::Internal(fmt::format("create {}: {}", dir.string(), ec.message()));
  }
  const int64_t period = 100000;  // microseconds
  const std::string quota =
      cpu > 0 ? std::to_string(static_cast<int64_t>(std::ceil(cpu * period))) : "";
  if (v2_) {
    KLUTCH_RETURN_IF_ERROR(
        WriteValue(memory / "memory.max", memory_bytes > 0 ? std::to_string(memory_bytes) : "max"));
    KLUTCH_RETURN_IF_ERROR(
        WriteValue(cpus / "cpu.max", fmt::format("{} {}", quota.empty() ? "max" : quota, period)));
  } else {
    KLUTCH_RETURN_IF_ERROR(WriteValue(memory / "memory.limit_in_bytes",
                                      memory_bytes > 0 ? std::to_string(memory_bytes) : "-1"));
    KLUTCH_RETURN_IF_ERROR(WriteValue(cpus / "cpu.cfs_period_us", std::to_string(period)));
    KLUTCH_RETURN_IF_ERROR(
        WriteValue(cpus / "cpu.cfs_quota_us", quota.empty() ? std::string("-1") : quota));
  }
  for (pid_t p : WithChildren(pid)) {
    // A child may have ended since it was listed: only the server itself must move.
    core::Status moved = WriteValue(memory / "cgroup.procs", std::to_string(p));
    if (!v2_ && moved.ok()) moved = WriteValue(cpus / "cgroup.procs", std::to_string(p));
    if (!moved.ok() && p == pid) return moved;
  }
  return core::Status::Ok();
}

bool ResourceLimiter::Contains(const std::string& name, pid_t pid) const {
  auto text = core::ReadFile(Group("memory", name) / "cgroup.procs");
  if (!text.ok()) return false;
  for (auto line : core::Split(*text, '\n')) {
    if (core::ParseInt64(core::Trim(line)) == pid) return true;
  }
  return false;
}

void ResourceLimiter::Remove(const std::string& name) const {
  std::error_code ec;
  fs::remove(Group("memory", name), ec);  // rmdir: a cgroup's files go with it
  if (!v2_) fs::remove(Group("cpu", name), ec);
}

std::string ResourceLimiter::Describe() const {
  return v2_ ? "cgroup v2" : "cgroup v1 (cpu, memory)";
}

}  // namespace klutch::engines
