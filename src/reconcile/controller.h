// Controller: the one way this project runs reconcile loops.
//
// A Controller owns a rate-limited WorkQueue of "namespace/name" keys and N worker threads
// that hand each key to a Reconciler. Event sources are informers: For() queues the object
// itself, Owns() queues the controlling owner named in ownerReferences, Watches() queues
// whatever a mapping function returns (e.g. MapByLabels). A key is never reconciled by two
// workers at once; events for a key being reconciled queue it once more afterwards.
//
// The Reconciler's answer decides what happens next: an error requeues with per-item
// exponential backoff (a Conflict silently: another writer won, the next pass sees its
// write), Requeue() backs off the same way without an error, RequeueAfter(d) comes back
// after d (at least 1 ms: a computed wait that came out as zero or less, e.g. a deadline that
// just passed, means "again now", never "done"), Done() forgets the key's backoff. Reconcilers are
// level-triggered: they read the current state (the informer cache) and must not rely on which
// event queued the key. Thread-safe.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/informer.h"
#include "client/workqueue.h"
#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"

namespace klutch::reconcile {

class Metrics;
using client::Json;

struct Request {
  std::string ns;  // "" for cluster-scoped objects
  std::string name;
  // For controllers that span many resources (the garbage collector): which one, as
  // "resource.group" ("configmaps", "deployments.apps"); empty for the usual one-kind
  // controller.
  std::string resource = {};
  // "namespace/name" or "name", as client::ObjectKey; prefixed "resource#" when set.
  std::string Key() const {
    std::string k = ns.empty() ? name : ns + "/" + name;
    return resource.empty() ? k : resource + "#" + k;
  }
  static Request FromKey(std::string_view key);
  bool operator==(const Request&) const = default;
};

struct Result {
  bool requeue = false;
  std::chrono::milliseconds requeue_after{0};
  static Result Done() { return {}; }
  static Result Requeue() { return {.requeue = true}; }
  static Result RequeueAfter(std::chrono::milliseconds d) {
    return {.requeue_after = std::max(d, std::chrono::milliseconds(1))};
  }
};

class Reconciler {
 public:
  virtual ~Reconciler() = default;
  virtual core::Result<Result> Reconcile(const Request& request) = 0;
};

// Adapts a function to a Reconciler.
class FuncReconciler final : public Reconciler {
 public:
  explicit FuncReconciler(std::function<core::Result<Result>(const Request&)> fn)
      : fn_(std::move(fn)) {}
  core::Result<Result> Reconcile(const Request& r) override { return fn_(r); }

 private:
  std::function<core::Result<Result>(const Request&)> fn_;
};

using MapFunc = std::function<std::vector<Request>(const Json& object)>;

// Maps an object to the object named by two of its labels (namespace label may be empty:
// then the object's own namespace is used). Objects without the name label map to nothing.
MapFunc MapByLabels(std::string namespace_label, std::string name_label);
// Maps an object to its controlling owner (ownerReferences[controller=true]) when that
// owner has the given API group and kind; cluster-scoped owners get ns "".
MapFunc MapToControllingOwner(std::string owner_group, std::string owner_kind,
                              bool owner_namespaced = true);

struct ControllerOptions {
  int workers = 1;
  // Default: client::DefaultControllerRateLimiter on `clock`.
  std::unique_ptr<client::RateLimiter> rate_limiter;
  Metrics* metrics = nullptr;  // optional
  // Time for backoff, RequeueAfter and reconcile durations (nullptr: core::RealClock::Get());
  // must outlive the controller.
  const core::Clock* clock = nullptr;
};

class Controller {
 public:
  // `name` follows klutch-<binary>-<kind>; it names the queue, logs and metrics.
  Controller(std::string name, Reconciler& reconciler, ControllerOptions options = {});
  ~Controller();  // Stop()
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Event sources; add them before the informers start so the first list reaches them.
  // `predicate`, when set, filters which objects queue a key (an update when the old or
  // the new state passes).
  void For(client::Informer& informer, std::function<bool(const Json&)> predicate = {});
  void Owns(client::Informer& informer, std::string owner_group, std::string owner_kind,
            bool owner_namespaced = true);
  void Watches(client::Informer& informer, MapFunc map);

  // Starts the workers. Idempotent.
  void Start();
  // Stops taking keys, waits for the reconciles in flight, joins the workers. Idempotent.
  void Stop();

  client::WorkQueue& queue() { return queue_; }
  const std::string& name() const { return name_; }

 private:
  void Worker();
  void ProcessOne(const std::string& key);
  void Enqueue(const std::vector<Request>& requests);

  std::string name_;
  Reconciler& reconciler_;
  Metrics* metrics_;
  const core::Clock& clock_;
  int workers_count_;
  client::WorkQueue queue_;
  core::Mutex mu_;
  bool started_ GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> workers_ GUARDED_BY(mu_);
};

}  // namespace klutch::reconcile
