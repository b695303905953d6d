// SyncerRegistry: the running ExportSyncers of one connection, by export name, and whether the
// connection still takes new ones. Shared by the export reconciler (which starts and stops
// syncers) and the Connection (which tells them about APIServiceNamespaces and stops them all).
// A syncer stops when its last holder drops it: callers drop syncers outside Update().
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/sync.h"

namespace klutch::konnector::internal {

class ExportSyncer;

class SyncerRegistry {
 public:
  using Map = std::map<std::string, std::shared_ptr<ExportSyncer>>;

  // Calls `fn` with the syncers under the lock; false (and `fn` not called) once closed.
  bool Update(const std::function<void(Map&)>& fn) {
    core::MutexLock lock(mu_);
    if (closed_) return false;
    fn(syncers_);
    return true;
  }
  std::vector<std::shared_ptr<ExportSyncer>> List() const {
    core::MutexLock lock(mu_);
    std::vector<std::shared_ptr<ExportSyncer>> out;
    for (const auto& [name, s] : syncers_) out.push_back(s);
    return out;
  }
  // Takes no new syncers from now on.
  void Close() {
    core::MutexLock lock(mu_);
    closed_ = true;
  }
  // Every syncer, removed from the registry.
  Map TakeAll() {
    core::MutexLock lock(mu_);
    Map out;
    out.swap(syncers_);
    return out;
  }

 private:
  mutable core::Mutex mu_;
  Map syncers_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::konnector::internal
