// Clock: the source of "now" for everything that stamps or expires, injectable in tests.
//
// RealClock is the system clock; FakeClock is advanced by hand. Both are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace klutch::core {

using SystemTime = std::chrono::system_clock::time_point;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SystemTime Now() const = 0;
};

class RealClock final : public Clock {
 public:
  SystemTime Now() const override { return std::chrono::system_clock::now(); }
  // The process-wide instance.
  static const Clock& Get();
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(SystemTime start) : now_ns_(ToNanos(start)) {}
  SystemTime Now() const override {
    return SystemTime(
        std::chrono::duration_cast<SystemTime::duration>(std::chrono::nanoseconds(now_ns_.load())));
  }
  void Advance(std::chrono::nanoseconds d) { now_ns_ += d.count(); }

 private:
  static int64_t ToNanos(SystemTime t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  std::atomic<int64_t> now_ns_;
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
