#include "client/workqueue.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace klutch::client {

using std::chrono::nanoseconds;

namespace {

// Longer delays (a rate limiter's "never", nanoseconds::max()) are capped so that now + delay
// cannot overflow the clock's representation; ~100 years is "never" for a controller.
constexpr nanoseconds kMaxDelay = std::chrono::hours(24 * 365 * 100);

}  // namespace

// ---------------------------------------------------------------------------------------------
// Clocks

void RealSteadyClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                                TimePoint deadline) const {
  cv.wait_until(lock, deadline);
}

const SteadyClock& RealSteadyClock::Get() {
  static const RealSteadyClock clock;
  return clock;
}

SteadyClock::TimePoint FakeSteadyClock::Now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

void FakeSteadyClock::WaitUntil(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                                TimePoint deadline) const {
  const std::pair<std::condition_variable*, std::mutex*> waiter(&cv, lock.mutex());
  {
    // Checking the time and registering happen in one critical section, so an Advance either
    // precedes the check (seen here) or finds this waiter registered (and wakes it).
    std::lock_guard<std::mutex> clock_lock(mu_);
    if (now_ >= deadline) return;
    waiters_.insert(waiter);
    ++blocking_waits_;
  }
  // Advance locks the caller's mutex before notifying, so its notification cannot fall into
  // the gap between registering above and blocking here.
  cv.wait(lock);
  // Unregister without the caller's lock held: an Advance still notifying this waiter needs
  // that lock, and must finish before the caller may destroy the mutex or the cv.
  lock.unlock();
  {
    std::unique_lock<std::mutex> clock_lock(mu_);
    while (notifying_ > 0) notify_done_.wait(clock_lock);
    waiters_.erase(waiters_.find(waiter));
  }
  lock.lock();
}

void FakeSteadyClock::Advance(nanoseconds d) {
  std::vector<std::pair<std::condition_variable*, std::mutex*>> waiters;
  {
    std::lock_guard<std::mutex> lock(mu_);
    now_ += std::chrono::duration_cast<TimePoint::duration>(d);
    waiters.assign(waiters_.begin(), waiters_.end());
    ++notifying_;
  }
  for (const auto& [cv, mu] : waiters) {
    // Taking the waiter's mutex orders this notification after the waiter is blocked.
    { std::lock_guard<std::mutex> lock(*mu); }
    cv->notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    --notifying_;
  }
  notify_done_.notify_all();
}

int FakeSteadyClock::blocked_waiters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiters_.size());
}

uint64_t FakeSteadyClock::blocking_waits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return blocking_waits_;
}

// ---------------------------------------------------------------------------------------------
// Rate limiters

RateLimiter::~RateLimiter() = default;

namespace {

class ItemExponentialRateLimiter final : public RateLimiter {
 public:
  ItemExponentialRateLimiter(nanoseconds base, nanoseconds max) : base_(base), max_(max) {}

  nanoseconds When(const std::string& item) override {
    int exp;
    {
      std::lock_guard<std::mutex> lock(mu_);
      exp = failures_[item]++;
    }
    // Computed in floating point so that large exponents saturate instead of overflowing.
    double backoff = static_cast<double>(base_.count()) * std::pow(2.0, exp);
    if (!(backoff < static_cast<double>(max_.count()))) return max_;
    return nanoseconds(static_cast<int64_t>(backoff));
  }
  void Forget(const std::string& item) override {
    std::lock_guard<std::mutex> lock(mu_);
    failures_.erase(item);
  }
  int NumRequeues(const std::string& item) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = failures_.find(item);
    return it == failures_.end() ? 0 : it->second;
  }

 private:
  const nanoseconds base_;
  const nanoseconds max_;
  std::mutex mu_;
  std::unordered_map<std::string, int> failures_ GUARDED_BY(mu_);
};

