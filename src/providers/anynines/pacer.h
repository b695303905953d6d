// Per-resource pacing of provider-anynines' re-checks while an operation is in flight (and of
// failure backoff). Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "core/sync.h"

namespace klutch::providers::anynines {

// Per-resource pacing of re-checks: Next() starts at `min` and doubles up to `max` on every
// call until Reset(); used while an operation is in flight. Thread-safe.
class Pacer {
 public:
  Pacer(std::chrono::milliseconds min, std::chrono::milliseconds max) : min_(min), max_(max) {}
  std::chrono::milliseconds Next(const std::string& key);
  void Reset(const std::string& key);

 private:
  const std::chrono::milliseconds min_, max_;
  core::Mutex mu_;
  std::map<std::string, std::chrono::milliseconds> next_ GUARDED_BY(mu_);
};

}  // namespace klutch::providers::anynines
