// WorkQueue: the rate-limited, de-duplicating queue of object keys between a controller's event
// handlers and its workers, with the semantics of client-go's util/workqueue.
//
// An item (an object key such as "ns/name") is queued at most once ("dirty" set) and is handed to
// at most one worker at a time ("processing" set): an Add while the item is being processed marks
// it dirty, and Done() queues it again. Items are handed out in the order they were queued.
// AddAfter() parks an item on an internal timer thread (started on the first delayed add,
// stopped and joined by the destructor) that queues it when its time comes, measured on an
// injectable core::Clock so tests advance time by hand (core::FakeClock). AddRateLimited() asks a
// RateLimiter how long to wait (per-item exponential backoff, overall token bucket, or the max of
// several).
//
// Thread-safety: WorkQueue and every RateLimiter returned here are thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/clock.h"
#include "core/sync.h"

namespace klutch::client {

// Decides how long an item waits before it is queued again after a failure. Implementations are
// thread-safe.
class RateLimiter {
 public:
  virtual ~RateLimiter();
  // The delay before `item` should be retried; records the attempt (one more requeue).
  virtual std::chrono::nanoseconds When(const std::string& item) = 0;
  // Stops tracking `item`: its next When() starts from scratch. Call when processing succeeded.
  virtual void Forget(const std::string& item) = 0;
  // How many times When() was called for `item` since it was last forgotten.
  virtual int NumRequeues(const std::string& item) = 0;
};

// Per-item exponential backoff: the n-th When() for an item (n from 0) returns base * 2^n,
// capped at `max` (also when the product overflows). NumRequeues counts When() calls.
std::unique_ptr<RateLimiter> NewItemExponentialRateLimiter(
    std::chrono::nanoseconds base = std::chrono::milliseconds(5),
    std::chrono::nanoseconds max = std::chrono::seconds(1000));

// One token bucket shared by all items (golang.org/x/time/rate semantics): it holds at most
// `burst` tokens, starts full and refills at `qps` tokens per second. Each When() reserves one
// token and returns how long until that token exists (0 while tokens remain). qps <= 0 means no
// refill; a reservation that can never be satisfied (burst < 1, or an empty bucket with no
// refill) returns nanoseconds::max(). Forget is a no-op and NumRequeues is always 0. `clock`
// must outlive the limiter.
std::unique_ptr<RateLimiter> NewBucketRateLimiter(
    double qps, int burst, const core::Clock& clock = core::RealClock::Get());

// When() is the largest delay of `limiters` (each one records the attempt); NumRequeues the
// largest count; Forget forgets in all. An empty list always returns 0.
std::unique_ptr<RateLimiter> NewMaxOfRateLimiter(
    std::vector<std::unique_ptr<RateLimiter>> limiters);

// client-go's default for controllers: max(exponential 5ms..1000s, bucket 10 qps / burst 100).
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter();
std::unique_ptr<RateLimiter> DefaultControllerRateLimiter(const core::Clock& clock);

// What happened in a queue, for metrics (workqueue_adds_total, _depth, _queue_duration_seconds,
// _work_duration_seconds, _retries_total).
struct WorkQueueEvent {
  enum class Type {
    kAdd,    // the item became dirty (an Add that was not de-duplicated); depth is after it
    kGet,    // handed to a worker; queue_latency = time from its Add to this Get
    kDone,   // worker finished; queue_latency as for kGet, work_duration = time from Get to Done
    kRetry,  // AddAfter / AddRateLimited was called (as client-go counts retries)
  };
  Type type = Type::kAdd;
  std::string queue;  // WorkQueueOptions::name
  std::string item;
  size_t depth = 0;  // Len() right after the event
  // Increases with every event (process-wide, taken under the queue's lock): events are
  // reported after the lock is released, so two threads may report out of order; the later
  // depth has the higher number.
  uint64_t sequence = 0;
  std::chrono::nanoseconds queue_latency{0};
  std::chrono::nanoseconds work_duration{0};
};

struct WorkQueueOptions {
  // The controller name (`klutch-<binary>-<kind>`), reported in events.
  std::string name;
  // Used by AddRateLimited/Forget/NumRequeues; nullptr means DefaultControllerRateLimiter(*clock).
  std::unique_ptr<RateLimiter> rate_limiter;
  // Time source for delays and latencies; nullptr means core::RealClock::Get(). Must outlive
  // the queue.
  const core::Clock* clock = nullptr;
  // Called for each event, never with the queue's lock held, on the thread that caused it (the
  // timer thread for delayed adds); may run concurrently with itself, so it must be thread-safe
  // and must not block for long. Events of different threads may arrive out of order.
  std::function<void(const WorkQueueEvent&)> on_event;
};

class WorkQueue {
 public:
  explicit WorkQueue(WorkQueueOptions options);
  // Shuts the queue down and joins the timer thread. No thread may still be blocked in Get().
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `item` unless it is already queued (de-duplicated). If it is being processed it is
  // marked dirty and queued again by Done(). Ignored once shutting down.
  void Add(const std::string& item);
  // Adds `item` after `delay` (immediately when delay <= 0). While it waits, a second AddAfter
  // only moves its time earlier, never later. Ignored once shutting down; waiting items are
  // dropped by ShutDown.
  void AddAfter(const std::string& item, std::chrono::nanoseconds delay);
  // AddAfter(item, rate_limiter.When(item)).
  void AddRateLimited(const std::string& item);
  // Resets the item's backoff in the rate limiter (does not remove it from the queue).
  void Forget(const std::string& item);
  // The rate limiter's requeue count for `item`.
  int NumRequeues(const std::string& item);

