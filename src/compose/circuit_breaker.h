// CircuitBreaker: holds back writes to a composed resource that was rewritten too often
// (two controllers fighting over a field). More than `writes` changing writes to one key
// within `window` open the breaker for `cooldown`; each trip counts in `trips`. Bounded
// memory (losing history is safe). Thread-safe.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "core/clock.h"
#include "core/sync.h"
#include "serving/metrics.h"

namespace klutch::compose {

class CircuitBreaker {
 public:
  // `clock` and `trips` must outlive the breaker.
  CircuitBreaker(int writes, std::chrono::milliseconds window, std::chrono::milliseconds cooldown,
                 const core::Clock& clock, serving::CounterFamily& trips)
      : writes_(writes), window_(window), cooldown_(cooldown), clock_(clock), trips_(trips) {}

  // Whether one more changing write to `key` ("xr/resource") is allowed; false while its
  // breaker is open (`wait` then says for how long).
  bool AllowWrite(const std::string& key, std::chrono::milliseconds& wait);

 private:
  struct Window {
    std::deque<core::MonoTime> writes;
    core::MonoTime open_until{};
  };
  const int writes_;
  const std::chrono::milliseconds window_;
  const std::chrono::milliseconds cooldown_;
  const core::Clock& clock_;
  serving::CounterFamily& trips_;
  core::Mutex mu_;
  std::map<std::string, Window> windows_ GUARDED_BY(mu_);
};

}  // namespace klutch::compose
