#include "reconcile/controller.h"

#include <exception>

#include "core/log.h"
#include "machinery/object.h"
#include "reconcile/metrics.h"

namespace klutch::reconcile {

Request Request::FromKey(std::string_view key) {
  std::string resource;
  // Names and namespaces never contain '#'.
  if (auto hash = key.find('#'); hash != std::string_view::npos) {
    resource = std::string(key.substr(0, hash));
    key.remove_prefix(hash + 1);
  }
  auto slash = key.find('/');
  if (slash == std::string_view::npos) return {"", std::string(key), resource};
  return {std::string(key.substr(0, slash)), std::string(key.substr(slash + 1)), resource};
}

MapFunc MapByLabels(std::string namespace_label, std::string name_label) {
  return [ns_label = std::move(namespace_label),
          name_label = std::move(name_label)](const Json& o) -> std::vector<Request> {
    const Json* labels = machinery::Find(o, {"metadata", "labels"});
    if (!labels || !labels->is_object()) return {};
    std::string name = machinery::GetString(*labels, {name_label});
    if (name.empty()) return {};
    std::string ns =
        ns_label.empty() ? machinery::Namespace(o) : machinery::GetString(*labels, {ns_label});
    return {{ns, name}};
  };
}

MapFunc MapToControllingOwner(std::string owner_group, std::string owner_kind,
                              bool owner_namespaced) {
  return [group = std::move(owner_group), kind = std::move(owner_kind),
          owner_namespaced](const Json& o) -> std::vector<Request> {
    const Json* refs = machinery::Find(o, {"metadata", "ownerReferences"});
    if (!refs || !refs->is_array()) return {};
    for (const auto& ref : *refs) {
      const Json* controller = machinery::Find(ref, {"controller"});
      if (!controller || !controller->is_boolean() || !controller->get<bool>()) continue;
      auto gv = machinery::ParseApiVersion(machinery::GetString(ref, {"apiVersion"}));
      if (gv.group != group || machinery::GetString(ref, {"kind"}) != kind) continue;
      return {
          {owner_namespaced ? machinery::Namespace(o) : "", machinery::GetString(ref, {"name"})}};
    }
    return {};
  };
}

namespace {
const core::Clock& ClockOf(const ControllerOptions& options) {
  return options.clock ? *options.clock : core::RealClock::Get();
}

client::WorkQueueOptions QueueOptions(const std::string& name, ControllerOptions& options) {
  client::WorkQueueOptions q;
  q.name = name;
  q.clock = &ClockOf(options);
  q.rate_limiter = options.rate_limiter ? std::move(options.rate_limiter)
                                        : client::DefaultControllerRateLimiter(ClockOf(options));
  if (Metrics* m = options.metrics) {
    q.on_event = [m](const client::WorkQueueEvent& e) { m->OnQueueEvent(e); };
  }
  return q;
}
}  // namespace

Controller::Controller(std::string name, Reconciler& reconciler, ControllerOptions options)
    : name_(name),
      reconciler_(reconciler),
      metrics_(options.metrics),
      clock_(ClockOf(options)),
      workers_count_(std::max(1, options.workers)),
      queue_(QueueOptions(name, options)) {}

Controller::~Controller() { Stop(); }

void Controller::Enqueue(const std::vector<Request>& requests) {
  for (const auto& r : requests) {
    if (!r.name.empty()) queue_.Add(r.Key());
  }
}

void Controller::For(client::Informer& informer, std::function<bool(const Json&)> predicate) {
  auto self = [this, predicate](const client::ObjectPtr& o) {
    if (!predicate || predicate(*o)) queue_.Add(client::ObjectKey(*o));
  };
  // An update passes when either state matches: an object leaving the selection (a label
  // removed) needs its reconcile as much as one entering it.
  auto update = [this, predicate](const client::ObjectPtr& old, const client::ObjectPtr& o) {
    if (!predicate || predicate(*o) || predicate(*old)) queue_.Add(client::ObjectKey(*o));
  };
  informer.AddEventHandler({.on_add = self, .on_update = update, .on_delete = self});
}

void Controller::Owns(client::Informer& informer, std::string owner_group, std::string owner_kind,
                      bool owner_namespaced) {
  Watches(informer,
          MapToControllingOwner(std::move(owner_group), std::move(owner_kind), owner_namespaced));
}

void Controller::Watches(client::Informer& informer, MapFunc map) {
  informer.AddEventHandler(
      {.on_add = [this, map](const client::ObjectPtr& o) { Enqueue(map(*o)); },
       .on_update =
           [this, map](const client::ObjectPtr& old, const client::ObjectPtr& o) {
             // Both: an object that moved from one owner to another concerns both.
             Enqueue(map(*o));
             if (old != o) Enqueue(map(*old));
           },
       .on_delete = [this, map](const client::ObjectPtr& o) { Enqueue(map(*o)); }});
}

void Controller::Start() {
  core::MutexLock lock(mu_);
  if (started_ || queue_.ShuttingDown()) return;
  started_ = true;
  for (int i = 0; i < workers_count_; ++i) workers_.emplace_back([this] { Worker(); });
}

void Controller::Stop() {
  // Keys still queued are not reconciled any more (a replica that lost its lease must stop
  // writing at once); only reconciles already running finish.
  stopping_ = true;
  queue_.ShutDownWithDrain();
  std::vector<std::thread> workers;
  {
    core::MutexLock lock(mu_);
    workers.swap(workers_);
  }
  for (auto& w : workers) w.join();
}

void Controller::Worker() {
  while (auto key = queue_.Get()) {
    if (!stopping_) ProcessOne(*key);
    queue_.Done(*key);
  }
}

void Controller::ProcessOne(const std::string& key) {
  const core::MonoTime started = clock_.MonotonicNow();
  core::Result<Result> r = core::Internal("not run");
  try {
    r = reconciler_.Reconcile(Request::FromKey(key));
  } catch (const std::exception& e) {
    // A reconciler bug must not take the process down: treat it as an error and back off.
    r = core::Internal(std::string("reconcile threw: ") + e.what());
  }
  double secs = std::chrono::duration<double>(clock_.MonotonicNow() - started).count();
  std::string_view outcome;
  if (!r.ok()) {
    outcome = "error";
    if (!core::IsConflict(r.status())) {
      KLUTCH_LOG(kWarn, name_, "reconcile {} failed (attempt {}): {}", key,
                 queue_.NumRequeues(key) + 1, r.status().ToString());
    }
    queue_.AddRateLimited(key);
  } else if (r->requeue_after.count() > 0) {
    outcome = "requeue_after";
    queue_.Forget(key);
    queue_.AddAfter(key, r->requeue_after);
  } else if (r->requeue) {
    outcome = "requeue";
    queue_.AddRateLimited(key);
  } else {
    outcome = "success";
    queue_.Forget(key);
  }
  if (metrics_) metrics_->OnReconcile(name_, outcome, secs);
}

}  // namespace klutch::reconcile