class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(double qps, int burst, const SteadyClock& clock)
      : qps_(qps), burst_(burst), clock_(clock), tokens_(burst), last_(clock.Now()) {}

  nanoseconds When(const std::string&) override {
    if (std::isinf(qps_) && qps_ > 0) return nanoseconds(0);
    if (burst_ < 1) return nanoseconds::max();
    std::lock_guard<std::mutex> lock(mu_);
    SteadyClock::TimePoint now = clock_.Now();
    if (now > last_) {
      if (qps_ > 0) {
        double elapsed = std::chrono::duration<double>(now - last_).count();
        tokens_ = std::min(static_cast<double>(burst_), tokens_ + elapsed * qps_);
      }
      last_ = now;
    }
    if (qps_ <= 0) {
      // No refill: a token exists now or never (the reservation is then not taken).
      if (tokens_ < 1) return nanoseconds::max();
      tokens_ -= 1;
      return nanoseconds(0);
    }
    // The token is reserved even when it does not exist yet (the balance goes negative); the
    // caller waits until the refill has paid the debt.
    tokens_ -= 1;
    if (tokens_ >= 0) return nanoseconds(0);
    double wait_s = -tokens_ / qps_;
    if (wait_s * 1e9 >= static_cast<double>(nanoseconds::max().count())) {
      return nanoseconds::max();
    }
    return nanoseconds(static_cast<int64_t>(wait_s * 1e9));
  }
  void Forget(const std::string&) override {}
  int NumRequeues(const std::string&) override { return 0; }

 private:
  const double qps_;
  const int burst_;
  const SteadyClock& clock_;
  std::mutex mu_;
  double tokens_ GUARDED_BY(mu_);
  SteadyClock::TimePoint last_ GUARDED_BY(mu_);
};

class MaxOfRateLimiter final : public RateLimiter {
 public:
  explicit MaxOfRateLimiter(std::vector<std::unique_ptr<RateLimiter>> limiters)
      : limiters_(std::move(limiters)) {}

  nanoseconds When(const std::string& item) override {
    nanoseconds max(0);
    for (auto& l : limiters_) max = std::max(max, l->When(item));
    return max;
  }
  void Forget(const std::string& item) override {
    for (auto& l : limiters_) l->Forget(item);
  }
  int NumRequeues(const std::string& item) override {
    int max = 0;
    for (auto& l : limiters_) max = std::max(max, l->NumRequeues(item));
    return max;
  }

 private:
  const std::vector<std::unique_ptr<RateLimiter>> limiters_;  // each thread-safe on its own
};

}  // namespace

std::unique_ptr<RateLimiter> NewItemExponentialRateLimiter(nanoseconds base, nanoseconds max) {
  return std::make_unique<ItemExponentialRateLimiter>(base, max);
}

std::unique_ptr<RateLimiter> NewBucketRateLimiter(double qps, int burst, const SteadyClock& clock) {
  return std::make_unique<BucketRateLimiter>(qps, burst, clock);
}

std::unique_ptr<RateLimiter> NewMaxOfRateLimiter(
    std::vector<std::unique_ptr<RateLimiter>> limiters) {
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter() {
  return DefaultControllerRateLimiter(RealSteadyClock::Get());
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(const SteadyClock& clock) {
  std::vector<std::unique_ptr<RateLimiter>> limiters;
  limiters.push_back(
      NewItemExponentialRateLimiter(std::chrono::milliseconds(5), std::chrono::seconds(1000)));
  limiters.push_back(NewBucketRateLimiter(10, 100, clock));
  return NewMaxOfRateLimiter(std::move(limiters));
}

// ---------------------------------------------------------------------------------------------
// WorkQueue

WorkQueue::WorkQueue(WorkQueueOptions options)
    : name_(std::move(options.name)),
      clock_(options.clock ? *options.clock : RealSteadyClock::Get()),
      rate_limiter_(options.rate_limiter ? std::move(options.rate_limiter)
                                         : DefaultControllerRateLimiter(clock_)),
      on_event_(std::move(options.on_event)) {}

WorkQueue::~WorkQueue() {
  ShutDown();
  std::thread timer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    timer = std::move(timer_);
  }
  if (timer.joinable()) timer.join();
}

WorkQueueEvent WorkQueue::Event(WorkQueueEvent::Type type, const std::string& item) const {
  WorkQueueEvent e;
  e.type = type;
  e.queue = name_;
  e.item = item;
  e.depth = queue_.size();
  return e;
}

void WorkQueue::Emit(std::vector<WorkQueueEvent>& events) const {
  if (!on_event_) return;
  for (const auto& e : events) on_event_(e);
}

void WorkQueue::AddLocked(const std::string& item, std::vector<WorkQueueEvent>& events) {
  if (shutting_down_) return;
  if (!dirty_.insert(item).second) return;
  added_at_.emplace(item, clock_.Now());
  // An item being processed stays out of the queue: Done() queues it, so no two workers ever
  // hold the same item.
  if (!processing_.count(item)) {
    queue_.push_back(item);
    get_cv_.notify_one();
  }
  if (on_event_) events.push_back(Event(WorkQueueEvent::Type::kAdd, item));
}

void WorkQueue::Add(const std::string& item) {
  std::vector<WorkQueueEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    AddLocked(item, events);
  }
  Emit(events);
}

