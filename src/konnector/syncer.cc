// The syncers of one export (§4.8-§4.12): spec up to the provider, status down to the
// consumer, provider-created objects adopted. Keys: the spec controller works on consumer
// keys, status and adopt on provider keys; events of either side are mapped to both.
#include "apis/klutch/apiserviceexport.h"
#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "core/log.h"
#include "konnector/claims.h"
#include "konnector/internal.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

constexpr std::string_view kSyncedCondition = apis::klutch::kControlPlaneSyncedCondition;

bool Deleting(const Json& o) { return machinery::IsBeingDeleted(o); }

const Json& SpecOf(const Json& o) {
  static const Json kNull;
  const Json* s = machinery::Find(o, {"spec"});
  return s ? *s : kNull;
}

// `object` with our finalizer and the bound annotation (added when missing).
Json WithFinalizerAndBound(const Json& object) {
  Json modified = object;
  if (!machinery::HasFinalizer(object, apis::klutch::kSyncerFinalizer)) {
    Json& meta = machinery::MutableMetadata(modified);
    if (!meta.contains("finalizers") || !meta["finalizers"].is_array()) {
      meta["finalizers"] = Json::array();
    }
    meta["finalizers"].push_back(std::string(apis::klutch::kSyncerFinalizer));
  }
  if (!HasBoundAnnotation(object)) SetAnnotation(modified, apis::klutch::kBoundAnnotation, "true");
  return modified;
}

Json WithoutFinalizer(const Json& object) {
  Json modified = object;
  Json& meta = machinery::MutableMetadata(modified);
  Json kept = Json::array();
  for (const auto& f : machinery::Finalizers(object)) {
    if (f != apis::klutch::kSyncerFinalizer) kept.push_back(f);
  }
  meta["finalizers"] = std::move(kept);
  return modified;
}

}  // namespace

ExportSyncer::ExportSyncer(Connection& connection, const Json& export_object, const Json& binding,
                           std::string namespace_uid)
    : connection_(connection), ctx_(connection.ctx()), provider_ns_uid_(std::move(namespace_uid)) {
  name_ = machinery::Name(export_object);
  generation_ = Generation(export_object);
  gvr_ = {machinery::GetString(export_object, {"spec", "group"}), FirstServedVersion(export_object),
          machinery::GetString(export_object, {"spec", "names", "plural"})};
  kind_ = machinery::GetString(export_object, {"spec", "names", "kind"});
  namespaced_ = machinery::GetString(export_object, {"spec", "scope"}) != "Cluster";
  claims_ = AcceptedClaims(binding);
}

ExportSyncer::~ExportSyncer() { Stop(); }

std::string ExportSyncer::ProviderKey(const std::string& consumer_key) const {
  Request r = Request::FromKey(consumer_key);
  if (!namespaced_) return PrefixedName(connection_.provider_ns(), r.name);
  std::string pns = connection_.ProviderNamespaceFor(r.ns);
  return pns.empty() ? "" : pns + "/" + r.name;
}

std::string ExportSyncer::ConsumerKey(const std::string& provider_key) const {
  Request r = Request::FromKey(provider_key);
  if (!namespaced_) {
    auto name = UnprefixedName(connection_.provider_ns(), r.name);
    return name ? *name : "";
  }
  std::string cns = connection_.ConsumerNamespaceFor(r.ns);
  return cns.empty() ? "" : cns + "/" + r.name;
}

bool ExportSyncer::Ours(const Json& provider_object) const {
  // Cluster-scoped copies of every consumer share one provider scope: a prefix match alone
  // would take "team-a-x" of connection "team-a" for "a-x" of connection "team".
  return namespaced_ || Annotation(provider_object, apis::klutch::kClusterNamespaceAnnotation) ==
                            connection_.provider_ns();
}

ObjectPtr ExportSyncer::ProviderGet(const std::string& key) const {
  return namespaced_ ? provider_multi_->Get(key) : provider_cluster_->indexer().Get(key);
}

bool ExportSyncer::ProviderSynced(const std::string& key) const {
  if (!namespaced_) return provider_cluster_->HasSynced();
  return provider_multi_->HasSynced(Request::FromKey(key).ns);
}

