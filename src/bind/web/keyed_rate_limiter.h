// KeyedRateLimiter: a token bucket per key (the device grant's starts per client address):
// `burst` tokens, refilled at `rate` per second. Buckets that are full again are forgotten once
// many keys are known; beyond kMaxKeys busy keys, new keys share one bucket, so memory stays
// bounded whatever the number of addresses. Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "core/clock.h"
#include "core/sync.h"

namespace klutch::bind {

class KeyedRateLimiter {
 public:
  // `rate` <= 0: unlimited. `clock` must outlive the limiter.
  KeyedRateLimiter(double rate, int burst, const core::Clock& clock);

  // 0 when a request of `key` may go now (and takes a token); otherwise how long until the
  // next token (whole seconds, at least 1).
  std::chrono::seconds Take(const std::string& key);

 private:
  struct Bucket {
    double tokens;
    core::SystemTime at;
  };
  static constexpr size_t kMaxKeys = 65536;
  static inline const std::string kOverflowKey = "*";  // no address

  double Refilled(const Bucket& b, core::SystemTime now) const;
  void Prune(core::SystemTime now) REQUIRES(mu_);

  const double rate_;
  const int burst_;
  const core::Clock& clock_;
  core::Mutex mu_;
  std::map<std::string, Bucket> buckets_ GUARDED_BY(mu_);
};

}  // namespace klutch::bind
