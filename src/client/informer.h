// Informers: a local, always-converging copy of one resource, kept by a reflector that lists
// and then watches, with handlers told about every change.
//
// Indexer: the cache, keyed "namespace/name" (or "name" for cluster-scoped objects), with a
// namespace index and custom indexes (added before the first object). It hands out
// shared_ptr<const> objects that stay valid after they are replaced. Thread-safe.
//
// Informer: one reflector thread. It lists in pages and applies them together after the last
// one, so the cache moves from one consistent snapshot to the next: handlers get an add or
// update for each new or changed object (an unchanged resourceVersion is not re-delivered)
// and a delete for each object gone. It then watches from the list's resourceVersion with
// bookmarks and a randomized server-side timeout. A watch that ends, breaks, or stays silent
// past watch_idle_timeout resumes from the last resourceVersion seen (with backoff after
// errors); a 410 Gone or an undecodable stream starts over with a list. Objects are shaped
// before they are cached (managedFields stripped by default, metadata only on request, the
// options' transform). Handlers run on the reflector thread, one at a time and in the order
// of the server's events, so they must be quick (queue a key, return); a handler added after
// Start() first gets an add for each cached object. Resync re-delivers every cached object as
// an update once per resync_period. Backoff and resync wait on the injected core::Clock, so
// tests drive them with a FakeClock. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "client/dynamic.h"
#include "core/clock.h"
#include "core/sync.h"

namespace klutch::client {

// "namespace/name" or "name": the cache key of an object.
std::string ObjectKey(const Json& object);

class Indexer {
 public:
  using IndexFunc = std::function<std::vector<std::string>(const Json&)>;
  static constexpr const char* kNamespaceIndex = "namespace";

  Indexer();
  // Adds an index; only before the first object arrives (returns an error after).
  core::Status AddIndex(const std::string& name, IndexFunc fn);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> Keys() const;
  // Objects whose index `name` yields `value`; empty for an unknown index.
  std::vector<ObjectPtr> ByIndex(const std::string& name, const std::string& value) const;
  size_t Size() const;

  // Writers, for the informer (and tests). Return the previous object, if any.
  ObjectPtr Upsert(ObjectPtr object);
  ObjectPtr Delete(const std::string& key);

  // Keep objects serialized (CBOR) and parse them on every read: a fraction of a parsed
  // object's memory, for large caches read a few times per change. Readers then get a new
  // object per call (equal, not the same pointer). Only before the first object arrives.
  void SetCompact(bool compact);

