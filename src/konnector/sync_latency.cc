#include "konnector/sync_latency.h"

#include <chrono>

namespace klutch::konnector::internal {

void SyncLatency::Touch(const std::string& direction, const std::string& key) {
  core::MutexLock lock(mu_);
  pending_.emplace(direction + ":" + key, clock_.MonotonicNow());
}

void SyncLatency::Forget(const std::string& direction, const std::string& key) {
  core::MutexLock lock(mu_);
  pending_.erase(direction + ":" + key);
}

void SyncLatency::Observe(const std::string& direction, const std::string& key) {
  core::MonoTime since;
  {
    core::MutexLock lock(mu_);
    auto it = pending_.find(direction + ":" + key);
    if (it == pending_.end()) return;
    since = it->second;
    pending_.erase(it);
  }
  std::chrono::duration<double> d = clock_.MonotonicNow() - since;
  histogram_.Observe({{"direction", direction}, {"resource", resource_}}, d.count());
}

}  // namespace klutch::konnector::internal
