#include "bind/web/keyed_rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace klutch::bind {

KeyedRateLimiter::KeyedRateLimiter(double rate, int burst, const core::Clock& clock)
    : rate_(rate), burst_(std::max(1, burst)), clock_(clock) {}

std::chrono::seconds KeyedRateLimiter::Take(const std::string& key) {
  if (rate_ <= 0) return std::chrono::seconds(0);
  core::MutexLock lock(mu_);
  const core::SystemTime now = clock_.Now();
  if (buckets_.size() >= kMaxKeys && !buckets_.contains(key)) Prune(now);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    const std::string& k = buckets_.size() >= kMaxKeys ? kOverflowKey : key;
    it = buckets_.try_emplace(k, Bucket{static_cast<double>(burst_), now}).first;
  }
  Bucket& b = it->second;
  b.tokens = Refilled(b, now);
  b.at = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::chrono::seconds(0);
  }
  return std::chrono::seconds(
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil((1 - b.tokens) / rate_))));
}

double KeyedRateLimiter::Refilled(const Bucket& b, core::SystemTime now) const {
  const double elapsed = std::max(0.0, std::chrono::duration<double>(now - b.at).count());
  return std::min(static_cast<double>(burst_), b.tokens + elapsed * rate_);
}

void KeyedRateLimiter::Prune(core::SystemTime now) {
  std::erase_if(buckets_, [&](const auto& kv) { return Refilled(kv.second, now) >= burst_; });
}

}  // namespace klutch::bind
