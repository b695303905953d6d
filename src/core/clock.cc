#include "core/clock.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <ctime>

namespace klutch::core {

namespace {
// Longer waits (a rate limiter's "never", nanoseconds::max()) are capped so that now + d
// cannot overflow; a century is "never" for anything this project runs.
constexpr std::chrono::nanoseconds kForever = std::chrono::hours(24 * 365 * 100);
// Where a FakeClock's monotonic face starts: any fixed point well away from zero.
constexpr MonoTime kFakeMonoStart{std::chrono::hours(24)};
}  // namespace

MonoTime Clock::After(std::chrono::nanoseconds d) const {
  return MonotonicNow() + std::chrono::duration_cast<MonoTime::duration>(std::min(d, kForever));
}

void RealClock::WaitUntil(CondVar& cv, Mutex& mu, MonoTime deadline) const {
  cv.WaitUntil(mu, deadline);
}

const Clock& RealClock::Get() {
  static const RealClock clock;
  return clock;
}

FakeClock::FakeClock() : FakeClock(SystemTime(std::chrono::seconds(1'767'225'600))) {}

FakeClock::FakeClock(SystemTime start) : wall_start_(start) {}

FakeClock::~FakeClock() = default;

SystemTime FakeClock::Now() const {
  MutexLock lock(mu_);
  return wall_start_ + std::chrono::duration_cast<SystemTime::duration>(elapsed_);
}

MonoTime FakeClock::MonotonicNow() const {
  MutexLock lock(mu_);
  return kFakeMonoStart + std::chrono::duration_cast<MonoTime::duration>(elapsed_);
}

void FakeClock::WaitUntil(CondVar& cv, Mutex& mu, MonoTime deadline) const {
  {
    // Checking the time and registering happen in one critical section, so an Advance
    // either precedes the check (seen here) or finds this waiter registered and wakes it.
    MutexLock lock(mu_);
    if (kFakeMonoStart + elapsed_ >= deadline) return;
    waiters_.push_back({&cv, &mu, deadline});
    ++blocking_waits_;
    changed_.SignalAll();
  }
  // Advance takes the caller's mutex before signalling, so its signal cannot fall into the
  // gap between registering above and blocking here.
  cv.Wait(mu);
  // Unregister without the caller's mutex held: an Advance still signalling this waiter needs
  // that mutex, and must finish before the caller may destroy the mutex or the CondVar.
  mu.Unlock();
  {
    MutexLock lock(mu_);
    while (notifying_ > 0) changed_.Wait(mu_);
    for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
      if (it->cv == &cv && it->mu == &mu && it->deadline == deadline) {
        waiters_.erase(it);
        break;
      }
    }
    changed_.SignalAll();
  }
  mu.Lock();
}

void FakeClock::Advance(std::chrono::nanoseconds d) {
  std::vector<Waiter> waiters;
  {
    MutexLock lock(mu_);
    elapsed_ += d;
    waiters = waiters_;
    ++notifying_;
  }
  for (const Waiter& w : waiters) {
    // Taking the waiter's mutex orders this signal after the waiter is blocked.
    { MutexLock lock(*w.mu); }
    w.cv->SignalAll();
  }
  {
    MutexLock lock(mu_);
    --notifying_;
  }
  changed_.SignalAll();
}

bool FakeClock::AdvanceToNextDeadline() {
  std::chrono::nanoseconds step{0};
  {
    MutexLock lock(mu_);
    if (waiters_.empty()) return false;
    MonoTime next = waiters_.front().deadline;
    for (const Waiter& w : waiters_) next = std::min(next, w.deadline);
    const MonoTime now = kFakeMonoStart + elapsed_;
    if (next > now) step = next - now;
  }
  Advance(step);
  return true;
}

int FakeClock::blocked_waiters() const {
  MutexLock lock(mu_);
  return static_cast<int>(waiters_.size());
}

uint64_t FakeClock::blocking_waits() const {
  MutexLock lock(mu_);
  return blocking_waits_;
}

bool FakeClock::WaitForWaiters(int n, std::chrono::milliseconds timeout) const {
  const auto deadline = CondVar::DeadlineAfter(timeout);
  MutexLock lock(mu_);
  // Only waiters whose deadline is still ahead: one an Advance has made due stays registered
  // until its thread wakes, and counting it would let a test advance time again before that
  // thread has done what it woke for.
  auto parked = [&]() REQUIRES(mu_) {
    const MonoTime now = kFakeMonoStart + elapsed_;
    return static_cast<int>(std::count_if(waiters_.begin(), waiters_.end(),
                                          [&](const Waiter& w) { return w.deadline > now; }));
  };
  while (parked() < n) {
    if (!changed_.WaitUntil(mu_, deadline)) return parked() >= n;
  }
  return true;
}

namespace {

std::tm ToTm(SystemTime t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  return tm;
}

bool ReadDigits(std::string_view s, size_t& pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  out = 0;
  for (size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    out = out * 10 + (c - '0');
  }
  pos += n;
  return true;
}

bool Expect(std::string_view s, size_t& pos, char c) {
  if (pos >= s.size() || (s[pos] != c && std::tolower(s[pos]) != std::tolower(c))) return false;
  ++pos;
  return true;
}

}  // namespace

std::string FormatTime(SystemTime t) {
  std::tm tm = ToTm(t);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string FormatMicroTime(SystemTime t) {
  std::tm tm = ToTm(t);
  auto us =
      std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1000000;
  if (us < 0) us += 1000000;
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
}

std::optional<SystemTime> ParseTime(std::string_view s) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!ReadDigits(s, pos, 4, year) || !Expect(s, pos, '-') || !ReadDigits(s, pos, 2, month) ||
      !Expect(s, pos, '-') || !ReadDigits(s, pos, 2, day) || !Expect(s, pos, 'T') ||
      !ReadDigits(s, pos, 2, hour) || !Expect(s, pos, ':') || !ReadDigits(s, pos, 2, minute) ||
      !Expect(s, pos, ':') || !ReadDigits(s, pos, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  int64_t nanos = 0;
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (digits < 9) nanos = nanos * 10 + (s[pos] - '0');
      ++digits;
      ++pos;
    }
    if (digits == 0) return std::nullopt;
    for (int i = digits; i < 9; ++i) nanos *= 10;
  }
  int64_t offset = 0;
  if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
    ++pos;
  } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
    int sign = s[pos] == '-' ? -1 : 1;
    ++pos;
    int oh, om;
    if (!ReadDigits(s, pos, 2, oh) || !Expect(s, pos, ':') || !ReadDigits(s, pos, 2, om)) {
      return std::nullopt;
    }
    offset = sign * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  if (pos != s.size()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  int64_t secs = static_cast<int64_t>(timegm(&tm)) - offset;  // timegm is UTC, TZ-independent
  return SystemTime(std::chrono::duration_cast<SystemTime::duration>(
      std::chrono::seconds(secs) + std::chrono::nanoseconds(nanos)));
}

std::string HumanDuration(std::chrono::seconds d) {
  // Mirrors the rounding of k8s.io/apimachinery/pkg/util/duration.HumanDuration.
  int64_t s = d.count();
  if (s < -1) return "<invalid>";
  if (s < 0) return "0s";
  if (s < 60 * 2) return fmt::format("{}s", s);
  int64_t minutes = s / 60;
  if (minutes < 10) {
    int64_t rs = s % 60;
    if (rs == 0) return fmt::format("{}m", minutes);
    return fmt::format("{}m{}s", minutes, rs);
  }
  if (minutes < 60 * 3) return fmt::format("{}m", minutes);
  int64_t hours = s / 3600;
  if (hours < 8) {
    int64_t rm = minutes % 60;
    if (rm == 0) return fmt::format("{}h", hours);
    return fmt::format("{}h{}m", hours, rm);
  }
  if (hours < 48) return fmt::format("{}h", hours);
  if (hours < 24 * 8) {
    int64_t rh = hours % 24;
    if (rh == 0) return fmt::format("{}d", hours / 24);
    return fmt::format("{}d{}h", hours / 24, rh);
  }
  if (hours < 24 * 365 * 2) return fmt::format("{}d", hours / 24);
  if (hours < 24 * 365 * 8) {
    int64_t dy = (hours / 24) % 365;
    if (dy == 0) return fmt::format("{}y", hours / 24 / 365);
    return fmt::format("{}y{}d", hours / 24 / 365, dy);
  }
  return fmt::format("{}y", hours / 24 / 365);
}

}  // namespace klutch::core
