// SyncLatency: the klutch_konnector_sync_duration_seconds of one export's resource. A watch
// event that makes an object differ starts a clock per direction and key (Touch); the write
// that makes both sides agree, or finding them in agreement, observes it (Observe); an object
// that went away drops it (Forget). Directions: up (spec), down (status, adopt). Thread-safe.
#pragma once

#include <map>
#include <string>

#include "core/clock.h"
#include "core/sync.h"
#include "serving/metrics.h"

namespace klutch::konnector::internal {

class SyncLatency {
 public:
  // `histogram` and `clock` must outlive this; `resource` is the label (group resource).
  SyncLatency(serving::HistogramFamily& histogram, const core::Clock& clock, std::string resource)
      : histogram_(histogram), clock_(clock), resource_(std::move(resource)) {}

  // Starts the clock of `key` in `direction` unless it runs already.
  void Touch(const std::string& direction, const std::string& key);
  // Observes and stops the clock of `key` in `direction` (no-op when none runs).
  void Observe(const std::string& direction, const std::string& key);
  // The object is gone: nothing to measure.
  void Forget(const std::string& direction, const std::string& key);

 private:
  serving::HistogramFamily& histogram_;
  const core::Clock& clock_;
  const std::string resource_;
  core::Mutex mu_;
  // When an object first differed per direction ("up:key").
  std::map<std::string, core::MonoTime> pending_ GUARDED_BY(mu_);
};

}  // namespace klutch::konnector::internal
