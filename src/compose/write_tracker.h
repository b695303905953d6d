// WriteTracker: remembers the resourceVersions a controller has written over, so that a
// reconcile started from a cache that has not caught up with its own write yet does nothing
// (the write's watch event queues the key again) instead of failing with a Conflict.
// Bounded (forgetting is safe: the worst case is one Conflict and a retry). Thread-safe.
#pragma once

#include <set>
#include <string>
#include <unordered_map>

#include "core/status.h"
#include "core/sync.h"
#include "machinery/json.h"

namespace klutch::compose {

class WriteTracker {
 public:
  // Whether `object` (the cache's copy of `key`) is one this controller already replaced.
  bool Stale(const std::string& key, const machinery::Json& object);
  // Records a write whose result `after` replaced `before` (nothing when it failed).
  void Wrote(const std::string& key, const machinery::Json& before,
             const core::Result<machinery::Json>& after);

 private:
  core::Mutex mu_;
  std::unordered_map<std::string, std::set<std::string>> superseded_ GUARDED_BY(mu_);
};

}  // namespace klutch::compose