void ExportSyncer::Touch(const std::string& direction, const std::string& key) {
  core::MutexLock lock(mu_);
  pending_.emplace(direction + ":" + key, ctx_.clock.MonotonicNow());
}

void ExportSyncer::Forget(const std::string& direction, const std::string& key) {
  core::MutexLock lock(mu_);
  pending_.erase(direction + ":" + key);
}

void ExportSyncer::Observe(const std::string& direction, const std::string& key) {
  core::MonoTime since;
  {
    core::MutexLock lock(mu_);
    auto it = pending_.find(direction + ":" + key);
    if (it == pending_.end()) return;
    since = it->second;
    pending_.erase(it);
  }
  std::chrono::duration<double> d = ctx_.clock.MonotonicNow() - since;
  ctx_.metrics.sync_seconds.Observe({{"direction", direction}, {"resource", gvr_.GroupResource()}},
                                    d.count());
}

core::Status ExportSyncer::Start() {
  if (gvr_.version.empty() || gvr_.resource.empty()) {
    return core::Invalid("APIServiceExport " + name_ + " has no served version");
  }
  // Bound objects are the bulk of a konnector's memory: cached serialized (ADR 0009).
  client::InformerOptions options{.compact = true, .clock = &ctx_.clock};
  consumer_ = std::make_unique<client::Informer>(ctx_.app, gvr_, options);
  if (namespaced_) {
    provider_multi_ =
        std::make_unique<client::MultiNamespaceInformer>(connection_.provider(), gvr_, options);
  } else {
    provider_cluster_ = std::make_unique<client::Informer>(connection_.provider(), gvr_, options);
  }
  const std::string prefix = "klutch-konnector-" + gvr_.GroupResource() + "-";
  auto make = [&](const std::string& name, auto fn, std::unique_ptr<reconcile::FuncReconciler>& r,
                  std::unique_ptr<reconcile::Controller>& c) {
    r = std::make_unique<reconcile::FuncReconciler>(std::move(fn));
    c = std::make_unique<reconcile::Controller>(
        prefix + name, *r,
        reconcile::ControllerOptions{.workers = ctx_.options.workers,
                                     .metrics = &ctx_.controller_metrics,
                                     .clock = &ctx_.clock});
  };
  make(
      "spec", [this](const Request& r) { return ReconcileSpec(r); }, spec_reconciler_, spec_);
  make(
      "status", [this](const Request& r) { return ReconcileStatus(r); }, status_reconciler_,
      status_);
  make(
      "adopt", [this](const Request& r) { return ReconcileAdopt(r); }, adopt_reconciler_, adopt_);

  consumer_->AddEventHandler(OnChange([this](const Json& d) {
    std::string key = client::ObjectKey(d);
    Touch("up", key);
    spec_->queue().Add(key);
    if (std::string pkey = ProviderKey(key); !pkey.empty()) {
      status_->queue().Add(pkey);
      adopt_->queue().Add(pkey);
    }
  }));
  auto on_provider = OnChange([this](const Json& u) {
    std::string key = client::ObjectKey(u);
    std::string ckey = ConsumerKey(key);
    if (ckey.empty() || !Ours(u)) return;  // another connection's namespace or prefix
    Touch("down", key);
    status_->queue().Add(key);
    adopt_->queue().Add(key);
    spec_->queue().Add(ckey);
  });
  if (namespaced_) {
    provider_multi_->AddEventHandler(on_provider);
    provider_multi_->OnSynced([this](const std::string& pns) {
      // Objects only the consumer has in this namespace become visible as missing upstream.
      std::string cns = connection_.ConsumerNamespaceFor(pns);
      if (cns.empty()) return;
      for (const auto& d : consumer_->indexer().ByIndex(client::Indexer::kNamespaceIndex, cns)) {
        spec_->queue().Add(client::ObjectKey(*d));
      }
    });
  } else {
    provider_cluster_->AddEventHandler(on_provider);
  }
  for (const Json& claim : claims_) {
    claim_syncers_.push_back(std::make_unique<ClaimSyncer>(connection_, claim));
  }
  consumer_->Start();
  if (namespaced_) {
    provider_multi_->Start();
  } else {
    provider_cluster_->Start();
  }
  for (auto& c : claim_syncers_) c->Start();
  spec_->Start();
  status_->Start();
  adopt_->Start();
  return core::Status::Ok();
}

