// StateDir: the broker's instance records (state.h) in an engines::StateDir (`i/<n>/instance.json`
// per instance, `backups/<n>/`, `tls/`). Thread-compatible (each instance's record is saved
// under its owner's lock).
#pragma once

#include <string>
#include <vector>

#include "broker/state.h"
#include "engines/state_dir.h"

namespace klutch::broker {

class StateDir : public engines::StateDir {
 public:
  using engines::StateDir::StateDir;
  core::Status Save(const InstanceRecord& record) const {
    return SaveJson(record.number, ToJson(record));
  }
  // Every readable record; files that are not are reported in `errors`.
  std::vector<InstanceRecord> LoadAll(std::vector<std::string>* errors) const;
};

}  // namespace klutch::broker
