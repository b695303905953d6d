// StoreController: a minimal level-triggered controller loop over storage keys, used by the
// API server's own controllers until the shared framework (src/reconcile, issue #3) exists.
//
// It lists every key under its prefixes, then watches them from the list's revision. Watch
// callbacks only queue the events (they run on the store's writer thread); the controller's
// own thread maps each event to keys (Map()), then reconciles keys one at a time. A key is
// never queued twice; failures requeue with exponential backoff. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "apiserver/rest_storage.h"
#include "core/status.h"
#include "core/sync.h"

namespace klutch::controllers {

using apiserver::Json;

// A storage key split into its parts: /registry/<group|core>/<plural>/[<ns>/]<name>.
struct ObjectKey {
  std::string group;
  std::string plural;
  std::string ns;
  std::string name;
};
// nullopt for keys that do not have that shape. Namespaced-ness comes from the registry.
std::optional<ObjectKey> ParseKey(const apiserver::Registry& registry, std::string_view key);

class StoreController {
 public:
  StoreController(std::string name, apiserver::RestStorage& storage,
                  std::vector<std::string> prefixes);
  virtual ~StoreController();

  // Lists, starts watching and starts the worker. Errors come from the initial list.
  core::Status Start();
  void Stop();

  // Queues a key now or after `delay` (coalescing with an already queued key).
  void Enqueue(const std::string& key,
               std::chrono::milliseconds delay = std::chrono::milliseconds(0));

  const std::string& name() const { return name_; }

 protected:
  // Reconciles one key; a non-OK status requeues it with backoff.
  virtual core::Status Reconcile(const std::string& key) = 0;
  // Keys to enqueue for one event (default: the event's key).
  virtual std::vector<std::string> Map(const storage::Event& event);
  // Called for every key and value seen by the initial list (default: enqueue the key).
  virtual void Observe(const storage::KeyValue& kv);

  apiserver::RestStorage& storage_;

 private:
  void Run();

  std::string name_;
  std::vector<std::string> prefixes_;
  std::vector<std::unique_ptr<storage::WatchHandle>> watches_;
  using TimePoint = std::chrono::steady_clock::time_point;
  void PushReady(const std::string& key) REQUIRES(mu_);
  void QueueEvents(const std::vector<storage::EventPtr>& events);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<storage::EventPtr> events_ GUARDED_BY(mu_);  // from the watch, not yet mapped
  std::deque<std::string> ready_ GUARDED_BY(mu_);
  std::set<std::string> ready_set_ GUARDED_BY(mu_);
  std::multimap<TimePoint, std::string> delayed_ GUARDED_BY(mu_);
  std::map<std::string, int> failures_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace klutch::controllers