void ExportSyncer::Stop() {
  for (auto* c : {spec_.get(), status_.get(), adopt_.get()}) {
    if (c) c->Stop();
  }
  for (auto& c : claim_syncers_) c->Stop();
  if (consumer_) consumer_->Stop();
  if (provider_multi_) provider_multi_->Stop();
  if (provider_cluster_) provider_cluster_->Stop();
}

void ExportSyncer::OnServiceNamespace(const Json& asn, bool deleted) {
  const std::string cns = machinery::Name(asn);
  const std::string pns = machinery::GetString(asn, {"status", "namespace"});
  for (auto& c : claim_syncers_) c->OnServiceNamespace(cns, pns, deleted);
  if (!namespaced_ || !provider_multi_) return;
  if (!pns.empty()) {
    if (deleted) {
      provider_multi_->RemoveNamespace(pns);
    } else {
      provider_multi_->AddNamespace(pns);
    }
  }
  if (!consumer_) return;
  for (const auto& d : consumer_->indexer().ByIndex(client::Indexer::kNamespaceIndex, cns)) {
    spec_->queue().Add(client::ObjectKey(*d));
  }
}

void ExportSyncer::MarkSynced(const Json& consumer, bool ok, std::string_view reason,
                              const std::string& message) {
  Json modified = consumer;
  reconcile::Condition c{
      .type = std::string(kSyncedCondition),
      .status = std::string(ok ? reconcile::kConditionTrue : reconcile::kConditionFalse),
      .observed_generation = Generation(consumer),
      .reason = std::string(reason),
      .message = message};
  if (ok) {
    // Only a failure is reported eagerly; success replaces an earlier failure.
    auto existing = reconcile::FindCondition(consumer, kSyncedCondition);
    if (!existing || existing->status == reconcile::kConditionTrue) return;
  }
  if (!reconcile::SetCondition(modified, c, ctx_.clock)) return;
  auto r = reconcile::Committer(client::ResourceClient(ctx_.app, gvr_),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .CommitStatus(consumer, modified);
  ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!ok) {
    ctx_.app_events.Event(consumer, "Warning", reason, message);
    ctx_.metrics.sync_errors.Increment(
        {{"direction", "up"}, {"resource", gvr_.GroupResource()}, {"reason", std::string(reason)}});
  }
  if (!r.ok() && !core::IsConflict(r.status())) {
    KLUTCH_LOG(kWarn, "konnector", "setting Synced on {}: {}", client::ObjectKey(consumer),
               r.status().message());
  }
}

// ---------------------------------------------------------------------------------------------
// §4.10: spec, consumer -> provider.