  // Blocks until an item is available and returns it, now marked as processing: the caller
  // must call Done(item) when finished. Returns nullopt once the queue is shutting down and
  // has no queued items left (queued items are still handed out after ShutDown).
  std::optional<std::string> Get();
  // Marks the end of processing an item returned by Get(); if it was added meanwhile it is
  // queued again (also while shutting down). A Done for an item not being processed is ignored.
  void Done(const std::string& item);
  // Items queued and ready for Get (not counting items being processed or waiting in AddAfter).
  size_t Len() const;

  // Stops accepting items and drops waiting (delayed) items; wakes every Get(), which returns
  // the remaining queued items and then nullopt. Idempotent.
  void ShutDown();
  // ShutDown, then blocks until no item handed out by Get() is still being processed (items
  // still queued are not waited for unless a worker takes them). A ShutDown() from another
  // thread ends the wait early, as in client-go.
  void ShutDownWithDrain();
  bool ShuttingDown() const;

 private:
  using TimePoint = core::MonoTime;
  // The waiting set, ordered by ready time, then by insertion for ties.
  using WaitKey = std::tuple<TimePoint, uint64_t, std::string>;

  void AddLocked(const std::string& item, std::vector<WorkQueueEvent>& events) REQUIRES(mu_);
  WorkQueueEvent Event(WorkQueueEvent::Type type, const std::string& item) const REQUIRES(mu_);
  void Emit(std::vector<WorkQueueEvent>& events) const EXCLUDES(mu_);
  void RunTimer() EXCLUDES(mu_);

  const std::string name_;
  const core::Clock& clock_;
  const std::unique_ptr<RateLimiter> rate_limiter_;
  const std::function<void(const WorkQueueEvent&)> on_event_;

  mutable core::Mutex mu_;
  core::CondVar get_cv_;    // an item was queued, or shutdown
  core::CondVar drain_cv_;  // processing_ became empty, or a plain ShutDown
  core::CondVar timer_cv_;  // waiting_ changed, or shutdown
  std::deque<std::string> queue_ GUARDED_BY(mu_);
  std::unordered_set<std::string> dirty_ GUARDED_BY(mu_);
  std::unordered_set<std::string> processing_ GUARDED_BY(mu_);
  std::unordered_map<std::string, TimePoint> added_at_ GUARDED_BY(mu_);    // dirty since
  std::unordered_map<std::string, TimePoint> started_at_ GUARDED_BY(mu_);  // processing since
  std::unordered_map<std::string, std::chrono::nanoseconds> latency_ GUARDED_BY(mu_);
  std::set<WaitKey> waiting_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::set<WaitKey>::iterator> waiting_index_ GUARDED_BY(mu_);
  uint64_t waiting_seq_ GUARDED_BY(mu_) = 0;
  bool shutting_down_ GUARDED_BY(mu_) = false;
  bool drain_ GUARDED_BY(mu_) = false;
  std::thread timer_ GUARDED_BY(mu_);
};

}  // namespace klutch::client
