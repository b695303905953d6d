// StateDir: the layout of an engine owner's state directory (`i/<n>/` per instance, holding its
// nodes and its record `instance.json`; `backups/<n>/`; `tls/`), the records' load, save and
// removal as JSON (the broker and the operator each keep their own record type). Removal is one
// rename and then deletion, so a crash never leaves half an instance. Thread-compatible (each
// instance's record is saved under its owner's lock).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::engines {

class StateDir {
 public:
  explicit StateDir(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }
  // Where the engines keep instances (EngineContext::instances_dir).
  std::filesystem::path InstancesDir() const { return root_ / "i"; }
  std::filesystem::path InstanceDir(int64_t number) const {
    return InstancesDir() / std::to_string(number);
  }
  std::filesystem::path BackupDir(int64_t number) const {
    return root_ / "backups" / std::to_string(number);
  }
  std::filesystem::path TlsDir() const { return root_ / "tls"; }

  // Creates the directories; kInternal naming the path on failure.
  core::Status Init() const;
  // Writes the record of instance `number` (i/<n>/instance.json, atomically, mode 0600).
  core::Status SaveJson(int64_t number, const machinery::Json& record) const;
  // Every instance.json under i/ that parses; the others are reported in `errors`.
  std::vector<machinery::Json> LoadAllJson(std::vector<std::string>* errors) const;
  // Removes the instance's directory and its backups.
  core::Status Remove(int64_t number) const;
  // Deletes what an interrupted Remove left and returns the highest instance number any
  // directory uses (so that a number is never given out twice, even for an instance whose
  // record is unreadable).
  int64_t CleanUp() const;

 private:
  std::filesystem::path root_;
};

}  // namespace klutch::engines
