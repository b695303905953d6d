#include "controllers/store_controller.h"

#include <algorithm>

#include "core/log.h"
#include "core/strings.h"

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
                                              for (const auto& e : events) {
                                                for (const auto& key : Map(*e)) Enqueue(key);
                                              }
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

void StoreController::Enqueue(const std::string& key, std::chrono::milliseconds delay) {
  auto when = std::chrono::steady_clock::now() + delay;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queued_.find(key);
    if (it == queued_.end()) {
      queued_[key] = when;
    } else {
      it->second = std::min(it->second, when);
    }
  }
  cv_.notify_all();
}

void StoreController::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (queued_.empty()) {
      cv_.wait(lock);
      continue;
    }
    auto next = std::min_element(queued_.begin(), queued_.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    auto now = std::chrono::steady_clock::now();
    if (next->second > now) {
      cv_.wait_until(lock, next->second);
      continue;
    }
    std::string key = next->first;
    queued_.erase(next);
    lock.unlock();
    core::Status st = Reconcile(key);
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
    auto when = std::chrono::steady_clock::now() + backoff;
    auto it = queued_.find(key);
    if (it == queued_.end() || it->second > when) queued_[key] = when;
  }
}

}  // namespace klutch::controllers
