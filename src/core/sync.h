// Synchronization with clang thread-safety annotations: `Mutex`, its scoped `MutexLock`, the
// `CondVar` that waits on it, and a one-shot `Notification`.
//
// Members a mutex protects are declared `GUARDED_BY(mu_)`, functions that expect it held
// `REQUIRES(mu_)`. clang's -Wthread-safety checks every access at compile time (the
// `thread_safety_check` test compiles the tree with it); under g++ the annotations compile to
// nothing. libstdc++'s std::mutex and std::unique_lock carry no annotations, so code whose
// locking is to be checked uses these types. All types here are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define KLUTCH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KLUTCH_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) KLUTCH_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY KLUTCH_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) KLUTCH_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) KLUTCH_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) KLUTCH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) KLUTCH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) KLUTCH_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) KLUTCH_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) KLUTCH_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) KLUTCH_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) KLUTCH_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS KLUTCH_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace klutch::core {

class CondVar;

// A non-recursive mutex the analysis knows about.
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the caller holds the mutex (checked only by the analysis).
  void AssertHeld() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.Lock(); }
  ~MutexLock() RELEASE() { mu_.Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& mu_;
};

// A condition variable used with a core::Mutex. Waits may wake spuriously: callers re-check
// their condition in a loop. For deadlines measured on an injectable clock use
// core::Clock::WaitUntil, which tests can drive with a FakeClock.
class CondVar {
 public:
  // Releases `mu` while blocked; holds it again on return.
  void Wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As Wait, also returning once the real steady clock passes `deadline`. False on timeout.
  bool WaitUntil(Mutex& mu, std::chrono::steady_clock::time_point deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    const bool notified = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return notified;
  }
  template <typename Rep, typename Period>
  bool WaitFor(Mutex& mu, std::chrono::duration<Rep, Period> d) REQUIRES(mu) {
    return WaitUntil(mu, DeadlineAfter(d));
  }
  // now + d on the real steady clock, saturating instead of overflowing for huge `d`.
  template <typename Rep, typename Period>
  static std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::duration<Rep, Period> d) {
    constexpr std::chrono::hours kForever(24 * 365 * 100);
    if (d > kForever) return std::chrono::steady_clock::now() + kForever;
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// Set once, waited on by any number of threads.
class Notification {
 public:
  void Notify() {
    {
      MutexLock lock(mu_);
      notified_ = true;
    }
    cv_.SignalAll();
  }
  bool HasBeenNotified() const {
    MutexLock lock(mu_);
    return notified_;
  }
  void Wait() const {
    MutexLock lock(mu_);
    while (!notified_) cv_.Wait(mu_);
  }
  // True when notified before the timeout (real time).
  template <typename Rep, typename Period>
  bool WaitFor(std::chrono::duration<Rep, Period> d) const {
    const auto deadline = CondVar::DeadlineAfter(d);
    MutexLock lock(mu_);
    while (!notified_) {
      if (!cv_.WaitUntil(mu_, deadline)) return notified_;
    }
    return true;
  }

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  bool notified_ GUARDED_BY(mu_) = false;
};

}  // namespace klutch::core
