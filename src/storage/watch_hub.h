// WatchHub: the watcher registry and ordered fan-out shared by the store backends.
//
// Backends call Dispatch() with each committed batch of events, in revision order. A new
// watcher is registered in catch-up mode: the backend replays history up to the revision
// Register() reports, while live events for it are buffered; FinishCatchUp() then flushes the
// buffer and makes the watcher live. This gives every watcher each change exactly once, in
// order, with no gap between history and live events. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/sync.h"
#include "storage/store.h"

namespace klutch::storage {

class WatchHub {
 public:
  struct Registration {
    uint64_t id = 0;
    // The backend must replay history in (after_revision, history_until] itself; later events
    // reach the watcher through Dispatch().
    int64_t history_until = 0;
  };

  // `current_revision`: the revision of the last batch given to Dispatch() (read under the
  // hub's lock, so it is exact). Exposed for backends that initialize it on open.
  explicit WatchHub(int64_t current_revision = 0) : dispatched_(current_revision) {}

  Registration Register(std::string prefix, int64_t after_revision, WatchCallback callback);
  // Delivers `history` (already filtered to the prefix and range) and then any buffered live
  // events, and makes the watcher live.
  void FinishCatchUp(uint64_t id, const std::vector<EventPtr>& history);
  void Unregister(uint64_t id);
  // Fans out one committed batch (revision order) and records its last revision.
  void Dispatch(const std::vector<EventPtr>& events);
  int64_t dispatched_revision() const;

  // A handle that unregisters on destruction.
  std::unique_ptr<WatchHandle> MakeHandle(uint64_t id);

 private:
  struct Watcher {
    std::string prefix;
    int64_t after_revision = 0;
    WatchCallback callback;
    bool live = false;
    std::vector<EventPtr> buffered;
  };

  static void Deliver(Watcher& w, const std::vector<EventPtr>& events);

  mutable core::Mutex mu_;
  int64_t dispatched_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<Watcher>> watchers_ GUARDED_BY(mu_);
};

}  // namespace klutch::storage