core::Result<Result> ExportSyncer::ReconcileSpec(const Request& request) {
  ObjectPtr d = consumer_->indexer().Get(request.Key());
  if (!d) {
    Forget("up", request.Key());
    return Result::Done();
  }
  client::ResourceClient consumer_rc(ctx_.app, gvr_);
  reconcile::Committer consumer_commit(consumer_rc,
                                       std::string(apis::klutch::kKonnectorFieldManager));
  const bool has_finalizer = machinery::HasFinalizer(*d, apis::klutch::kSyncerFinalizer);
  std::string pns;
  std::string pname = request.name;
  if (namespaced_) {
    ObjectPtr asn = connection_.service_namespaces().indexer().Get(connection_.provider_ns() + "/" +
                                                                   request.ns);
    if (!asn) {
      if (Deleting(*d) && !has_finalizer) return Result::Done();
      Json object = {{"apiVersion", std::string(apis::klutch::kApiVersion)},
                     {"kind", "APIServiceNamespace"},
                     {"metadata", {{"name", request.ns}, {"namespace", connection_.provider_ns()}}},
                     {"spec", Json::object()}};
      auto r = client::ResourceClient(connection_.provider(), apis::klutch::kApiServiceNamespaces,
                                      connection_.provider_ns())
                   .Create(object);
      ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "create"}});
      if (!r.ok() && !core::IsAlreadyExists(r.status())) return r.status();
      return Result::Done();  // its events bring this object back
    }
    pns = machinery::GetString(*asn, {"status", "namespace"});
    if (pns.empty()) return Result::Done();  // the provider has not assigned one yet
  } else {
    pname = PrefixedName(connection_.provider_ns(), request.name);
  }
  const std::string pkey = pns.empty() ? pname : pns + "/" + pname;
  client::ResourceClient provider_rc =
      client::ResourceClient(connection_.provider(), gvr_).Namespace(pns);
  ObjectPtr u = ProviderGet(pkey);
  if (!u && !ProviderSynced(pkey)) return Result::Done();  // OnSynced brings it back

  if (!u || Deleting(*d)) {
    if (Deleting(*d)) {
      if (u && !Deleting(*u)) {
        client::DeleteOptions o;
        o.precondition_uid = machinery::Uid(*u);
        auto r = provider_rc.Delete(pname, o);
        ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "delete"}});
        if (!r.ok() && !core::IsNotFound(r.status()) && !core::IsConflict(r.status())) {
          return r.status();
        }
        // The finalizer stays until the copy is gone (ADR 0009): the Control Plane may hold
        // the deletion, and the status it copies down says why. Its delete event (or, when
        // it went at once, the provider cache's) brings this object back.
        if (r.ok()) return Result::Done();
      } else if (u) {
        // Both are going; annotations still travel (a deletion may wait for one, such as
        // klutch.anynines.com/delete-in-use). A merge patch: an apply without the spec would
        // take the spec away.
        Json changed = Json::object();
        const Json* mine = machinery::Find(*d, {"metadata", "annotations"});
        if (mine && mine->is_object()) {
          for (auto it = mine->begin(); it != mine->end(); ++it) {
            if (it.key() == "kubectl.kubernetes.io/last-applied-configuration") continue;
            const auto* value = it->get_ptr<const std::string*>();
            if (!value || Annotation(*u, it.key()) != *value) {
              changed[it.key()] = *it;
            }
          }
        }
        if (!changed.empty()) {
          auto r = provider_rc.Patch(
              pname, client::PatchType::kMerge,
              machinery::Dump(Json{{"metadata", {{"annotations", changed}}}}),
              {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
          ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "patch"}});
          if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
        }
        return Result::Done();  // the provider's delete event brings us back
      }
      if (!has_finalizer) return Result::Done();
      auto r = consumer_commit.Commit(*d, WithoutFinalizer(*d));
      ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
      if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
      Observe("up", request.Key());
      return Result::Done();
    }
  }

  Json current = *d;
  Json marked = WithFinalizerAndBound(*d);
  if (marked != *d) {
    auto r = consumer_commit.Commit(*d, marked);
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
    if (!r.ok()) return r.status();
    current = *r;
  }

  // What the provider copy should carry: the consumer's spec, labels and annotations (but
  // kubectl's last-applied copy), the bound annotation, and for cluster-scoped objects the
  // prefixed name, cluster-namespace annotation and Namespace owner. Server-side applied with
  // force, so the konnector owns these fields and fields the provider adds stay its own.
  Json apply = {{"apiVersion", machinery::ApiVersionOf(current)},
                {"kind", machinery::Kind(current)},
                {"metadata", {{"name", request.name}}}};
  if (const Json* labels = machinery::Find(current, {"metadata", "labels"})) {
    apply["metadata"]["labels"] = *labels;
  }
  if (const Json* annotations = machinery::Find(current, {"metadata", "annotations"});
      annotations && annotations->is_object()) {
    Json copied = *annotations;
    copied.erase("kubectl.kubernetes.io/last-applied-configuration");
    if (!copied.empty()) apply["metadata"]["annotations"] = std::move(copied);
  }
  SetAnnotation(apply, apis::klutch::kBoundAnnotation, "true");
  if (namespaced_) {
    apply["metadata"]["namespace"] = pns;
  } else {
    InjectClusterNamespace(apply, connection_.provider_ns(), provider_ns_uid_);
  }
  if (!SpecOf(current).is_null()) apply["spec"] = SpecOf(current);
  const std::string hash = JsonHash(apply);
  if (u && Annotation(*u, apis::klutch::kAppliedHashAnnotation) == hash &&
      Covers(SpecOf(*u), SpecOf(current))) {
    Observe("up", request.Key());
    MarkSynced(current, true, "Synced", "spec is in sync with the Control Plane");
    return Result::Done();
  }
  SetAnnotation(apply, apis::klutch::kAppliedHashAnnotation, hash);
  auto r = provider_rc.Patch(
      pname, client::PatchType::kApply, machinery::Dump(apply),
      {.field_manager = std::string(apis::klutch::kKonnectorFieldManager), .force = true});
  ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", u ? "apply" : "create"}});
  if (!r.ok()) {
    if (core::IsInvalid(r.status())) {
      MarkSynced(current, false, "ProviderRejected",
                 "the Control Plane refused " + kind_ + " " + request.Key() + ": " +
                     r.status().message() + "; fix the spec and apply again");
      return Result::Done();  // the next edit of the object tries again
    }
    return r.status();
  }
  Observe("up", request.Key());
  MarkSynced(current, true, "Synced", "spec is in sync with the Control Plane");
  return Result::Done();
}

