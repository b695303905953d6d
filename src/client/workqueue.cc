#include "client/workqueue.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <utility>

namespace klutch::client {

using std::chrono::nanoseconds;

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
      core::MutexLock lock(mu_);
      exp = failures_[item]++;
    }
    // Computed in floating point so that large exponents saturate instead of overflowing.
    double backoff = static_cast<double>(base_.count()) * std::pow(2.0, exp);
    if (!(backoff < static_cast<double>(max_.count()))) return max_;
    return nanoseconds(static_cast<int64_t>(backoff));
  }
  void Forget(const std::string& item) override {
    core::MutexLock lock(mu_);
    failures_.erase(item);
  }
  int NumRequeues(const std::string& item) override {
    core::MutexLock lock(mu_);
    auto it = failures_.find(item);
    return it == failures_.end() ? 0 : it->second;
  }

 private:
  const nanoseconds base_;
  const nanoseconds max_;
  core::Mutex mu_;
  std::unordered_map<std::string, int> failures_ GUARDED_BY(mu_);
};

class BucketRateLimiter final : public RateLimiter {
 public:
  BucketRateLimiter(double qps, int burst, const core::Clock& clock)
      : qps_(qps), burst_(burst), clock_(clock), tokens_(burst), last_(clock.MonotonicNow()) {}

  nanoseconds When(const std::string&) override {
    if (std::isinf(qps_) && qps_ > 0) return nanoseconds(0);
    if (burst_ < 1) return nanoseconds::max();
    core::MutexLock lock(mu_);
    core::MonoTime now = clock_.MonotonicNow();
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
  const core::Clock& clock_;
  core::Mutex mu_;
  double tokens_ GUARDED_BY(mu_);
  core::MonoTime last_ GUARDED_BY(mu_);
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

std::unique_ptr<RateLimiter> NewBucketRateLimiter(double qps, int burst, const core::Clock& clock) {
  return std::make_unique<BucketRateLimiter>(qps, burst, clock);
}

std::unique_ptr<RateLimiter> NewMaxOfRateLimiter(
    std::vector<std::unique_ptr<RateLimiter>> limiters) {
  return std::make_unique<MaxOfRateLimiter>(std::move(limiters));
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter() {
  return DefaultControllerRateLimiter(core::RealClock::Get());
}

std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(const core::Clock& clock) {
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
      clock_(options.clock ? *options.clock : core::RealClock::Get()),
      rate_limiter_(options.rate_limiter ? std::move(options.rate_limiter)
                                         : DefaultControllerRateLimiter(clock_)),
      on_event_(std::move(options.on_event)) {}

WorkQueue::~WorkQueue() {
  ShutDown();
  std::thread timer;
  {
    core::MutexLock lock(mu_);
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
  // One counter for every queue of the process: a queue recreated under the same name (a
  // restarted controller) continues above the old one's numbers.
  static std::atomic<uint64_t> sequence{0};
  e.sequence = ++sequence;
  return e;
}

void WorkQueue::Emit(std::vector<WorkQueueEvent>& events) const {
  if (!on_event_) return;
  for (const auto& e : events) on_event_(e);
}

void WorkQueue::AddLocked(const std::string& item, std::vector<WorkQueueEvent>& events) {
  if (shutting_down_) return;
  if (!dirty_.insert(item).second) return;
  added_at_.emplace(item, clock_.MonotonicNow());
  // An item being processed stays out of the queue: Done() queues it, so no two workers ever
  // hold the same item.
  if (!processing_.count(item)) {
    queue_.push_back(item);
    get_cv_.Signal();
  }
  if (on_event_) events.push_back(Event(WorkQueueEvent::Type::kAdd, item));
}

void WorkQueue::Add(const std::string& item) {
  std::vector<WorkQueueEvent> events;
  {
    core::MutexLock lock(mu_);
    AddLocked(item, events);
  }
  Emit(events);
}

void WorkQueue::AddAfter(const std::string& item, nanoseconds delay) {
  std::vector<WorkQueueEvent> events;
  {
    core::MutexLock lock(mu_);
    if (shutting_down_) return;
    if (on_event_) events.push_back(Event(WorkQueueEvent::Type::kRetry, item));
    if (delay <= nanoseconds(0)) {
      AddLocked(item, events);
    } else {
      TimePoint ready = clock_.After(delay);
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
        timer_cv_.Signal();
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
  core::MutexLock lock(mu_);
  while (!shutting_down_) {
    std::vector<WorkQueueEvent> events;
    TimePoint now = clock_.MonotonicNow();
    while (!waiting_.empty() && std::get<0>(*waiting_.begin()) <= now) {
      std::string item = std::get<2>(*waiting_.begin());
      waiting_index_.erase(item);
      waiting_.erase(waiting_.begin());
      AddLocked(item, events);
    }
    if (!events.empty()) {
      mu_.Unlock();
      Emit(events);
      mu_.Lock();
      continue;
    }
    if (waiting_.empty()) {
      timer_cv_.Wait(mu_);
    } else {
      clock_.WaitUntil(timer_cv_, mu_, std::get<0>(*waiting_.begin()));
    }
  }
}

std::optional<std::string> WorkQueue::Get() {
  std::vector<WorkQueueEvent> events;
  std::string item;
  {
    core::MutexLock lock(mu_);
    while (queue_.empty() && !shutting_down_) get_cv_.Wait(mu_);
    if (queue_.empty()) return std::nullopt;
    item = std::move(queue_.front());
    queue_.pop_front();
    processing_.insert(item);
    dirty_.erase(item);
    TimePoint now = clock_.MonotonicNow();
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
    core::MutexLock lock(mu_);
    if (!processing_.erase(item)) return;
    TimePoint now = clock_.MonotonicNow();
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
      get_cv_.Signal();
    }
    if (processing_.empty()) drain_cv_.SignalAll();
    if (on_event_) {
      events.push_back(Event(WorkQueueEvent::Type::kDone, item));
      events.back().queue_latency = latency;
      events.back().work_duration = work;
    }
  }
  Emit(events);
}

size_t WorkQueue::Len() const {
  core::MutexLock lock(mu_);
  return queue_.size();
}

void WorkQueue::ShutDown() {
  {
    core::MutexLock lock(mu_);
    shutting_down_ = true;
    drain_ = false;
    waiting_.clear();
    waiting_index_.clear();
  }
  get_cv_.SignalAll();
  drain_cv_.SignalAll();
  timer_cv_.SignalAll();
}

void WorkQueue::ShutDownWithDrain() {
  core::MutexLock lock(mu_);
  shutting_down_ = true;
  drain_ = true;
  waiting_.clear();
  waiting_index_.clear();
  get_cv_.SignalAll();
  timer_cv_.SignalAll();
  while (!processing_.empty() && drain_) drain_cv_.Wait(mu_);
}

bool WorkQueue::ShuttingDown() const {
  core::MutexLock lock(mu_);
  return shutting_down_;
}

}  // namespace klutch::client
