// Clock: the one source of time for everything that stamps, expires, waits or backs off,
// injectable so tests run timers in simulated time.
//
// A Clock has two faces: wall time (`Now`, for timestamps written into objects) and monotonic
// time (`MonotonicNow`, for delays, deadlines and expiry, which must not jump), plus the timer
// seam `WaitUntil`: a thread that waits for a deadline blocks through its Clock, so a
// FakeClock can wake it when simulated time reaches the deadline. RealClock is the system's
// clocks; FakeClock moves both faces together, only when Advance() is called. Both are
// thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sync.h"

namespace klutch::core {

using SystemTime = std::chrono::system_clock::time_point;
using MonoTime = std::chrono::steady_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time.
  virtual SystemTime Now() const = 0;
  // Monotonic time: never goes back, unrelated to the wall clock.
  virtual MonoTime MonotonicNow() const = 0;
  // Blocks on `cv` (with `mu` held on entry and on return) until `cv` is signalled,
  // MonotonicNow() reaches `deadline`, or a spurious wake-up: callers re-check their
  // condition in a loop. Returns at once when the deadline has passed.
  virtual void WaitUntil(CondVar& cv, Mutex& mu, MonoTime deadline) const REQUIRES(mu) = 0;

  // WaitUntil(MonotonicNow() + d), saturating for huge `d` (e.g. nanoseconds::max()).
  void WaitFor(CondVar& cv, Mutex& mu, std::chrono::nanoseconds d) const REQUIRES(mu) {
    WaitUntil(cv, mu, After(d));
  }
  // MonotonicNow() + d, saturating at about a century for huge `d`.
  MonoTime After(std::chrono::nanoseconds d) const;
};

class RealClock final : public Clock {
 public:
  SystemTime Now() const override { return std::chrono::system_clock::now(); }
  MonoTime MonotonicNow() const override { return std::chrono::steady_clock::now(); }
  void WaitUntil(CondVar& cv, Mutex& mu, MonoTime deadline) const override REQUIRES(mu);
  // The process-wide instance.
  static const Clock& Get();
};

// Simulated time for tests. Both faces start at fixed points (wall time at `start`) and move
// only in Advance(), which wakes every thread blocked in WaitUntil so it re-checks its
// deadline. Tests that must know a timer is parked before advancing use WaitForWaiters().
class FakeClock final : public Clock {
 public:
  FakeClock();
  explicit FakeClock(SystemTime start);
  ~FakeClock() override;

  SystemTime Now() const override;
  MonoTime MonotonicNow() const override;
  void WaitUntil(CondVar& cv, Mutex& mu, MonoTime deadline) const override REQUIRES(mu);

  void Advance(std::chrono::nanoseconds d);
  // Advances to the earliest deadline a thread is blocked on now (no-op when none is later
  // than now); returns false when no thread is waiting on a deadline.
  bool AdvanceToNextDeadline();

  // Threads blocked in WaitUntil right now, and how many WaitUntil calls have blocked so far
  // (a thread that wakes and blocks again counts twice).
  int blocked_waiters() const;
  uint64_t blocking_waits() const;
  // Blocks (in real time, at most `timeout`) until at least `n` threads are blocked in
  // WaitUntil on a deadline still ahead (a thread an Advance made due is not counted until it
  // has woken and blocked again); true when they are.
  bool WaitForWaiters(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const;

 private:
  struct Waiter {
    CondVar* cv;
    Mutex* mu;
    MonoTime deadline;
  };
  mutable Mutex mu_;
  mutable CondVar changed_;  // waiters_ or notifying_ changed
  std::chrono::nanoseconds elapsed_ GUARDED_BY(mu_){0};
  const SystemTime wall_start_;
  mutable std::vector<Waiter> waiters_ GUARDED_BY(mu_);
  mutable uint64_t blocking_waits_ GUARDED_BY(mu_) = 0;
  int notifying_ GUARDED_BY(mu_) = 0;  // Advance calls still signalling a snapshot of waiters_
};

// RFC 3339 in UTC with seconds precision, as metav1.Time: "2026-11-22T05:02:18Z".
std::string FormatTime(SystemTime t);
// RFC 3339 with microseconds, as metav1.MicroTime: "2026-11-22T05:02:18.123456Z".
std::string FormatMicroTime(SystemTime t);
// Parses RFC 3339 (with optional fraction and offset); nullopt when malformed.
std::optional<SystemTime> ParseTime(std::string_view s);
// A human age as kubectl prints it: "3s", "5m", "2m30s", "5h", "3d", "2y".
std::string HumanDuration(std::chrono::seconds d);

}  // namespace klutch::core
