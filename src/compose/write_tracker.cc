#include "compose/write_tracker.h"

#include "machinery/object.h"

namespace klutch::compose {

bool WriteTracker::Stale(const std::string& key, const machinery::Json& object) {
  core::MutexLock lock(mu_);
  auto it = superseded_.find(key);
  if (it == superseded_.end()) return false;
  if (it->second.count(machinery::ResourceVersion(object))) return true;
  superseded_.erase(it);
  return false;
}

void WriteTracker::Wrote(const std::string& key, const machinery::Json& before,
                         const core::Result<machinery::Json>& after) {
  if (!after.ok()) return;
  std::string from = machinery::ResourceVersion(before);
  if (from.empty() || machinery::ResourceVersion(*after) == from) return;
  core::MutexLock lock(mu_);
  if (superseded_.size() > 100000) superseded_.clear();  // bounded; forgetting is safe
  superseded_[key].insert(from);
}

}  // namespace klutch::compose
