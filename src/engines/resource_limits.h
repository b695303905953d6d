// ResourceLimiter: hard CPU and memory limits for the server processes of an instance, through
// the kernel's control groups (cgroup v1 cpu and memory controllers, or cgroup v2), where the
// machine lets this process manage them: a group per node under <root>/<controller>/<prefix>/,
// the node's server and its children moved into it (processes it forks later inherit it).
// Thread-safe (no state but its paths).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/status.h"

namespace klutch::engines {

class ResourceLimiter {
 public:
  // The limiter for `root` (usually /sys/fs/cgroup), its groups named below `prefix`; nullopt
  // when neither hierarchy can be written here (not root, no cgroup file system mounted).
  static std::optional<ResourceLimiter> Detect(const std::filesystem::path& root,
                                               const std::string& prefix);

  // Puts `pid` and every process whose parent it is into the group `name`, limited to `cpu`
  // cores (0: no limit) and `memory_bytes` (0: no limit). Idempotent.
  core::Status Apply(const std::string& name, pid_t pid, double cpu, int64_t memory_bytes) const;
  // Whether `pid` is in the group `name` (of the memory controller, or the v2 group).
  bool Contains(const std::string& name, pid_t pid) const;
  // Removes the group `name` (its processes must be gone); missing is fine.
  void Remove(const std::string& name) const;
  // "cgroup v1 (cpu, memory)" or "cgroup v2".
  std::string Describe() const;

 private:
  ResourceLimiter(std::filesystem::path root, std::string prefix, bool v2)
      : root_(std::move(root)), prefix_(std::move(prefix)), v2_(v2) {}
  std::filesystem::path Group(const std::string& controller, const std::string& name) const;

  std::filesystem::path root_;
  std::string prefix_;
  bool v2_ = false;
};

}  // namespace klutch::engines