void WorkQueue::AddAfter(const std::string& item, nanoseconds delay) {
  std::vector<WorkQueueEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shutting_down_) return;
    if (on_event_) events.push_back(Event(WorkQueueEvent::Type::kRetry, item));
    if (delay <= nanoseconds(0)) {
      AddLocked(item, events);
    } else {
      TimePoint ready = clock_.Now() +
                        std::chrono::duration_cast<TimePoint::duration>(std::min(delay, kMaxDelay));
      auto it = waiting_index_.find(item);
      bool changed = true;
      if (it == waiting_index_.end()) {
        waiting_index_.emplace(item, waiting_.emplace(ready, waiting_seq_++, item).first);
      } else if (ready < std::get<0>(*it->second)) {
        waiting_.erase(it->second);
        it->second = waiting_.emplace(ready, waiting_seq_++, item).first;
      } else {
        changed = false;  // already due earlier
      }
      if (changed) {
        if (!timer_.joinable()) timer_ = std::thread([this] { RunTimer(); });
        timer_cv_.notify_one();
      }
    }
  }
  Emit(events);
}

void WorkQueue::AddRateLimited(const std::string& item) {
  AddAfter(item, rate_limiter_->When(item));
}

void WorkQueue::Forget(const std::string& item) { rate_limiter_->Forget(item); }

int WorkQueue::NumRequeues(const std::string& item) { return rate_limiter_->NumRequeues(item); }

void WorkQueue::RunTimer() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!shutting_down_) {
    std::vector<WorkQueueEvent> events;
    TimePoint now = clock_.Now();
    while (!waiting_.empty() && std::get<0>(*waiting_.begin()) <= now) {
      std::string item = std::get<2>(*waiting_.begin());
      waiting_index_.erase(item);
      waiting_.erase(waiting_.begin());
      AddLocked(item, events);
    }
    if (!events.empty()) {
      lock.unlock();
      Emit(events);
      lock.lock();
      continue;
    }
    if (waiting_.empty()) {
      timer_cv_.wait(lock);
    } else {
      clock_.WaitUntil(timer_cv_, lock, std::get<0>(*waiting_.begin()));
    }
  }
}

std::optional<std::string> WorkQueue::Get() {
  std::vector<WorkQueueEvent> events;
  std::string item;
  {
    std::unique_lock<std::mutex> lock(mu_);
    while (queue_.empty() && !shutting_down_) get_cv_.wait(lock);
    if (queue_.empty()) return std::nullopt;
    item = std::move(queue_.front());
    queue_.pop_front();
    processing_.insert(item);
    dirty_.erase(item);
    TimePoint now = clock_.Now();
    nanoseconds latency(0);
    if (auto it = added_at_.find(item); it != added_at_.end()) {
      latency = now - it->second;
      added_at_.erase(it);
    }
    started_at_[item] = now;
    latency_[item] = latency;
    if (on_event_) {
      events.push_back(Event(WorkQueueEvent::Type::kGet, item));
      events.back().queue_latency = latency;
    }
  }
  Emit(events);
  return item;
}

void WorkQueue::Done(const std::string& item) {
  std::vector<WorkQueueEvent> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!processing_.erase(item)) return;
    TimePoint now = clock_.Now();
    nanoseconds work(0), latency(0);
    if (auto it = started_at_.find(item); it != started_at_.end()) {
      work = now - it->second;
      started_at_.erase(it);
    }
    if (auto it = latency_.find(item); it != latency_.end()) {
      latency = it->second;
      latency_.erase(it);
    }
    if (dirty_.count(item)) {
      queue_.push_back(item);
      get_cv_.notify_one();
    }
    if (processing_.empty()) drain_cv_.notify_all();
    if (on_event_) {
      events.push_back(Event(WorkQueueEvent::Type::kDone, item));
      events.back().queue_latency = latency;
      events.back().work_duration = work;
    }
  }
  Emit(events);
}

size_t WorkQueue::Len() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void WorkQueue::ShutDown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
    drain_ = false;
    waiting_.clear();
    waiting_index_.clear();
  }
  get_cv_.notify_all();
  drain_cv_.notify_all();
  timer_cv_.notify_all();
}

void WorkQueue::ShutDownWithDrain() {
  std::unique_lock<std::mutex> lock(mu_);
  shutting_down_ = true;
  drain_ = true;
  waiting_.clear();
  waiting_index_.clear();
  get_cv_.notify_all();
  timer_cv_.notify_all();
  while (!processing_.empty() && drain_) drain_cv_.wait(lock);
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shutting_down_;
}

}  // namespace klutch::client
