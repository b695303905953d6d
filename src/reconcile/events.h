// EventRecorder: how a controller tells the user "what went wrong and what to do" as a
// core/v1 Event on the user's object, the way client-go's record.EventRecorder does, so it
// shows in `kubectl describe` and `kubectl get events`.
//
// Event() only stamps the event (wall time of the injected clock) and queues it; one
// background thread sends it, so a reconciler never blocks on the API. The queue is bounded:
// when full, or after Stop(), events are dropped and counted (dropped()). An event goes to
// the object's namespace ("default" for cluster-scoped objects) under the name
// `<object name>.<hex suffix>` (the suffix: the clock's nanoseconds, bumped to be unique in
// the process). A simplified EventCorrelator aggregates repeats: an event identical to one
// sent before (same involved object uid, type, reason and message) whose previous occurrence
// is less than `aggregation_window` ago (clock's monotonic time) increments `count` and
// moves `lastTimestamp` of the existing Event with a merge patch; when that Event is gone
// (NotFound) a new one is created with count 1. Each send is tried once (the RestClient's
// own retries apply); a failure is logged (component "events") and the event abandoned.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <string>
#include <string_view>
#include <thread>

#include "client/dynamic.h"
#include "core/clock.h"
#include "core/sync.h"

namespace klutch::reconcile {

using client::Json;

inline constexpr std::string_view kEventTypeNormal = "Normal";
inline constexpr std::string_view kEventTypeWarning = "Warning";
// Longer messages are cut to this many bytes (at a UTF-8 character boundary).
inline constexpr size_t kMaxEventMessageBytes = 1024;

// Who reports: source.component / reportingComponent (the controller's name, e.g.
// "klutch-konnector") and source.host / reportingInstance (e.g. the pod name).
struct EventSource {
  std::string component;
  std::string host;
};

struct EventRecorderOptions {
  // Events waiting to be sent at most; more are dropped.
  size_t queue_capacity = 1000;
  // An identical event within this long of the previous occurrence is aggregated.
  std::chrono::nanoseconds aggregation_window = std::chrono::minutes(10);
  // Distinct events remembered for aggregation (least recently seen forgotten first).
  size_t max_remembered = 4096;
};

class EventRecorder {
 public:
  // Starts the sending thread. `rest` and `clock` (nullptr: the real clock) must outlive the
  // recorder.
  EventRecorder(client::RestClient& rest, EventSource source, const core::Clock* clock = nullptr,
                EventRecorderOptions options = {});
  ~EventRecorder();  // Stop()
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Records an event about `object` (a Kubernetes object as JSON: apiVersion, kind and
  // metadata.name at least; namespace, uid and resourceVersion when it has them). `type` is
  // kEventTypeNormal or kEventTypeWarning, `reason` a CamelCase word, `message` human text.
  // Never blocks on the network. An object without kind or name, or another type, is a
  // programmer error: it is logged and nothing is recorded.
  void Event(const Json& object, std::string_view type, std::string_view reason,
             std::string_view message) EXCLUDES(mu_);

  // Waits (real time, at most `timeout`) until every event queued before the call has been
  // sent or abandoned; true when the queue drained. Returns true at once after Stop().
  bool Flush(std::chrono::nanoseconds timeout = std::chrono::nanoseconds::max()) EXCLUDES(mu_);

  // Stops the sending thread after the send in progress (if any); events still queued are
  // dropped (call Flush() first to deliver them). Idempotent.
  void Stop() EXCLUDES(mu_);

  // True once Stop() has begun: from then on Event() drops.
  bool stopped() const EXCLUDES(mu_);
  // Events never sent because the queue was full or the recorder stopped.
  uint64_t dropped() const EXCLUDES(mu_);

 private:
  struct Pending {
    Json involved;  // involvedObject
    std::string ns;
    std::string type;
    std::string reason;
    std::string message;
    core::SystemTime at;
    core::MonoTime mono_at;
  };
  // What the correlator remembers of a sent Event.
  struct Sent {
    std::string name;
    int64_t count = 0;
    core::MonoTime last_seen;
    std::list<std::string>::iterator lru;  // position in lru_
  };

  void Run() EXCLUDES(mu_);
  // Sends one event (create or aggregate); only the sending thread calls it.
  void Send(const Pending& event);
  void CreateEvent(const Pending& event, const std::string& key);
  void Remember(const std::string& key, std::string name, int64_t count, core::MonoTime at);

  client::ResourceClient events_;
  const EventSource source_;
  const core::Clock& clock_;
  const EventRecorderOptions options_;

  mutable core::Mutex mu_;
  core::CondVar changed_;  // queue_, finished_ or stopping_ changed
  std::deque<Pending> queue_ GUARDED_BY(mu_);
  uint64_t accepted_ GUARDED_BY(mu_) = 0;  // events ever queued
  uint64_t finished_ GUARDED_BY(mu_) = 0;  // of those: sent, abandoned or dropped at Stop()
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t dropped_ GUARDED_BY(mu_) = 0;
  std::thread thread_ GUARDED_BY(mu_);

  // Only the sending thread touches these: the correlator's memory, keyed by
  // uid, type, reason and message.
  std::map<std::string, Sent> sent_;
  std::list<std::string> lru_;  // keys of sent_, most recently seen first
};

}  // namespace klutch::reconcile
