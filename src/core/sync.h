// Small synchronization helpers: clang thread-safety annotations and a one-shot Notification.
//
// The annotations compile to nothing under g++ and are checked by clang's -Wthread-safety.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define KLUTCH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define KLUTCH_THREAD_ANNOTATION(x)
#endif

#define GUARDED_BY(x) KLUTCH_THREAD_ANNOTATION(guarded_by(x))
#define REQUIRES(...) KLUTCH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) KLUTCH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

namespace klutch::core {

// Set once, waited on by any number of threads. Thread-safe.
class Notification {
 public:
  void Notify() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      notified_ = true;
    }
    cv_.notify_all();
  }
  bool HasBeenNotified() const {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }
  void Wait() const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return notified_; });
  }
  // True when notified before the timeout.
  template <typename Rep, typename Period>
  bool WaitFor(std::chrono::duration<Rep, Period> d) const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, d, [&] { return notified_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace klutch::core
