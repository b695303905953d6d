#include "controllers/store_controller.h"

#include <algorithm>
#include <exception>

#include "core/log.h"
#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::controllers {

std::optional<ObjectKey> ParseKey(const apiserver::Registry& registry, std::string_view key) {
  auto parts = core::Split(key, '/');
  // "", "registry", group, plural, [ns], name
  if (parts.size() < 5 || parts[1] != "registry") return std::nullopt;
  ObjectKey k;
  k.group = parts[2] == "core" ? "" : std::string(parts[2]);
  k.plural = std::string(parts[3]);
  auto r = registry.FindStored(k.group, k.plural);
  if (!r) return std::nullopt;
  if (r->namespaced) {
    if (parts.size() != 6) return std::nullopt;
    k.ns = std::string(parts[4]);
    k.name = std::string(parts[5]);
  } else {
    if (parts.size() != 5) return std::nullopt;
    k.name = std::string(parts[4]);
  }
  return k;
}

StoreController::StoreController(std::string name, apiserver::RestStorage& storage,
                                 std::vector<std::string> prefixes)
    : storage_(storage), name_(std::move(name)), prefixes_(std::move(prefixes)) {}

StoreController::~StoreController() { Stop(); }

core::Status StoreController::Start() {
  for (const auto& prefix : prefixes_) {
    storage::ListRequest req;
    req.prefix = prefix;
    KLUTCH_ASSIGN_OR_RETURN(storage::ListResult list, storage_.store().List(req));
    for (const auto& kv : list.items) Observe(kv);
    KLUTCH_ASSIGN_OR_RETURN(
        auto handle, storage_.store().Watch(prefix, list.revision,
                                            [this](const std::vector<storage::EventPtr>& events) {
                                              QueueEvents(events);
                                            }));
    watches_.push_back(std::move(handle));
  }
  worker_ = std::thread([this] { Run(); });
  return core::Status::Ok();
}

void StoreController::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  watches_.clear();
  if (worker_.joinable()) worker_.join();
}

std::vector<std::string> StoreController::Map(const storage::Event& event) { return {event.key}; }

void StoreController::Observe(const storage::KeyValue& kv) { Enqueue(kv.key); }

void StoreController::QueueEvents(const std::vector<storage::EventPtr>& events) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.insert(events_.end(), events.begin(), events.end());
  }
  cv_.notify_all();
}

void StoreController::PushReady(const std::string& key) {
  if (ready_set_.insert(key).second) ready_.push_back(key);
}

void StoreController::Enqueue(const std::string& key, std::chrono::milliseconds delay) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (delay.count() <= 0) {
      PushReady(key);
    } else if (!ready_set_.count(key)) {
      delayed_.emplace(std::chrono::steady_clock::now() + delay, key);
    }
  }
  cv_.notify_all();
}

void StoreController::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    // Events first: mapping them may parse objects, which is why it happens here and not on
    // the store's writer thread.
    if (!events_.empty()) {
      std::deque<storage::EventPtr> events;
      events.swap(events_);
      lock.unlock();
      std::vector<std::string> keys;
      for (const auto& e : events) {
        try {
          for (auto& k : Map(*e)) keys.push_back(std::move(k));
        } catch (const std::exception& ex) {
          KLUTCH_LOG(kWarn, name_, "mapping the event for {} threw: {}", e->key, ex.what());
        }
      }
      lock.lock();
      for (const auto& k : keys) PushReady(k);
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    while (!delayed_.empty() && delayed_.begin()->first <= now) {
      PushReady(delayed_.begin()->second);
      delayed_.erase(delayed_.begin());
    }
    if (ready_.empty()) {
      if (delayed_.empty()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, delayed_.begin()->first);
      }
      continue;
    }
    std::string key = std::move(ready_.front());
    ready_.pop_front();
    ready_set_.erase(key);
    lock.unlock();
    core::Status st;
    try {
      st = Reconcile(key);
    } catch (const std::exception& e) {
      // A bug or an object nobody expected: log, back off, try again later.
      st = core::Internal(fmt::format("reconcile threw: {}", e.what()));
    }
    lock.lock();
    if (st.ok()) {
      failures_.erase(key);
      continue;
    }
    int n = ++failures_[key];
    auto backoff = std::chrono::milliseconds(std::min(5000, 20 << std::min(n, 8)));
    if (!core::IsConflict(st)) {
      KLUTCH_LOG(kWarn, name_, "reconcile {} failed (attempt {}): {}", key, n, st.message());
    }
    if (!ready_set_.count(key)) delayed_.emplace(std::chrono::steady_clock::now() + backoff, key);
  }
}

}  // namespace klutch::controllers