// ---------------------------------------------------------------------------------------------
// §4.11: status, provider -> consumer; and upstream leftovers of consumer deletions.

core::Result<Result> ExportSyncer::ReconcileStatus(const Request& request) {
  ObjectPtr u = ProviderGet(request.Key());
  if (!u) {
    Forget("down", request.Key());
    return Result::Done();
  }
  if (!Ours(*u)) return Result::Done();
  std::string ckey = ConsumerKey(request.Key());
  if (ckey.empty()) return Result::Done();
  Request c = Request::FromKey(ckey);
  client::ResourceClient consumer_rc = client::ResourceClient(ctx_.app, gvr_).Namespace(c.ns);
  ObjectPtr d = consumer_->indexer().Get(ckey);
  if (!d) {
    if (!HasBoundAnnotation(*u) || Deleting(*u)) return Result::Done();
    if (!consumer_->HasSynced()) return Result::Requeue();  // backoff until it has listed
    // The cache may lag a fresh create: only the API server may say it is gone.
    auto live = consumer_rc.Get(c.name);
    if (live.ok()) return Result::Done();
    if (!core::IsNotFound(live.status())) return live.status();
    client::DeleteOptions o;
    o.precondition_uid = machinery::Uid(*u);
    auto r = client::ResourceClient(connection_.provider(), gvr_, machinery::Namespace(*u))
                 .Delete(machinery::Name(*u), o);
    ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "delete"}});
    if (!r.ok() && !core::IsNotFound(r.status()) && !core::IsConflict(r.status())) {
      return r.status();
    }
    return Result::Done();
  }
  Json modified = *d;
  const Json* ustatus = machinery::Find(*u, {"status"});
  auto synced = reconcile::FindCondition(*d, kSyncedCondition);
  if (ustatus) {
    // In the developer's names: their namespace, not the Control Plane's.
    modified["status"] = namespaced_ ? StatusInConsumerTerms(*ustatus, request.ns, c.ns) : *ustatus;
  } else {
    modified.erase("status");
  }
  if (synced) reconcile::SetCondition(modified, *synced, ctx_.clock);
  const Json* before = machinery::Find(*d, {"status"});
  const Json* after = machinery::Find(modified, {"status"});
  if ((before ? *before : Json()) == (after ? *after : Json())) {
    Observe("down", request.Key());
    return Result::Done();
  }
  // Synced=True rides along with a status write; it never costs a write of its own.
  if (!synced && Covers(SpecOf(*u), SpecOf(*d))) {
    reconcile::SetCondition(modified,
                            {.type = std::string(kSyncedCondition),
                             .status = std::string(reconcile::kConditionTrue),
                             .observed_generation = Generation(*d),
                             .reason = "Synced",
                             .message = "spec is in sync with the Control Plane"},
                            ctx_.clock);
  }
  auto r = reconcile::Committer(client::ResourceClient(ctx_.app, gvr_),
                                std::string(apis::klutch::kKonnectorFieldManager))
               .CommitStatus(*d, modified);
  ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
  if (!r.ok()) {
    if (core::IsInvalid(r.status())) {
      ctx_.metrics.sync_errors.Increment(
          {{"direction", "down"}, {"resource", gvr_.GroupResource()}, {"reason", "Invalid"}});
      ctx_.app_events.Event(
          *d, "Warning", "StatusSyncFailed",
          "the App Cluster refused the status from the Control Plane: " + r.status().message());
      return Result::Done();
    }
    return r.status();
  }
  // A condition that turned False says so where the developer looks: `kubectl describe`.
  for (const ConditionNews& n : FalseConditionNews(before, after, kSyncedCondition)) {
    ctx_.app_events.Event(*r, n.event_type, n.reason, n.message);
  }
  Observe("down", request.Key());
  return Result::Done();
}

