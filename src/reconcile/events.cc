#include "reconcile/events.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <utility>

#include "core/log.h"
#include "machinery/json.h"
#include "machinery/object.h"

namespace klutch::reconcile {

namespace {

constexpr std::string_view kLog = "events";

// At most kMaxEventMessageBytes, never splitting a UTF-8 character.
std::string Truncate(std::string_view message) {
  if (message.size() <= kMaxEventMessageBytes) return std::string(message);
  size_t cut = kMaxEventMessageBytes;
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return std::string(message.substr(0, cut));
}

// `<object name>.<hex>`: the hex is the event's wall time in nanoseconds as in client-go,
// bumped past the last suffix handed out in this process so that events stamped in the same
// instant (a coarse or simulated clock) still get distinct names.
std::string UniqueName(const std::string& object_name, core::SystemTime at) {
  static std::atomic<uint64_t> last{0};
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch());
  const uint64_t wanted = ns.count() > 0 ? static_cast<uint64_t>(ns.count()) : 0;
  uint64_t previous = last.load();
  uint64_t chosen = 0;
  do {
    chosen = std::max(wanted, previous + 1);
  } while (!last.compare_exchange_weak(previous, chosen));
  return fmt::format("{}.{:x}", object_name, chosen);
}

void SetIfNotEmpty(Json& target, const char* key, const std::string& value) {
  if (!value.empty()) target[key] = value;
}

}  // namespace

