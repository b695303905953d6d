#include "storage/watch_hub.h"

#include "core/log.h"

namespace klutch::storage {

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xFF) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return end;
}

WatchHub::Registration WatchHub::Register(std::string prefix, int64_t after_revision,
                                          WatchCallback callback) {
  auto w = std::make_shared<Watcher>();
  w->prefix = std::move(prefix);
  w->after_revision = after_revision;
  w->callback = std::move(callback);
  core::MutexLock lock(mu_);
  uint64_t id = next_id_++;
  watchers_[id] = w;
  return {id, dispatched_};
}

void WatchHub::FinishCatchUp(uint64_t id, const std::vector<EventPtr>& history) {
  // Holding the lock while delivering keeps Dispatch() from interleaving live events with
  // the replay; callbacks are required to be quick.
  core::MutexLock lock(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  Watcher& w = *it->second;
  if (!history.empty()) Deliver(w, history);
  if (!w.buffered.empty()) {
    Deliver(w, w.buffered);
    w.buffered.clear();
    w.buffered.shrink_to_fit();
  }
  w.live = true;
}

void WatchHub::Deliver(Watcher& w, const std::vector<EventPtr>& events) {
  // A throwing callback is a bug in a watcher; it must not take the store's writer thread
  // (and every other watcher) down.
  try {
    w.callback(events);
  } catch (const std::exception& e) {
    KLUTCH_LOG(kError, "storage", "watch callback for {} threw: {}", w.prefix, e.what());
  }
}

void WatchHub::Unregister(uint64_t id) {
  core::MutexLock lock(mu_);
  watchers_.erase(id);
}

void WatchHub::Dispatch(const std::vector<EventPtr>& events) {
  if (events.empty()) return;
  core::MutexLock lock(mu_);
  for (auto& [id, w] : watchers_) {
    std::vector<EventPtr> matched;
    for (const auto& e : events) {
      if (e->revision <= w->after_revision) continue;
      if (e->key.compare(0, w->prefix.size(), w->prefix) != 0) continue;
      matched.push_back(e);
    }
    if (matched.empty()) continue;
    if (w->live) {
      Deliver(*w, matched);
    } else {
      w->buffered.insert(w->buffered.end(), matched.begin(), matched.end());
    }
  }
  dispatched_ = events.back()->revision;
}

int64_t WatchHub::dispatched_revision() const {
  core::MutexLock lock(mu_);
  return dispatched_;
}

namespace {
class HubHandle final : public WatchHandle {
 public:
  HubHandle(WatchHub* hub, uint64_t id) : hub_(hub), id_(id) {}
  ~HubHandle() override { hub_->Unregister(id_); }

 private:
  WatchHub* hub_;
  uint64_t id_;
};
}  // namespace

std::unique_ptr<WatchHandle> WatchHub::MakeHandle(uint64_t id) {
  return std::make_unique<HubHandle>(this, id);
}

}  // namespace klutch::storage
