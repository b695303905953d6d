#include "compose/circuit_breaker.h"

namespace klutch::compose {

bool CircuitBreaker::AllowWrite(const std::string& key, std::chrono::milliseconds& wait) {
  const auto now = clock_.MonotonicNow();
  core::MutexLock lock(mu_);
  Window& b = windows_[key];
  if (now < b.open_until) {
    // Rounded up: a wait truncated to 0 ms would be no requeue at all, and the key would stay
    // held back until something else changed.
    wait = std::chrono::ceil<std::chrono::milliseconds>(b.open_until - now);
    return false;
  }
  while (!b.writes.empty() && now - b.writes.front() > window_) b.writes.pop_front();
  if (static_cast<int>(b.writes.size()) >= writes_) {
    b.open_until = now + cooldown_;
    b.writes.clear();
    trips_.Increment({});
    wait = cooldown_;
    return false;
  }
  b.writes.push_back(now);
  if (windows_.size() > 100000) windows_.clear();  // bound memory; losing history is safe
  return true;
}

}  // namespace klutch::compose