// ---------------------------------------------------------------------------------------------
// §4.12: objects created on the provider appear on the consumer.

core::Result<Result> ExportSyncer::ReconcileAdopt(const Request& request) {
  ObjectPtr u = ProviderGet(request.Key());
  if (!u) return Result::Done();
  if (!Ours(*u)) return Result::Done();
  std::string ckey = ConsumerKey(request.Key());
  if (ckey.empty()) return Result::Done();
  Request c = Request::FromKey(ckey);
  client::ResourceClient consumer_rc = client::ResourceClient(ctx_.app, gvr_).Namespace(c.ns);
  client::ResourceClient provider_rc =
      client::ResourceClient(connection_.provider(), gvr_).Namespace(machinery::Namespace(*u));
  ObjectPtr d = consumer_->indexer().Get(ckey);
  if (!d) {
    if (HasBoundAnnotation(*u) || Deleting(*u)) return Result::Done();
    if (!consumer_->HasSynced()) return Result::Requeue();  // backoff until it has listed
    auto live = consumer_rc.Get(c.name);
    if (live.ok()) return Result::Done();
    if (!core::IsNotFound(live.status())) return live.status();
    Json copy = CleanCopy(*u, c.ns);
    if (!namespaced_) {
      ClearClusterNamespace(copy);
      machinery::MutableMetadata(copy)["name"] = c.name;
    }
    SetAnnotation(copy, apis::klutch::kBoundAnnotation, "true");
    auto r = consumer_rc.Create(
        copy, {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "create"}});
    if (!r.ok() && !core::IsAlreadyExists(r.status())) {
      if (core::IsInvalid(r.status())) {
        ctx_.metrics.sync_errors.Increment(
            {{"direction", "adopt"}, {"resource", gvr_.GroupResource()}, {"reason", "Invalid"}});
        KLUTCH_LOG(kWarn, "konnector", "the App Cluster refused adopted {} {}: {}", kind_, ckey,
                   r.status().message());
        return Result::Done();
      }
      return r.status();
    }
    Observe("down", request.Key());
  } else if (!HasBoundAnnotation(*d)) {
    Json marked = *d;
    SetAnnotation(marked, apis::klutch::kBoundAnnotation, "true");
    auto r = reconcile::Committer(client::ResourceClient(ctx_.app, gvr_),
                                  std::string(apis::klutch::kKonnectorFieldManager))
                 .Commit(*d, marked);
    ctx_.metrics.writes.Increment({{"cluster", "app"}, {"verb", "patch"}});
    if (!r.ok()) return r.status();
  }
  if (!HasBoundAnnotation(*u)) {
    // Upstream writes this to the consumer by mistake (§6.5); the provider copy is meant.
    Json patch = {
        {"metadata", {{"annotations", {{std::string(apis::klutch::kBoundAnnotation), "true"}}}}}};
    auto r =
        provider_rc.Patch(machinery::Name(*u), client::PatchType::kMerge, machinery::Dump(patch),
                          {.field_manager = std::string(apis::klutch::kKonnectorFieldManager)});
    ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "patch"}});
    if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  }
  return Result::Done();
}

}  // namespace klutch::konnector::internal