 private:
  struct Slot {
    ObjectPtr object;    // parsed (not compact)
    std::string packed;  // CBOR (compact)
  };
  Slot Pack(ObjectPtr object) const REQUIRES(mu_);
  static ObjectPtr Unpack(const Slot& slot);
  void IndexLocked(const std::string& key, const Json* old_obj, const Json* new_obj) REQUIRES(mu_);
  mutable core::Mutex mu_;
  std::unordered_map<std::string, Slot> items_ GUARDED_BY(mu_);
  bool compact_ GUARDED_BY(mu_) = false;
  std::map<std::string, IndexFunc> index_funcs_ GUARDED_BY(mu_);
  // index name -> value -> keys
  std::map<std::string, std::unordered_map<std::string, std::set<std::string>>> indexes_
      GUARDED_BY(mu_);
};

struct EventHandler {
  std::function<void(const ObjectPtr&)> on_add;
  // old, new; on resync both are the same object.
  std::function<void(const ObjectPtr&, const ObjectPtr&)> on_update;
  // The last state the informer knew.
  std::function<void(const ObjectPtr&)> on_delete;
};

struct InformerOptions {
  std::string ns;  // "" = all namespaces (or cluster scope)
  std::string label_selector;
  std::string field_selector;
  std::chrono::milliseconds resync_period{0};  // 0 = never
  int64_t page_size = 500;
  // Keep only apiVersion, kind and metadata of each object (asks the server for
  // PartialObjectMetadata and strips whatever it sends anyway).
  bool metadata_only = false;
  // Cache objects serialized and parse them on each read (Indexer::SetCompact): for caches
  // of many objects that are read a few times per change, as a konnector's bound objects.
  bool compact = false;
  // Drop metadata.managedFields from cached objects: they are about a third of a small
  // object's memory and reconcilers rarely read them (controller-runtime's
  // TransformStripManagedFields). Turn off for a controller that inspects field ownership.
  bool strip_managed_fields = true;
  // Edits each object before it is cached and handed to handlers (e.g. dropping big fields
  // the controller never reads). Runs on the reflector thread.
  std::function<void(Json&)> transform;
  std::chrono::milliseconds min_backoff{100};
  std::chrono::milliseconds max_backoff{10000};
  // Watch requests ask the server to end them after a random time in [min, 2*min), as
  // client-go does, so load spreads and stale connections do not live forever.
  std::chrono::seconds min_watch_timeout{300};
  // A watch silent for this long (no event, no bookmark) is taken as cut and resumed: a
  // peer that vanished without closing the connection is noticed. Servers send bookmarks
  // about once a minute.
  std::chrono::milliseconds watch_idle_timeout{std::chrono::minutes(3)};
  // Called once on the reflector thread after the first list has been delivered.
  std::function<void()> on_synced;
  // Observes reflector restarts (metrics): "relist" or "rewatch".
  std::function<void(std::string_view what)> on_restart;
  // Time for resync and backoff (nullptr: core::RealClock::Get()); tests pass a FakeClock.
  // Must outlive the informer.
  const core::Clock* clock = nullptr;
};

class Informer {
 public:
  Informer(RestClient& rest, GroupVersionResource gvr, InformerOptions options = {});
  ~Informer();  // stops
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Handlers added before Start() see every object from the first list as an add; later
  // ones get adds for what is cached when they are added. Returns an id for
  // RemoveEventHandler.
  using HandlerId = uint64_t;
  HandlerId AddEventHandler(EventHandler handler);
  // Removes a handler: once this returns it is never called again (a delivery in progress
  // finishes first). Must not be called from a handler of this informer.
  void RemoveEventHandler(HandlerId id);
  Indexer& indexer() { return indexer_; }
  const GroupVersionResource& gvr() const { return gvr_; }

  void Start();
  void Stop();
  // True once the first list has been delivered.
  bool HasSynced() const { return synced_.HasBeenNotified(); }
  bool WaitForSync(std::chrono::milliseconds timeout) const { return synced_.WaitFor(timeout); }
  // The resourceVersion the cache reflects (the last list, event or bookmark).
  std::string LastResourceVersion() const;

 private:
  void Run() EXCLUDES(mu_);
  // One list: returns false when stopped.
  core::Status ListAndReplace() EXCLUDES(mu_);
  core::Status WatchOnce(bool& gone) EXCLUDES(mu_);
  void Deliver(EventType type, const ObjectPtr& obj) EXCLUDES(handlers_mu_);
  ObjectPtr Shape(Json object) const;
  void Resync() EXCLUDES(mu_, handlers_mu_);
  bool Stopping() const EXCLUDES(mu_);
  // Waits `d` on the clock unless stopped first; false when stopping.
  bool SleepFor(std::chrono::milliseconds d) EXCLUDES(mu_);
  bool ResyncDue() const REQUIRES(mu_);

  ResourceClient resource_;
  GroupVersionResource gvr_;
  InformerOptions options_;
  const core::Clock& clock_;
  Indexer indexer_;
  core::Notification synced_;

  core::Mutex handlers_mu_;  // held while delivering, so handlers are never called concurrently
  std::vector<std::pair<HandlerId, EventHandler>> handlers_ GUARDED_BY(handlers_mu_);
  HandlerId next_handler_id_ GUARDED_BY(handlers_mu_) = 1;

  mutable core::Mutex mu_;
  core::CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::string last_rv_ GUARDED_BY(mu_);
  StreamCanceller* canceller_ GUARDED_BY(mu_) = nullptr;
  std::thread thread_ GUARDED_BY(mu_);
  core::MonoTime next_resync_ GUARDED_BY(mu_);
};

}  // namespace klutch::client
