// StateDir: the layout of the broker's state directory (`i/<n>/instance.json` per instance,
// `backups/<n>/`, `tls/`) and the instance records' load, save and removal in it.
// Thread-compatible (each instance's record is saved under its owner's lock).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "broker/state.h"
#include "core/status.h"

namespace klutch::broker {

class StateDir {
 public:
  explicit StateDir(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path InstanceDir(int64_t number) const {
    return root_ / "i" / std::to_string(number);
  }
  std::filesystem::path BackupDir(int64_t number) const {
    return root_ / "backups" / std::to_string(number);
  }
  std::filesystem::path TlsDir() const { return root_ / "tls"; }

  // Creates the directories; kInternal naming the path on failure.
  core::Status Init() const;
  core::Status Save(const InstanceRecord& record) const;
  // Every instance.json under i/; unreadable files are reported in `errors`.
  std::vector<InstanceRecord> LoadAll(std::vector<std::string>* errors) const;
  // Removes the instance's directory and its backups.
  core::Status Remove(int64_t number) const;
  // Deletes what an interrupted Remove left and returns the highest instance number any
  // directory uses (so that a number is never given out twice, even for an instance whose
  // record is unreadable).
  int64_t CleanUp() const;

 private:
  std::filesystem::path root_;
};

}  // namespace klutch::broker