EventRecorder::EventRecorder(client::RestClient& rest, EventSource source, const core::Clock* clock,
                             EventRecorderOptions options)
    : events_(rest, client::resources::kEvents),
      source_(std::move(source)),
      clock_(clock ? *clock : core::RealClock::Get()),
      options_(options) {
  core::MutexLock lock(mu_);
  thread_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() { Stop(); }

void EventRecorder::Event(const Json& object, std::string_view type, std::string_view reason,
                          std::string_view message) {
  const std::string name = machinery::Name(object);
  const std::string kind = machinery::Kind(object);
  if (name.empty() || kind.empty()) {
    KLUTCH_LOG(kError, kLog, "not recording event {} ({}): the object has no kind or name", reason,
               message);
    return;
  }
  if (type != kEventTypeNormal && type != kEventTypeWarning) {
    KLUTCH_LOG(kError, kLog, "not recording event {} on {} {}: unsupported type \"{}\"", reason,
               kind, name, type);
    return;
  }
  Pending event;
  event.involved = Json::object();
  SetIfNotEmpty(event.involved, "apiVersion", machinery::ApiVersionOf(object));
  event.involved["kind"] = kind;
  event.involved["name"] = name;
  const std::string ns = machinery::Namespace(object);
  SetIfNotEmpty(event.involved, "namespace", ns);
  SetIfNotEmpty(event.involved, "uid", machinery::Uid(object));
  SetIfNotEmpty(event.involved, "resourceVersion", machinery::ResourceVersion(object));
  // Cluster-scoped objects' events live in "default", as client-go puts them.
  event.ns = ns.empty() ? "default" : ns;
  event.type = std::string(type);
  event.reason = std::string(reason);
  event.message = Truncate(message);
  event.at = clock_.Now();
  event.mono_at = clock_.MonotonicNow();

  uint64_t dropped = 0;
  {
    core::MutexLock lock(mu_);
    if (!stopping_ && queue_.size() < options_.queue_capacity) {
      queue_.push_back(std::move(event));
      ++accepted_;
    } else {
      dropped = ++dropped_;
    }
  }
  if (dropped == 0) {
    changed_.SignalAll();
  } else if (std::has_single_bit(dropped)) {  // 1, 2, 4, ...: a flood logs a few lines only
    KLUTCH_LOG(kWarn, kLog, "dropped event {} on {} {} (recorder full or stopped; {} dropped)",
               reason, kind, name, dropped);
  }
}

bool EventRecorder::Flush(std::chrono::nanoseconds timeout) {
  const auto deadline = core::CondVar::DeadlineAfter(timeout);
  core::MutexLock lock(mu_);
  const uint64_t target = accepted_;
  while (finished_ < target) {
    if (!changed_.WaitUntil(mu_, deadline)) return finished_ >= target;
  }
  return true;
}

void EventRecorder::Stop() {
  std::thread thread;
  {
    core::MutexLock lock(mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  changed_.SignalAll();
  if (thread.joinable()) thread.join();
}

bool EventRecorder::stopped() const {
  core::MutexLock lock(mu_);
  return stopping_;
}

uint64_t EventRecorder::dropped() const {
  core::MutexLock lock(mu_);
  return dropped_;
}

void EventRecorder::Run() {
  for (;;) {
    Pending event;
    {
      core::MutexLock lock(mu_);
      while (!stopping_ && queue_.empty()) changed_.Wait(mu_);
      if (stopping_) {
        if (!queue_.empty()) {
          KLUTCH_LOG(kWarn, kLog, "stopping: dropped {} unsent events", queue_.size());
        }
        dropped_ += queue_.size();
        finished_ += queue_.size();
        queue_.clear();
        break;
      }
      event = std::move(queue_.front());
      queue_.pop_front();
    }
    Send(event);
    {
      core::MutexLock lock(mu_);
      ++finished_;
    }
    changed_.SignalAll();
  }
  changed_.SignalAll();
}

void EventRecorder::Send(const Pending& event) {
  // Identical events: same object (its uid, and its kind/namespace/name for objects not
  // read from a server), type, reason and message.
  std::string key;
  for (const std::string& part :
       {machinery::GetString(event.involved, {"uid"}),
        machinery::GetString(event.involved, {"kind"}), event.ns,
        machinery::GetString(event.involved, {"name"}), event.type, event.reason}) {
    key += part;
    key += '\0';
  }
  key += event.message;
  auto it = sent_.find(key);
  if (it != sent_.end() && event.mono_at - it->second.last_seen < options_.aggregation_window) {
    const std::string name = it->second.name;
    const int64_t count = it->second.count + 1;
    const Json patch = {{"count", count},
                        {"lastTimestamp", core::FormatTime(event.at)},
                        {"message", event.message}};
    auto r =
        events_.Namespace(event.ns).Patch(name, client::PatchType::kMerge, machinery::Dump(patch));
    if (r.ok()) {
      Remember(key, name, count, event.mono_at);
      return;
    }
    if (!core::IsNotFound(r.status())) {
      KLUTCH_LOG(kWarn, kLog, "could not update event {}/{} ({} {}): {}", event.ns, name,
                 event.reason, event.message, r.status().ToString());
      return;
    }
    // The Event was deleted (expired, or by hand): start a new one.
    lru_.erase(it->second.lru);
    sent_.erase(it);
  }
  CreateEvent(event, key);
}

void EventRecorder::CreateEvent(const Pending& event, const std::string& key) {
  const std::string name = UniqueName(machinery::GetString(event.involved, {"name"}), event.at);
  const std::string at = core::FormatTime(event.at);
  Json source = {{"component", source_.component}};
  SetIfNotEmpty(source, "host", source_.host);
  Json object = {{"apiVersion", "v1"},
                 {"kind", "Event"},
                 {"metadata", {{"name", name}, {"namespace", event.ns}}},
                 {"involvedObject", event.involved},
                 {"reason", event.reason},
                 {"message", event.message},
                 {"type", event.type},
                 {"source", std::move(source)},
                 {"reportingComponent", source_.component},
                 {"firstTimestamp", at},
                 {"lastTimestamp", at},
                 {"count", 1}};
  SetIfNotEmpty(object, "reportingInstance", source_.host);
  auto r = events_.Namespace(event.ns).Create(object);
  if (!r.ok()) {
    KLUTCH_LOG(kWarn, kLog, "could not record event {} ({}) on {} {}/{}: {}", event.reason,
               event.message, machinery::GetString(event.involved, {"kind"}), event.ns,
               machinery::GetString(event.involved, {"name"}), r.status().ToString());
    return;
  }
  Remember(key, name, 1, event.mono_at);
}

void EventRecorder::Remember(const std::string& key, std::string name, int64_t count,
                             core::MonoTime at) {
  auto [it, inserted] = sent_.try_emplace(key);
  if (!inserted) lru_.erase(it->second.lru);
  lru_.push_front(key);
  it->second.name = std::move(name);
  it->second.count = count;
  it->second.last_seen = at;
  it->second.lru = lru_.begin();
  while (sent_.size() > std::max<size_t>(options_.max_remembered, 1)) {
    sent_.erase(lru_.back());
    lru_.pop_back();
  }
}

}  // namespace klutch::reconcile
