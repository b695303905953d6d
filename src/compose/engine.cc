// The composition engine's controllers: XRDs, Composition revisions, and per XRD one claim
// and one composite controller (engine.h).
#include "compose/engine.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>

#include "apis/crossplane_crds.h"
#include "client/discovery.h"
#include "client/dynamic.h"
#include "compose/composed_status.h"
#include "compose/function.h"
#include "compose/names.h"
#include "compose/selection.h"
#include "compose/xrd.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"
#include "reconcile/crd_installer.h"
#include "reconcile/events.h"

namespace klutch::compose {

using client::GroupVersionResource;
using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;
using reconcile::Request;
using reconcile::Result;

namespace {

constexpr const char* kByComposition = "composition";
constexpr const char* kByComposite = "composite";
constexpr const char* kUnbound = "unbound";  // claims without spec.resourceRef
// How often an XRD whose CRD name is taken by a foreign CRD looks again: that CRD is not
// watched (the CRD informer sees only the XRDs' own), and deleting it must be enough.
constexpr std::chrono::seconds kConflictRecheck{5};

// The types one XRD defines.
struct XrdTypes {
  GroupVersionResource xr;
  std::string xr_kind;
  GroupVersionResource claim;  // resource "" when the XRD offers no claim
  std::string claim_kind;
  std::string ApiVersion() const { return xr.group + "/" + xr.version; }
  bool operator==(const XrdTypes&) const = default;
};

core::Result<XrdTypes> TypesOf(const Json& xrd) {
  XrdTypes t;
  t.xr.group = t.claim.group = GetString(xrd, {"spec", "group"});
  t.xr.resource = GetString(xrd, {"spec", "names", "plural"});
  t.xr_kind = GetString(xrd, {"spec", "names", "kind"});
  t.claim.resource = GetString(xrd, {"spec", "claimNames", "plural"});
  t.claim_kind = GetString(xrd, {"spec", "claimNames", "kind"});
  const Json* versions = Find(xrd, {"spec", "versions"});
  if (versions && versions->is_array()) {
    for (const Json& v : *versions) {
      const Json* ref = Find(v, {"referenceable"});
      if (ref && ref->is_boolean() && *ref->get_ptr<const Json::boolean_t*>()) {
        t.xr.version = GetString(v, {"name"});
      }
    }
    if (t.xr.version.empty() && !versions->empty())
      t.xr.version = GetString((*versions)[0], {"name"});
  }
  t.claim.version = t.xr.version;
  if (t.xr.group.empty() || t.xr.resource.empty() || t.xr.version.empty()) {
    return core::BadRequest("the XRD names no group, plural or version");
  }
  return t;
}

bool IsPaused(const Json& o) { return machinery::Annotation(o, kAnnotationPaused) == "true"; }

// The controller owner reference of `owner` (cluster-scoped, so it may own anything).
Json ControllerRef(const Json& owner) {
  return Json{{"apiVersion", machinery::ApiVersionOf(owner)},
              {"kind", machinery::Kind(owner)},
              {"name", machinery::Name(owner)},
              {"uid", machinery::Uid(owner)},
              {"controller", true},
              {"blockOwnerDeletion", true}};
}

// The uid of the controlling owner ("" when none).
std::string ControllerUid(const Json& o) {
  const Json* refs = Find(o, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return "";
  for (const Json& r : *refs) {
    const Json* c = Find(r, {"controller"});
    if (c && c->is_boolean() && *c->get_ptr<const Json::boolean_t*>()) return GetString(r, {"uid"});
  }
  return "";
}

std::string GvrKey(const GroupVersionResource& g) {
  return g.group + "/" + g.version + "/" + g.resource;
}

std::map<std::string, std::string> SecretData(const Json& secret) {
  std::map<std::string, std::string> out;
  const Json* data = Find(secret, {"data"});
  if (!data || !data->is_object()) return out;
  for (auto it = data->begin(); it != data->end(); ++it) {
    if (!it->is_string()) continue;
    if (auto v = core::Base64Decode(*it->get_ptr<const std::string*>())) out[it.key()] = *v;
  }
  return out;
}

Json EncodeData(const std::map<std::string, std::string>& data) {
  Json out = Json::object();
  for (const auto& [k, v] : data) out[k] = core::Base64Encode(v);
  return out;
}

// Claim spec fields that stay on the claim.
bool ClaimOnly(const std::string& key) {
  return key == "compositeDeletePolicy" || key == "resourceRef" ||
         key == "writeConnectionSecretToRef";
}
// XR spec fields the XR keeps whatever the claim says.
bool CompositeOnly(const std::string& key) {
  return key == "claimRef" || key == "resourceRefs" || key == "writeConnectionSecretToRef" ||
         key == "environmentConfigRefs";
}
// The claim's annotations its composite resource carries too, as Crossplane propagates them
// (all but Kubernetes' own: kubernetes.io and k8s.io domains, kubectl's last-applied copy), as
// a merge patch of the XR's annotations (`xr` null: a new XR): the claim's values, null for
// one the claim carried before (kClaimAnnotationsAnnotation) and no longer does, and that
// list itself. Empty when the XR is up to date. (Crossplane only merges: an annotation removed
// from the claim stayed on the XR; klutch.anynines.com/delete-in-use must not.)
Json ClaimAnnotationChanges(const Json& claim, const Json& xr) {
  Json want = Json::object();
  const Json* annotations = Find(claim, {"metadata", "annotations"});
  if (annotations && annotations->is_object()) {
    for (auto it = annotations->begin(); it != annotations->end(); ++it) {
      std::string_view key = it.key();
      auto slash = key.find('/');
      std::string_view domain = slash == std::string_view::npos ? "" : key.substr(0, slash);
      auto in_domain = [&](std::string_view d) {
        return domain == d || (domain.size() > d.size() && domain.ends_with(d) &&
                               domain[domain.size() - d.size() - 1] == '.');
      };
      if (in_domain("kubernetes.io") || in_domain("k8s.io") || !it->is_string()) continue;
      if (key == kClaimAnnotationsAnnotation) continue;
      want[it.key()] = *it;
    }
  }
  std::vector<std::string> keys;
  for (auto it = want.begin(); it != want.end(); ++it) keys.push_back(it.key());
  const std::string list = core::Join(keys, ",");

  Json changes = Json::object();
  for (auto it = want.begin(); it != want.end(); ++it) {
    if (xr.is_null() || machinery::Annotation(xr, it.key()) != *it->get_ptr<const std::string*>() ||
        !Find(xr, {"metadata", "annotations", it.key()})) {
      changes[it.key()] = *it;
    }
  }
  const std::string before =
      xr.is_null() ? "" : machinery::Annotation(xr, kClaimAnnotationsAnnotation);
  for (std::string_view key : core::SplitNonEmpty(before, ',')) {
    if (!want.contains(std::string(key))) changes[std::string(key)] = nullptr;
  }
  if (list != before) {
    changes[std::string(kClaimAnnotationsAnnotation)] = list.empty() ? Json() : Json(list);
  }
  return changes;
}

// Applies a merge patch of annotations (ClaimAnnotationChanges) to an object's metadata.
void ApplyAnnotationChanges(Json& object, const Json& changes) {
  if (changes.empty()) return;
  Json& annotations = machinery::MutableMetadata(object)["annotations"];
  if (!annotations.is_object()) annotations = Json::object();
  for (auto it = changes.begin(); it != changes.end(); ++it) {
    if (it->is_null()) {
      annotations.erase(it.key());
    } else {
      annotations[it.key()] = *it;
    }
  }
  if (annotations.empty()) machinery::MutableMetadata(object).erase("annotations");
}

// Selection fields: the claim's when it has them, else the XR's (propagated back).
bool SelectionField(const std::string& key) {
  return key == "compositionRef" || key == "compositionSelector" ||
         key == "compositionRevisionRef" || key == "compositionUpdatePolicy" ||
         key == "compositionRevisionSelector";
}

// Remembers the resourceVersions this controller has written over, so that a reconcile
// started from a cache that has not caught up with our own write yet does nothing (the
// write's watch event queues the key again) instead of failing with a Conflict.
class WriteTracker {
 public:
  bool Stale(const std::string& key, const Json& object) {
    core::MutexLock lock(mu_);
    auto it = superseded_.find(key);
    if (it == superseded_.end()) return false;
    if (it->second.count(machinery::ResourceVersion(object))) return true;
    superseded_.erase(it);
    return false;
  }
  // Records a write whose result `after` replaced `before`.
  void Wrote(const std::string& key, const Json& before, const core::Result<Json>& after) {
    if (!after.ok()) return;
    std::string from = machinery::ResourceVersion(before);
    if (from.empty() || machinery::ResourceVersion(*after) == from) return;
    core::MutexLock lock(mu_);
    if (superseded_.size() > 100000) superseded_.clear();  // bounded; forgetting is safe
    superseded_[key].insert(from);
  }

 private:
  core::Mutex mu_;
  std::unordered_map<std::string, std::set<std::string>> superseded_ GUARDED_BY(mu_);
};

}  // namespace

class XrdRuntime;

class Composer::Impl {
 public:
  Impl(reconcile::Manager& manager, ComposerOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        mapper_(manager.rest()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_),
        composed_writes_(manager.metric_registry().Counter(
            "klutch_manager_composed_writes_total",
            "Writes to composed resources, by verb (apply, delete)")),
        breaker_trips_(manager.metric_registry().Counter(
            "klutch_manager_circuit_breaker_trips_total",
            "Times an XR's composed-resource writes were held back")) {}
  ~Impl() { Stop(); }

  core::Status Setup();
  void Stop();
  size_t active_xrds() const {
    core::MutexLock lock(mu_);
    return runtimes_.size();
  }

  // Shared by the runtimes.
  reconcile::Manager& manager_;
  ComposerOptions options_;
  const core::Clock& clock_;
  client::RestMapper mapper_;
  reconcile::EventRecorder events_;
  serving::CounterFamily& composed_writes_;
  serving::CounterFamily& breaker_trips_;
  client::Informer* xrds_ = nullptr;
  client::Informer* compositions_ = nullptr;
  client::Informer* revisions_ = nullptr;
  client::Informer* functions_ = nullptr;
  client::Informer* crds_ = nullptr;
  reconcile::Controller* xrd_controller_ = nullptr;

  // The informer of a composed resource kind, created and started on first use; `age` says
  // how long ago.
  client::Informer& Composed(const GroupVersionResource& gvr, std::chrono::milliseconds& age);
  // Whether one more changing write to composed resource `key` ("xr/resource") is allowed;
  // false while its breaker is open (`wait` then says for how long).
  bool AllowWrite(const std::string& key, std::chrono::milliseconds& wait);

 private:
  core::Result<Result> ReconcileXrd(const Request& r);
  core::Result<Result> ReconcileComposition(const Request& r);
  void EnqueueForComposition(const Json& composition_or_revision);
  void RouteComposed(const Json& composed);

  std::unique_ptr<reconcile::FuncReconciler> xrd_reconciler_;
  std::unique_ptr<reconcile::FuncReconciler> composition_reconciler_;

  mutable core::Mutex mu_;
  std::map<std::string, std::unique_ptr<XrdRuntime>> runtimes_ GUARDED_BY(mu_);  // by XRD
  std::map<std::string, std::unique_ptr<client::Informer>> composed_ GUARDED_BY(mu_);
  std::map<std::string, core::MonoTime> composed_started_ GUARDED_BY(mu_);
  struct Breaker {
    std::deque<core::MonoTime> writes;
    core::MonoTime open_until{};
  };
  std::map<std::string, Breaker> breakers_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
  client::Informer::HandlerId composition_handler_ = 0;
  client::Informer::HandlerId revision_handler_ = 0;
};

// The controllers of one XRD's types.
class XrdRuntime {
 public:
  XrdRuntime(Composer::Impl& impl, std::string xrd, XrdTypes types)
      : impl_(impl), xrd_(std::move(xrd)), types_(std::move(types)) {}
  ~XrdRuntime() { Stop(); }

  const XrdTypes& types() const { return types_; }
  void StartComposite();
  void StartClaim();
  bool composite_started() const { return xr_controller_ != nullptr; }
  bool claim_started() const { return claim_controller_ != nullptr; }
  void Stop() {
    if (claim_controller_) claim_controller_->Stop();
    if (xr_controller_) xr_controller_->Stop();
    if (claims_) claims_->Stop();
    if (xrs_) xrs_->Stop();
  }
  void EnqueueComposite(const std::string& name) {
    if (xr_controller_) xr_controller_->queue().Add(name);
  }
  // XRs using composition `name`.
  void EnqueueUsers(const std::string& composition) {
    if (!xr_controller_) return;
    for (const auto& xr : xrs_->indexer().ByIndex(kByComposition, composition)) {
      xr_controller_->queue().Add(machinery::Name(*xr));
    }
  }
  // Claims without a composite yet: their last reconcile may have failed to select a
  // composition, which a Composition appearing or changing can cure.
  void EnqueueUnboundClaims() {
    if (!claim_controller_) return;
    for (const auto& c : claims_->indexer().ByIndex(kUnbound, kUnbound)) {
      claim_controller_->queue().Add(machinery::Namespace(*c) + "/" + machinery::Name(*c));
    }
  }

 private:
  core::Result<Result> ReconcileComposite(const Request& r);
  // While an XR is being deleted: Ready=False, reason Deleting, with the messages of the
  // composed resources that are still there (e.g. an instance waiting for its bindings), so
  // that its claim can say what the deletion waits for.
  core::Result<Result> ReportDeletion(const Json& xr, const std::string& key);
  core::Result<Result> ReconcileClaim(const Request& r);
  // Synced=False (condition reason `condition_reason`), a Warning Event with `reason`.
  core::Result<Result> CompositeFailed(const Json& xr, std::string_view reason,
                                       const std::string& message, bool retry,
                                       std::string_view condition_reason = "ReconcileError");
  // Synced=False, reason ReconcilePaused (the crossplane.io/paused annotation).
  core::Result<Result> MarkPaused(const Json& object, const reconcile::Committer& committer,
                                  WriteTracker& writes, const std::string& key) {
    Json modified = object;
    reconcile::SetCondition(modified,
                            {.type = "Synced",
                             .status = "False",
                             .reason = "ReconcilePaused",
                             .message = "Reconciliation is paused via the pause annotation"},
                            impl_.clock_);
    auto w = committer.CommitStatus(object, modified);
    writes.Wrote(key, object, w);
    if (!w.ok()) return w.status();
    return Result::Done();
  }
  core::Result<Result> ClaimFailed(const Json& claim, std::string_view reason,
                                   const std::string& message);
  core::Status PublishConnection(const Json& owner, const std::string& ns, const std::string& name,
                                 const std::map<std::string, std::string>& data, bool& changed);
  Json Xrd() const {
    ObjectPtr x = impl_.xrds_->indexer().Get(xrd_);
    return x ? *x : Json::object();
  }
  // The caches a reconcile reads. claims_ is only read by the claim controller, which starts
  // after it is set (the XR controller's workers may run before it exists).
  bool Synced(bool with_claims) const {
    return impl_.compositions_->HasSynced() && impl_.revisions_->HasSynced() && xrs_->HasSynced() &&
           (!with_claims || claims_->HasSynced());
  }

  Composer::Impl& impl_;
  const std::string xrd_;
  const XrdTypes types_;
  std::unique_ptr<client::Informer> xrs_;
  std::unique_ptr<client::Informer> claims_;
  std::unique_ptr<reconcile::FuncReconciler> xr_reconciler_;
  std::unique_ptr<reconcile::FuncReconciler> claim_reconciler_;
  std::unique_ptr<reconcile::Controller> xr_controller_;
  std::unique_ptr<reconcile::Controller> claim_controller_;
  WriteTracker xr_writes_;
  WriteTracker claim_writes_;
};

// ---------------------------------------------------------------------------------------------
// Composer::Impl

core::Status Composer::Impl::Setup() {
  client::InformerOptions o{.clock = &clock_};
  xrds_ = &manager_.Informer(kXrds, o);
  compositions_ = &manager_.Informer(kCompositions, o);
  revisions_ = &manager_.Informer(kCompositionRevisions, o);
  functions_ = &manager_.Informer(kFunctions, o);
  client::InformerOptions crd_options{.label_selector = std::string(kLabelXrdName),
                                      .clock = &clock_};
  crds_ = &manager_.Informer(client::resources::kCustomResourceDefinitions, crd_options);

  xrd_reconciler_ = std::make_unique<reconcile::FuncReconciler>(
      [this](const Request& r) { return ReconcileXrd(r); });
  composition_reconciler_ = std::make_unique<reconcile::FuncReconciler>(
      [this](const Request& r) { return ReconcileComposition(r); });
  auto& xrd =
      manager_.AddController("klutch-manager-compositeresourcedefinition", *xrd_reconciler_, 2);
  xrd.For(*xrds_);
  xrd.Watches(*crds_, reconcile::MapByLabels("", std::string(kLabelXrdName)));
  xrd_controller_ = &xrd;
  auto& comp =
      manager_.AddController("klutch-manager-compositionrevision", *composition_reconciler_, 1);
  comp.For(*compositions_);
  comp.Owns(*revisions_, "apiextensions.crossplane.io", "Composition", false);

  client::EventHandler reroute{
      .on_add = [this](const ObjectPtr& o) { EnqueueForComposition(*o); },
      .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { EnqueueForComposition(*o); },
      .on_delete = [this](const ObjectPtr& o) { EnqueueForComposition(*o); }};
  composition_handler_ = compositions_->AddEventHandler(reroute);
  revision_handler_ = revisions_->AddEventHandler(reroute);
  return core::Status::Ok();
}

void Composer::Impl::Stop() {
  std::map<std::string, std::unique_ptr<XrdRuntime>> runtimes;
  std::map<std::string, std::unique_ptr<client::Informer>> composed;
  {
    core::MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    runtimes.swap(runtimes_);
    composed.swap(composed_);
  }
  if (composition_handler_) compositions_->RemoveEventHandler(composition_handler_);
  if (revision_handler_) revisions_->RemoveEventHandler(revision_handler_);
  for (auto& [name, rt] : runtimes) rt->Stop();
  for (auto& [key, informer] : composed) informer->Stop();
  events_.Stop();
}

void Composer::Impl::EnqueueForComposition(const Json& o) {
  std::string name = machinery::Kind(o) == "CompositionRevision"
                         ? GetString(o, {"metadata", "labels", kLabelCompositionName})
                         : machinery::Name(o);
  std::string api_version = GetString(o, {"spec", "compositeTypeRef", "apiVersion"});
  std::string kind = GetString(o, {"spec", "compositeTypeRef", "kind"});
  core::MutexLock lock(mu_);
  for (auto& [xrd, rt] : runtimes_) {
    if (rt->types().xr_kind == kind && rt->types().ApiVersion() == api_version) {
      rt->EnqueueUsers(name);
      rt->EnqueueUnboundClaims();
    }
  }
}

void Composer::Impl::RouteComposed(const Json& composed) {
  const Json* refs = Find(composed, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return;
  for (const Json& r : *refs) {
    const Json* c = Find(r, {"controller"});
    if (!c || !c->is_boolean() || !*c->get_ptr<const Json::boolean_t*>()) continue;
    std::string api_version = GetString(r, {"apiVersion"});
    std::string kind = GetString(r, {"kind"});
    core::MutexLock lock(mu_);
    for (auto& [xrd, rt] : runtimes_) {
      if (rt->types().xr_kind == kind && rt->types().ApiVersion() == api_version) {
        rt->EnqueueComposite(GetString(r, {"name"}));
      }
    }
  }
}

client::Informer& Composer::Impl::Composed(const GroupVersionResource& gvr,
                                           std::chrono::milliseconds& age) {
  const auto now = clock_.MonotonicNow();
  core::MutexLock lock(mu_);
  auto it = composed_.find(GvrKey(gvr));
  if (it != composed_.end()) {
    age =
        std::chrono::duration_cast<std::chrono::milliseconds>(now - composed_started_[GvrKey(gvr)]);
    return *it->second;
  }
  age = std::chrono::milliseconds(0);
  composed_started_[GvrKey(gvr)] = now;
  client::InformerOptions o{
      .label_selector = std::string(kLabelComposite), .compact = true, .clock = &clock_};
  auto informer = std::make_unique<client::Informer>(manager_.rest(), gvr, o);
  (void)informer->indexer().AddIndex(kByComposite, [](const Json& obj) {
    std::string xr = GetString(obj, {"metadata", "labels", kLabelComposite});
    return xr.empty() ? std::vector<std::string>{} : std::vector<std::string>{xr};
  });
  informer->AddEventHandler(
      {.on_add = [this](const ObjectPtr& o) { RouteComposed(*o); },
       .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { RouteComposed(*o); },
       .on_delete = [this](const ObjectPtr& o) { RouteComposed(*o); }});
  informer->Start();
  KLUTCH_LOG(kInfo, "compose", "watching composed resources {}", gvr.GroupResource());
  return *composed_.emplace(GvrKey(gvr), std::move(informer)).first->second;
}

bool Composer::Impl::AllowWrite(const std::string& xr, std::chrono::milliseconds& wait) {
  const auto now = clock_.MonotonicNow();
  core::MutexLock lock(mu_);
  Breaker& b = breakers_[xr];
  if (now < b.open_until) {
    wait = std::chrono::duration_cast<std::chrono::milliseconds>(b.open_until - now);
    return false;
  }
  while (!b.writes.empty() && now - b.writes.front() > options_.breaker_window)
    b.writes.pop_front();
  if (static_cast<int>(b.writes.size()) >= options_.breaker_writes) {
    b.open_until = now + options_.breaker_cooldown;
    b.writes.clear();
    breaker_trips_.Increment({});
    wait = options_.breaker_cooldown;
    return false;
  }
  b.writes.push_back(now);
  if (breakers_.size() > 100000) breakers_.clear();  // bound memory; losing history is safe
  return true;
}

// XRD: CRDs, conditions, runtimes, deletion.
core::Result<Result> Composer::Impl::ReconcileXrd(const Request& r) {
  ObjectPtr xrd = xrds_->indexer().Get(r.Key());
  std::unique_ptr<XrdRuntime> stopped;
  if (!xrd) {
    {
      core::MutexLock lock(mu_);
      auto it = runtimes_.find(r.name);
      if (it != runtimes_.end()) {
        stopped = std::move(it->second);
        runtimes_.erase(it);
      }
    }
    if (stopped) stopped->Stop();
    return Result::Done();
  }
  client::ResourceClient xrd_client(manager_.rest(), kXrds);
  reconcile::Committer committer(xrd_client, std::string(kFieldManager));
  client::ResourceClient crd_client(manager_.rest(), client::resources::kCustomResourceDefinitions);
  auto types = TypesOf(*xrd);
  auto crds = CrdsForXrd(*xrd);

  if (machinery::IsBeingDeleted(*xrd)) {
    if (!machinery::HasFinalizer(*xrd, kXrdFinalizer)) return Result::Done();
    // Asked of the server, not a cache: after a restart there is no runtime, and a cache
    // that has not synced would say "none" while every XR (and its database) still exists.
    std::vector<std::string> left;
    if (types.ok()) {
      std::vector<std::pair<GroupVersionResource, std::string>> kinds = {
          {types->claim, types->claim_kind}, {types->xr, types->xr_kind}};
      for (const auto& [gvr, kind] : kinds) {
        if (gvr.resource.empty()) continue;
        auto some = client::ResourceClient(manager_.rest(), gvr).List({.limit = 1});
        if (!some.ok()) {
          if (core::IsNotFound(some.status())) continue;  // the CRD is gone already
          return some.status();
        }
        const Json* items = Find(*some, {"items"});
        if (items && items->is_array() && !items->empty()) left.push_back(kind);
      }
    }
    if (!left.empty()) {
      std::string message = "cannot delete: " + core::Join(left, " and ") +
                            " resources of this definition still exist; delete them first "
                            "(kubectl get claim,composite)";
      Json modified = *xrd;
      bool changed = reconcile::SetCondition(modified,
                                             {.type = "Established",
                                              .status = "True",
                                              .reason = "DeletionBlocked",
                                              .message = message},
                                             clock_);
      if (changed) {
        auto w = committer.CommitStatus(*xrd, modified);
        if (!w.ok()) return w.status();
        events_.Event(*xrd, reconcile::kEventTypeWarning, "DeletionBlocked", message);
      }
      // The last claim's or XR's deletion queues the XRD again while its runtime runs; the
      // recheck covers a manager that restarted in between.
      return Result::RequeueAfter(std::chrono::seconds(10));
    }
    {
      core::MutexLock lock(mu_);
      auto it = runtimes_.find(r.name);
      if (it != runtimes_.end()) {
        stopped = std::move(it->second);
        runtimes_.erase(it);
      }
    }
    if (stopped) stopped->Stop();
    if (crds.ok()) {
      std::vector<Json> owned{crds->composite};
      if (crds->claim) owned.push_back(*crds->claim);
      for (const Json& crd : owned) {
        ObjectPtr existing = crds_->indexer().Get(machinery::Name(crd));
        if (existing && ControllerUid(*existing) == machinery::Uid(*xrd)) {
          auto d = crd_client.Delete(machinery::Name(crd));
          if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
        }
      }
    }
    Json modified = *xrd;
    machinery::RemoveFinalizer(modified, kXrdFinalizer);
    auto w = committer.Commit(*xrd, modified);
    if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
    return Result::Done();
  }

  Json current = *xrd;
  if (!machinery::HasFinalizer(current, kXrdFinalizer)) {
    Json modified = current;
    machinery::AddFinalizer(modified, kXrdFinalizer);
    auto w = committer.Commit(current, modified);
    if (!w.ok()) return w.status();
    current = *w;
  }

  Json status = current;
  auto fail = [&](std::string_view reason, const std::string& message) -> core::Result<Result> {
    reconcile::SetCondition(status,
                            {.type = "Established",
                             .status = "False",
                             .reason = std::string(reason),
                             .message = message},
                            clock_);
    if (Find(*xrd, {"spec", "claimNames"})) {
      reconcile::SetCondition(
          status,
          {.type = "Offered", .status = "False", .reason = std::string(reason), .message = message},
          clock_);
    }
    auto w = committer.CommitStatus(current, status);
    if (!w.ok()) return w.status();
    if (*w != current) events_.Event(*xrd, reconcile::kEventTypeWarning, reason, message);
    return Result::Done();
  };
  if (!crds.ok()) return fail("InvalidDefinition", crds.status().message());
  if (!types.ok()) return fail("InvalidDefinition", types.status().message());

  // Create or update the CRDs, refusing to take over one this XRD does not own.
  auto ensure = [&](Json crd) -> core::Result<bool> {  // established?
    const std::string name = machinery::Name(crd);
    // What we last wrote, so an unchanged CRD is left alone even after the server filled in
    // its defaults (kube-apiserver adds spec.conversion and names.singular).
    machinery::SetAnnotation(crd, kDesiredHashAnnotation, machinery::JsonHash(crd["spec"]));
    ObjectPtr existing = crds_->indexer().Get(name);
    if (!existing) {
      // Not in the cache: a CRD without our label, or one we created a moment ago.
      auto got = crd_client.Get(name);
      if (got.ok()) {
        if (ControllerUid(*got) != machinery::Uid(*xrd)) {
          return core::Status(core::Reason::kConflict,
                              "CustomResourceDefinition " + name +
                                  " already exists and is not owned by this "
                                  "CompositeResourceDefinition: delete it or rename the XRD");
        }
        existing = std::make_shared<const Json>(*std::move(got));
      } else {
        if (!core::IsNotFound(got.status())) return got.status();
        auto created = crd_client.Create(crd);
        if (!created.ok()) return created.status();
        return false;
      }
    }
    if (ControllerUid(*existing) != machinery::Uid(*xrd)) {
      return core::Status(core::Reason::kConflict,
                          "CustomResourceDefinition " + name +
                              " is owned by another CompositeResourceDefinition: delete that "
                              "XRD or rename this one");
    }
    const Json* existing_spec = Find(*existing, {"spec"});
    bool same = machinery::Annotation(*existing, kDesiredHashAnnotation) ==
                    machinery::Annotation(crd, kDesiredHashAnnotation) &&
                existing_spec && machinery::Covers(*existing_spec, crd["spec"]) &&
                machinery::Covers(*existing, Json{{"metadata", crd["metadata"]}});
    if (!same) {
      Json updated = *existing;
      updated["spec"] = crd["spec"];
      Json& meta = machinery::MutableMetadata(updated);
      meta["labels"] = crd["metadata"]["labels"];
      meta["ownerReferences"] = crd["metadata"]["ownerReferences"];
      machinery::SetAnnotation(updated, kDesiredHashAnnotation,
                               machinery::Annotation(crd, kDesiredHashAnnotation));
      auto u = crd_client.Update(updated);
      if (!u.ok()) return u.status();
      return false;
    }
    return reconcile::IsConditionTrue(*existing, "Established");
  };
  auto xr_ready = ensure(crds->composite);
  if (!xr_ready.ok()) {
    if (xr_ready.status().reason() == core::Reason::kConflict) {
      auto failed = fail("ConflictingCustomResourceDefinition", xr_ready.status().message());
      return failed.ok() ? Result::RequeueAfter(kConflictRecheck) : failed;
    }
    if (core::IsInvalid(xr_ready.status())) {
      return fail("InvalidDefinition", "the generated CustomResourceDefinition is invalid: " +
                                           xr_ready.status().message());
    }
    return xr_ready.status();
  }
  core::Result<bool> claim_ready = false;
  if (crds->claim) {
    claim_ready = ensure(*crds->claim);
    if (!claim_ready.ok()) {
      if (claim_ready.status().reason() == core::Reason::kConflict) {
        auto failed = fail("ConflictingCustomResourceDefinition", claim_ready.status().message());
        return failed.ok() ? Result::RequeueAfter(kConflictRecheck) : failed;
      }
      if (core::IsInvalid(claim_ready.status())) {
        return fail("InvalidDefinition",
                    "the generated claim CustomResourceDefinition is invalid: " +
                        claim_ready.status().message());
      }
      return claim_ready.status();
    }
  }

  // Start (or restart, when the types changed) the runtime.
  {
    std::unique_ptr<XrdRuntime> replaced;
    XrdRuntime* rt = nullptr;
    {
      core::MutexLock lock(mu_);
      if (stopped_) return Result::Done();
      auto it = runtimes_.find(r.name);
      if (it != runtimes_.end() && !(it->second->types() == *types)) {
        replaced = std::move(it->second);
        runtimes_.erase(it);
        it = runtimes_.end();
      }
      if (it == runtimes_.end()) {
        it = runtimes_.emplace(r.name, std::make_unique<XrdRuntime>(*this, r.name, *types)).first;
      }
      rt = it->second.get();
      if (*xr_ready && !rt->composite_started()) rt->StartComposite();
      if (crds->claim && *claim_ready && !rt->claim_started()) rt->StartClaim();
    }
    if (replaced) replaced->Stop();
  }

  // Established / Offered: True once the CRD serves, else waiting for it.
  auto mark = [&](std::string type, bool ready, std::string reason, std::string what) {
    if (ready) {
      reconcile::SetCondition(status, {.type = type, .status = "True", .reason = reason}, clock_);
    } else {
      reconcile::SetCondition(
          status,
          {.type = type,
           .status = "False",
           .reason = "WaitingForCustomResourceDefinition",
           .message = "waiting for the " + what + " CustomResourceDefinition to be established"},
          clock_);
    }
  };
  mark("Established", *xr_ready, "WatchingCompositeResource", "composite resource");
  Json controllers{{"compositeResourceType",
                    Json{{"apiVersion", types->ApiVersion()}, {"kind", types->xr_kind}}}};
  if (crds->claim) {
    mark("Offered", *claim_ready, "WatchingCompositeResourceClaim", "claim");
    controllers["compositeResourceClaimType"] =
        Json{{"apiVersion", types->ApiVersion()}, {"kind", types->claim_kind}};
  }
  status["status"]["controllers"] = controllers;
  auto w = committer.CommitStatus(current, status);
  if (!w.ok()) return w.status();
  return Result::Done();
}

// Composition -> CompositionRevision per distinct spec.
core::Result<Result> Composer::Impl::ReconcileComposition(const Request& r) {
  ObjectPtr comp = compositions_->indexer().Get(r.Key());
  if (!comp || machinery::IsBeingDeleted(*comp)) return Result::Done();
  const Json* spec = Find(*comp, {"spec"});
  Json spec_copy = spec ? *spec : Json::object();
  const std::string hash = machinery::JsonHash(spec_copy);
  int64_t max = 0;
  const Json* same = nullptr;
  std::vector<ObjectPtr> revisions = revisions_->indexer().List();
  auto number = [](const Json& rev) -> int64_t {
    const Json* n = Find(rev, {"spec", "revision"});
    if (!n || !n->is_number_integer()) return 0;
    return n->is_number_unsigned()
               ? static_cast<int64_t>(*n->get_ptr<const Json::number_unsigned_t*>())
               : *n->get_ptr<const Json::number_integer_t*>();
  };
  for (const auto& rev : revisions) {
    if (GetString(*rev, {"metadata", "labels", kLabelCompositionName}) != r.name) continue;
    max = std::max(max, number(*rev));
    if (GetString(*rev, {"metadata", "labels", kLabelCompositionHash}) == hash) same = rev.get();
  }
  if (same && number(*same) == max) return Result::Done();  // the usual case
  // A revision is about to be numbered: ask the server, not a cache that may not have seen
  // the one created a moment ago (two revisions with the same number would tie "newest").
  client::ResourceClient revs(manager_.rest(), kCompositionRevisions);
  auto live = revs.List({.label_selector = std::string(kLabelCompositionName) + "=" + r.name});
  if (!live.ok()) return live.status();
  revisions.clear();
  if (const Json* items = Find(*live, {"items"}); items && items->is_array()) {
    for (const Json& item : *items) revisions.push_back(std::make_shared<const Json>(item));
  }
  max = 0;
  same = nullptr;
  for (const auto& rev : revisions) {
    max = std::max(max, number(*rev));
    if (GetString(*rev, {"metadata", "labels", kLabelCompositionHash}) == hash) same = rev.get();
  }
  if (same) {
    if (number(*same) < max) {  // reverted to an older spec: it becomes the newest again
      Json modified = *same;
      modified["spec"]["revision"] = max + 1;
      auto w = reconcile::Committer(revs, std::string(kFieldManager)).Commit(*same, modified);
      if (!w.ok()) return w.status();
    }
    return Result::Done();
  }
  Json rev_spec = spec_copy;
  rev_spec["revision"] = max + 1;
  Json revision{{"apiVersion", "apiextensions.crossplane.io/v1"},
                {"kind", "CompositionRevision"},
                {"metadata", Json{{"name", DerivedName(r.name, hash, 253)},
                                  {"labels", Json{{std::string(kLabelCompositionName), r.name},
                                                  {std::string(kLabelCompositionHash), hash}}},
                                  {"ownerReferences", Json::array({ControllerRef(*comp)})}}},
                {"spec", rev_spec}};
  auto created = revs.Create(revision);
  if (!created.ok() && !core::IsAlreadyExists(created.status())) {
    if (core::IsInvalid(created.status())) {
      events_.Event(*comp, reconcile::kEventTypeWarning, "InvalidComposition",
                    "cannot create a CompositionRevision: " + created.status().message());
      return Result::Done();
    }
    return created.status();
  }
  return Result::Done();
}

// ---------------------------------------------------------------------------------------------
// XrdRuntime

void XrdRuntime::StartComposite() {
  client::InformerOptions o{.compact = true, .clock = &impl_.clock_};
  xrs_ = std::make_unique<client::Informer>(impl_.manager_.rest(), types_.xr, o);
  (void)xrs_->indexer().AddIndex(kByComposition, [](const Json& xr) {
    std::string c = GetString(xr, {"spec", "compositionRef", "name"});
    return c.empty() ? std::vector<std::string>{} : std::vector<std::string>{c};
  });
  xr_reconciler_ = std::make_unique<reconcile::FuncReconciler>(
      [this](const Request& r) { return ReconcileComposite(r); });
  xr_controller_ = std::make_unique<reconcile::Controller>(
      "klutch-manager-" + core::ToLower(types_.xr_kind), *xr_reconciler_,
      reconcile::ControllerOptions{.workers = impl_.options_.workers,
                                   .metrics = &impl_.manager_.metrics(),
                                   .clock = &impl_.clock_});
  xr_controller_->For(*xrs_);
  // A deleted XR may unblock its XRD's deletion.
  reconcile::Controller* xrd_controller = impl_.xrd_controller_;
  std::string xrd = xrd_;
  xrs_->AddEventHandler(
      {.on_delete = [xrd_controller, xrd](const ObjectPtr&) { xrd_controller->queue().Add(xrd); }});
  xrs_->Start();
  xr_controller_->Start();
}

void XrdRuntime::StartClaim() {
  if (!xrs_) return;
  client::InformerOptions o{.compact = true, .clock = &impl_.clock_};
  claims_ = std::make_unique<client::Informer>(impl_.manager_.rest(), types_.claim, o);
  (void)claims_->indexer().AddIndex(kUnbound, [](const Json& claim) {
    return GetString(claim, {"spec", "resourceRef", "name"}).empty()
               ? std::vector<std::string>{kUnbound}
               : std::vector<std::string>{};
  });
  claim_reconciler_ = std::make_unique<reconcile::FuncReconciler>(
      [this](const Request& r) { return ReconcileClaim(r); });
  claim_controller_ = std::make_unique<reconcile::Controller>(
      "klutch-manager-" + core::ToLower(types_.claim_kind), *claim_reconciler_,
      reconcile::ControllerOptions{.workers = impl_.options_.workers,
                                   .metrics = &impl_.manager_.metrics(),
                                   .clock = &impl_.clock_});
  claim_controller_->For(*claims_);
  claim_controller_->Watches(*xrs_, reconcile::MapByLabels(std::string(kLabelClaimNamespace),
                                                           std::string(kLabelClaimName)));
  reconcile::Controller* xrd_controller = impl_.xrd_controller_;
  std::string xrd = xrd_;
  claims_->AddEventHandler(
      {.on_delete = [xrd_controller, xrd](const ObjectPtr&) { xrd_controller->queue().Add(xrd); }});
  claims_->Start();
  claim_controller_->Start();
}

core::Result<Result> XrdRuntime::CompositeFailed(const Json& xr, std::string_view reason,
                                                 const std::string& message, bool retry,
                                                 std::string_view condition_reason) {
  Json modified = xr;
  bool changed = reconcile::SetCondition(modified,
                                         {.type = "Synced",
                                          .status = "False",
                                          .reason = std::string(condition_reason),
                                          .message = message},
                                         impl_.clock_);
  if (changed) {
    auto w = reconcile::Committer(client::ResourceClient(impl_.manager_.rest(), types_.xr),
                                  std::string(kFieldManager))
                 .CommitStatus(xr, modified);
    xr_writes_.Wrote(machinery::Name(xr), xr, w);
    if (!w.ok()) return w.status();
    KLUTCH_LOG(kWarn, "compose", "{} {}: {}: {}", types_.xr_kind, machinery::Name(xr), reason,
               message);
    impl_.events_.Event(xr, reconcile::kEventTypeWarning, reason, message);
  }
  if (retry) return Result::Requeue();
  return Result::Done();
}

core::Status XrdRuntime::PublishConnection(const Json& owner, const std::string& ns,
                                           const std::string& name,
                                           const std::map<std::string, std::string>& data,
                                           bool& changed) {
  changed = false;
  client::ResourceClient secrets(impl_.manager_.rest(), client::resources::kSecrets, ns);
  auto existing = secrets.Get(name);
  if (!existing.ok() && !core::IsNotFound(existing.status())) return existing.status();
  Json want = EncodeData(data);
  if (existing.ok()) {
    const Json* have = Find(*existing, {"data"});
    if ((have ? *have : Json::object()) == want) return core::Status::Ok();
    if (ControllerUid(*existing) != machinery::Uid(owner)) {
      return core::Status(core::Reason::kConflict,
                          "Secret " + ns + "/" + name +
                              " exists and is not controlled by this resource: delete it or "
                              "choose another writeConnectionSecretToRef.name");
    }
  }
  Json secret{{"apiVersion", "v1"},
              {"kind", "Secret"},
              {"metadata", Json{{"name", name},
                                {"namespace", ns},
                                {"ownerReferences", Json::array({ControllerRef(owner)})}}},
              {"type", std::string(kConnectionSecretType)},
              {"data", want}};
  auto w = secrets.Patch(name, client::PatchType::kApply, machinery::Dump(secret),
                         {.field_manager = std::string(kFieldManager), .force = true});
  if (!w.ok()) return w.status();
  changed = true;
  return core::Status::Ok();
}

core::Result<Result> XrdRuntime::ReconcileComposite(const Request& r) {
  if (!Synced(false)) return Result::RequeueAfter(std::chrono::milliseconds(200));
  ObjectPtr xr_ptr = xrs_->indexer().Get(r.Key());
  if (!xr_ptr) return Result::Done();
  if (xr_writes_.Stale(r.Key(), *xr_ptr)) return Result::Done();
  if (machinery::IsBeingDeleted(*xr_ptr)) return ReportDeletion(*xr_ptr, r.Key());
  const Json& xr = *xr_ptr;
  client::ResourceClient xr_client(impl_.manager_.rest(), types_.xr);
  reconcile::Committer committer(xr_client, std::string(kFieldManager));
  if (IsPaused(xr)) {
    return MarkPaused(xr, committer, xr_writes_, r.Key());
  }
  const Json* spec_ptr = Find(xr, {"spec"});
  const Json spec = spec_ptr ? *spec_ptr : Json::object();
  auto selection =
      SelectComposition(spec, types_.ApiVersion(), types_.xr_kind, Xrd(),
                        impl_.compositions_->indexer().List(), impl_.revisions_->indexer().List());
  if (!selection.ok()) {
    return CompositeFailed(xr, "SelectComposition",
                           "cannot select a composition: " + selection.status().message(), false);
  }
  auto inputs = StepInputs(selection->spec, impl_.functions_->indexer().List());
  if (!inputs.ok()) {
    return CompositeFailed(
        xr, "ComposeResources",
        "composition \"" + selection->composition + "\" cannot run: " + inputs.status().message(),
        false);
  }

  // What exists of each planned composed resource.
  struct Target {
    GroupVersionResource gvr;
    bool namespaced = false;
    std::string name;
    std::string ns;
    client::Informer* informer = nullptr;
  };
  std::map<std::string, Target> targets;  // by composition resource name
  std::map<std::string, ObservedResource> observed;
  const std::string xr_name = machinery::Name(xr);
  const std::string xr_uid = machinery::Uid(xr);
  for (const Json& input : *inputs) {
    const Json* resources = Find(input, {"resources"});
    if (!resources || !resources->is_array()) continue;
    for (const Json& res : *resources) {
      std::string rname = GetString(res, {"name"});
      const Json* base = Find(res, {"base"});
      if (rname.empty() || !base) continue;  // RunPatchAndTransform reports it
      std::string api_version = GetString(*base, {"apiVersion"});
      std::string kind = GetString(*base, {"kind"});
      auto slash = api_version.find('/');
      std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
      std::string version =
          slash == std::string::npos ? api_version : api_version.substr(slash + 1);
      auto mapping = impl_.mapper_.ForKind(group, kind, version);
      if (!mapping.ok()) {
        return CompositeFailed(xr, "ComposeResources",
                               "composed resource \"" + rname +
                                   "\": " + mapping.status().message() +
                                   ": install the provider that serves " + kind + "." + api_version,
                               true);
      }
      Target t{.gvr = mapping->gvr, .namespaced = mapping->namespaced};
      t.name = GetString(*base, {"metadata", "name"});
      if (t.name.empty()) t.name = ComposedName(xr_name, rname);
      t.ns = GetString(*base, {"metadata", "namespace"});
      if (t.namespaced && t.ns.empty()) {
        return CompositeFailed(xr, "ComposeResources",
                               "composed resource \"" + rname + "\" is a namespaced " + kind +
                                   " but its base sets no metadata.namespace",
                               false);
      }
      std::chrono::milliseconds age{0};
      t.informer = &impl_.Composed(t.gvr, age);
      if (!t.informer->HasSynced()) {
        if (age < std::chrono::seconds(10)) {
          return Result::RequeueAfter(std::chrono::milliseconds(50));
        }
        // Never listed: most likely RBAC. Say so and back off instead of spinning.
        auto f = CompositeFailed(xr, "ComposeResources",
                                 "cannot list and watch " + t.gvr.GroupResource() +
                                     " (composed resource \"" + rname +
                                     "\"): check that klutch manager may list and watch it "
                                     "(RBAC) and that its CustomResourceDefinition is served",
                                 false);
        if (!f.ok()) return f.status();
        return Result::RequeueAfter(std::chrono::seconds(10));
      }
      ObjectPtr existing = t.informer->indexer().Get(t.ns.empty() ? t.name : t.ns + "/" + t.name);
      if (!existing && !GetString(*base, {"metadata", "name"}).empty()) {
        // A name the composition fixes may belong to an object the informer's label selector
        // does not show: never take over (and later garbage-collect) someone else's object.
        auto live = client::ResourceClient(impl_.manager_.rest(), t.gvr, t.ns).Get(t.name);
        if (live.ok()) {
          existing = std::make_shared<const Json>(*std::move(live));
        } else if (!core::IsNotFound(live.status())) {
          return live.status();
        }
      }
      if (existing) {
        if (ControllerUid(*existing) != xr_uid) {
          // Retried with backoff: the object the message asks to delete is not watched.
          return CompositeFailed(xr, "ComposeResources",
                                 kind + " " + t.name + " (composed resource \"" + rname +
                                     "\") exists and is controlled by another resource: delete "
                                     "it so this composite can create its own",
                                 true);
        }
        ObservedResource obs{.object = *existing};
        // Connection details from the resource's connection Secret, when it writes one.
        std::string secret = GetString(*existing, {"spec", "writeConnectionSecretToRef", "name"});
        std::string secret_ns =
            GetString(*existing, {"spec", "writeConnectionSecretToRef", "namespace"});
        const Json* details = Find(res, {"connectionDetails"});
        if (!secret.empty() && !secret_ns.empty() && details && !details->empty()) {
          auto s =
              client::ResourceClient(impl_.manager_.rest(), client::resources::kSecrets, secret_ns)
                  .Get(secret);
          if (s.ok()) obs.connection = SecretData(*s);
        }
        observed.emplace(rname, std::move(obs));
      }
      targets.emplace(rname, std::move(t));
    }
  }

  // Run the steps; each sees the composite the previous one produced.
  Json composite = xr;
  std::vector<DesiredResource> desired;
  std::map<std::string, std::string> details;
  for (const Json& input : *inputs) {
    auto step = RunPatchAndTransform(input, composite, observed);
    if (!step.ok()) {
      return CompositeFailed(xr, "ComposeResources",
                             "cannot compose resources with composition \"" +
                                 selection->composition + "\": " + step.status().message(),
                             false);
    }
    composite = std::move(step->composite);
    for (auto& d : step->resources) desired.push_back(std::move(d));
    for (auto& [k, v] : step->connection_details) details[k] = v;
  }

  // Apply what differs.
  Json refs = Json::array();
  std::set<std::string> wanted;      // "gvr|ns/name"
  std::vector<std::string> unready;  // name, and ": why" when the resource says why
  bool failing = false;              // one of them reports an error, not progress
  for (DesiredResource& d : desired) {
    auto tit = targets.find(d.name);
    if (tit == targets.end()) continue;
    Target& t = tit->second;
    Json& object = d.object;
    Json& meta = machinery::MutableMetadata(object);
    meta["name"] = t.name;
    if (t.namespaced) meta["namespace"] = t.ns;
    if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = Json::object();
    meta["labels"][std::string(kLabelComposite)] = xr_name;
    const Json* xr_labels = Find(xr, {"metadata", "labels"});
    for (std::string_view key : {kLabelClaimName, kLabelClaimNamespace}) {
      std::string v = xr_labels ? GetString(*xr_labels, {key}) : "";
      if (!v.empty()) meta["labels"][std::string(key)] = v;
    }
    if (!meta.contains("annotations") || !meta["annotations"].is_object()) {
      meta["annotations"] = Json::object();
    }
    meta["annotations"][std::string(kAnnotationResourceName)] = d.name;
    meta["ownerReferences"] = Json::array({ControllerRef(xr)});
    meta["annotations"][std::string(kDesiredHashAnnotation)] = machinery::JsonHash(object);
    refs.push_back(Json{{"apiVersion", GetString(object, {"apiVersion"})},
                        {"kind", GetString(object, {"kind"})},
                        {"name", t.name}});
    wanted.insert(GvrKey(t.gvr) + "|" + t.ns + "/" + t.name);
    auto obs = observed.find(d.name);
    if (!d.ready) {
      std::string why = obs == observed.end() ? "" : UnreadyReason(obs->second.object);
      unready.push_back(why.empty() ? d.name : d.name + ": " + why);
      failing = failing || (obs != observed.end() && ComposedFailing(obs->second.object));
    }
    if (obs != observed.end() &&
        machinery::Covers(obs->second.object, object, machinery::ListCover::kInOrder)) {
      continue;
    }
    std::chrono::milliseconds wait{0};
    if (!impl_.AllowWrite(xr_name + "/" + d.name, wait)) {
      // No countdown in the text: the condition changes once per trip, not every second.
      std::string message =
          "holding back writes to composed resources for " +
          std::to_string(impl_.options_.breaker_cooldown.count() / 1000) + "s: \"" + d.name +
          "\" was rewritten more than " + std::to_string(impl_.options_.breaker_writes) +
          " times in " + std::to_string(impl_.options_.breaker_window.count() / 1000) +
          "s, so another controller may be changing a field this composition sets";
      auto f = CompositeFailed(xr, "CircuitBreakerOpen", message, false, "CircuitBreakerOpen");
      if (!f.ok()) return f.status();
      return Result::RequeueAfter(wait);
    }
    auto applied = client::ResourceClient(impl_.manager_.rest(), t.gvr, t.ns)
                       .Patch(t.name, client::PatchType::kApply, machinery::Dump(object),
                              {.field_manager = std::string(kFieldManager), .force = true});
    impl_.composed_writes_.Increment({{"verb", "apply"}});
    if (!applied.ok()) {
      bool user_error = core::IsInvalid(applied.status()) ||
                        applied.status().reason() == core::Reason::kBadRequest;
      return CompositeFailed(xr, "ComposeResources",
                             "cannot apply composed resource \"" + d.name + "\" (" +
                                 GetString(object, {"kind"}) + " " + t.name +
                                 "): " + applied.status().message(),
                             !user_error);
    }
  }
  // Composed resources this XR no longer wants.
  {
    std::vector<std::pair<GroupVersionResource, Json>> stale;
    for (const auto& [rname, t] : targets) {
      (void)rname;
      for (const auto& o : t.informer->indexer().ByIndex(kByComposite, xr_name)) {
        std::string key =
            GvrKey(t.gvr) + "|" + machinery::Namespace(*o) + "/" + machinery::Name(*o);
        if (!wanted.count(key) && ControllerUid(*o) == xr_uid && !machinery::IsBeingDeleted(*o)) {
          stale.emplace_back(t.gvr, *o);
          wanted.insert(key);  // once
        }
      }
    }
    for (const auto& [gvr, o] : stale) {
      auto d = client::ResourceClient(impl_.manager_.rest(), gvr, machinery::Namespace(o))
                   .Delete(machinery::Name(o));
      impl_.composed_writes_.Increment({{"verb", "delete"}});
      if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
    }
  }

  // The XR's spec: selection and resource references.
  Json current = xr;
  Json with_spec = xr;
  with_spec["spec"]["compositionRef"] = Json{{"name", selection->composition}};
  if (!selection->revision.empty()) {
    with_spec["spec"]["compositionRevisionRef"] = Json{{"name", selection->revision}};
  }
  with_spec["spec"]["resourceRefs"] = refs;
  if (with_spec != current) {
    auto w = committer.Commit(current, with_spec);
    xr_writes_.Wrote(r.Key(), current, w);
    if (!w.ok()) return w.status();
    current = *w;
  }

  // Connection details.
  Json modified = current;
  if (const Json* st = Find(composite, {"status"})) {
    modified["status"] = *st;
  }
  std::string secret_name = GetString(current, {"spec", "writeConnectionSecretToRef", "name"});
  std::string secret_ns = GetString(current, {"spec", "writeConnectionSecretToRef", "namespace"});
  if (!secret_name.empty() && !secret_ns.empty()) {
    std::map<std::string, std::string> published = details;
    const Json* keys = Find(Xrd(), {"spec", "connectionSecretKeys"});
    if (keys && keys->is_array() && !keys->empty()) {
      std::set<std::string> allowed;
      for (const auto& k : machinery::Strings(keys)) allowed.insert(k);
      std::erase_if(published, [&](const auto& kv) { return !allowed.count(kv.first); });
    }
    bool changed = false;
    core::Status s = PublishConnection(current, secret_ns, secret_name, published, changed);
    if (!s.ok()) {
      return CompositeFailed(current, "PublishConnectionDetails",
                             "cannot publish connection details: " + s.message(), true);
    }
    if (changed || !Find(current, {"status", "connectionDetails", "lastPublishedTime"})) {
      modified["status"]["connectionDetails"]["lastPublishedTime"] =
          core::FormatTime(impl_.clock_.Now());
    }
  }
  reconcile::SetCondition(
      modified, {.type = "Synced", .status = "True", .reason = "ReconcileSuccess"}, impl_.clock_);
  if (unready.empty()) {
    reconcile::SetCondition(modified, {.type = "Ready", .status = "True", .reason = "Available"},
                            impl_.clock_);
  } else {
    reconcile::SetCondition(modified,
                            {.type = "Ready",
                             .status = "False",
                             .reason = failing ? "Unavailable" : "Creating",
                             .message = "Unready resources: " + core::Join(unready, "; ")},
                            impl_.clock_);
  }
  auto w = committer.CommitStatus(current, modified);
  xr_writes_.Wrote(r.Key(), current, w);
  if (!w.ok()) return w.status();
  return Result::Done();
}

core::Result<Result> XrdRuntime::ReportDeletion(const Json& xr, const std::string& key) {
  std::vector<std::string> waiting;
  const Json* refs = Find(xr, {"spec", "resourceRefs"});
  for (const Json& ref : refs && refs->is_array() ? *refs : Json::array()) {
    std::string api_version = GetString(ref, {"apiVersion"});
    auto slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
    auto mapping = impl_.mapper_.ForKind(group, GetString(ref, {"kind"}), version);
    if (!mapping.ok()) continue;
    std::chrono::milliseconds age{0};
    client::Informer& informer = impl_.Composed(mapping->gvr, age);
    std::string ns = GetString(ref, {"namespace"});
    std::string name = GetString(ref, {"name"});
    ObjectPtr composed = informer.indexer().Get(ns.empty() ? name : ns + "/" + name);
    if (!composed) continue;
    auto ready = reconcile::FindCondition(*composed, "Ready");
    if (ready && !ready->message.empty()) waiting.push_back(ready->message);
  }
  Json modified = xr;
  reconcile::SetCondition(modified,
                          {.type = "Ready",
                           .status = "False",
                           .reason = "Deleting",
                           .message = core::Join(waiting, "; ")},
                          impl_.clock_);
  if (modified == xr) return Result::Done();
  client::ResourceClient xr_client(impl_.manager_.rest(), types_.xr);
  auto w = reconcile::Committer(xr_client, std::string(kFieldManager)).CommitStatus(xr, modified);
  xr_writes_.Wrote(key, xr, w);
  if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  return Result::Done();
}

core::Result<Result> XrdRuntime::ClaimFailed(const Json& claim, std::string_view reason,
                                             const std::string& message) {
  Json modified = claim;
  bool changed = reconcile::SetCondition(
      modified,
      {.type = "Synced", .status = "False", .reason = "ReconcileError", .message = message},
      impl_.clock_);
  if (!reconcile::FindCondition(modified, "Ready")) {
    reconcile::SetCondition(modified,
                            {.type = "Ready",
                             .status = "False",
                             .reason = "Creating",
                             .message = "the claim has no composite resource yet"},
                            impl_.clock_);
  }
  if (changed) {
    auto w = reconcile::Committer(client::ResourceClient(impl_.manager_.rest(), types_.claim,
                                                         machinery::Namespace(claim)),
                                  std::string(kFieldManager))
                 .CommitStatus(claim, modified);
    claim_writes_.Wrote(machinery::Namespace(claim) + "/" + machinery::Name(claim), claim, w);
    if (!w.ok()) return w.status();
    KLUTCH_LOG(kWarn, "compose", "{} {}/{}: {}: {}", GetString(claim, {"kind"}),
               machinery::Namespace(claim), machinery::Name(claim), reason, message);
    impl_.events_.Event(claim, reconcile::kEventTypeWarning, reason, message);
  }
  return Result::Done();
}

core::Result<Result> XrdRuntime::ReconcileClaim(const Request& r) {
  if (!Synced(true)) return Result::RequeueAfter(std::chrono::milliseconds(200));
  ObjectPtr claim_ptr = claims_->indexer().Get(r.Key());
  if (!claim_ptr) return Result::Done();
  if (claim_writes_.Stale(r.Key(), *claim_ptr)) return Result::Done();
  const Json& claim = *claim_ptr;
  const std::string ns = machinery::Namespace(claim);
  const std::string name = machinery::Name(claim);
  client::ResourceClient claim_client(impl_.manager_.rest(), types_.claim, ns);
  client::ResourceClient xr_client(impl_.manager_.rest(), types_.xr);
  reconcile::Committer claim_committer(claim_client, std::string(kFieldManager));
  reconcile::Committer xr_committer(xr_client, std::string(kFieldManager));

  std::string xr_name = GetString(claim, {"spec", "resourceRef", "name"});
  if (xr_name.empty()) xr_name = DerivedName(name, machinery::Uid(claim), 253);
  ObjectPtr xr = xrs_->indexer().Get(xr_name);
  auto bound_here = [&](const Json& x) {
    return GetString(x, {"spec", "claimRef", "name"}) == name &&
           GetString(x, {"spec", "claimRef", "namespace"}) == ns;
  };

  if (machinery::IsBeingDeleted(claim)) {
    if (!machinery::HasFinalizer(claim, kClaimFinalizer)) return Result::Done();
    std::string policy = GetString(claim, {"spec", "compositeDeletePolicy"});
    if (policy.empty()) policy = GetString(Xrd(), {"spec", "defaultCompositeDeletePolicy"});
    if (policy.empty()) policy = "Background";
    if (!xr) {
      // The cache may not have seen an XR created moments ago: never release the claim on
      // its word alone, or the XR (and its data service) would be left without an owner.
      auto live = xr_client.Get(xr_name);
      if (live.ok()) {
        xr = std::make_shared<const Json>(*std::move(live));
      } else if (!core::IsNotFound(live.status())) {
        return live.status();
      }
    }
    if (xr && bound_here(*xr)) {
      if (!machinery::IsBeingDeleted(*xr)) {
        auto d = xr_client.Delete(xr_name, {.propagation_policy = policy});
        if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
      }
      // Foreground: the claim stays until the XR and its composed resources are gone (the
      // XR's deletion queues the claim again), and says what the deletion waits for.
      if (policy == "Foreground") {
        // Annotations still travel: one may be what the deletion waits for (ADR 0014).
        Json changed = ClaimAnnotationChanges(claim, *xr);
        if (!changed.empty()) {
          auto p = xr_client.Patch(xr_name, client::PatchType::kMerge,
                                   machinery::Dump(Json{{"metadata", {{"annotations", changed}}}}),
                                   {.field_manager = std::string(kFieldManager)});
          if (!p.ok() && !core::IsNotFound(p.status())) return p.status();
        }
        auto xr_ready = reconcile::FindCondition(*xr, "Ready");
        std::string message = xr_ready && xr_ready->reason == "Deleting" ? xr_ready->message : "";
        Json modified = claim;
        reconcile::SetCondition(
            modified,
            {.type = "Ready",
             .status = "False",
             .reason = "Deleting",
             .message =
                 message.empty() ? "deleting the composite resource and its resources" : message},
            impl_.clock_);
        if (modified != claim) {
          auto w = claim_committer.CommitStatus(claim, modified);
          claim_writes_.Wrote(r.Key(), claim, w);
          if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
        }
        return Result::Done();
      }
    }
    Json modified = claim;
    machinery::RemoveFinalizer(modified, kClaimFinalizer);
    auto w = claim_committer.Commit(claim, modified);
    claim_writes_.Wrote(r.Key(), claim, w);
    if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
    return Result::Done();
  }
  if (IsPaused(claim)) {
    return MarkPaused(claim, claim_committer, claim_writes_, r.Key());
  }
  if (xr && !bound_here(*xr)) {
    return ClaimFailed(claim, "BindCompositeResource",
                       "composite resource " + xr_name + " is bound to another claim (" +
                           GetString(*xr, {"spec", "claimRef", "namespace"}) + "/" +
                           GetString(*xr, {"spec", "claimRef", "name"}) +
                           "): remove spec.resourceRef to get a composite of its own");
  }
  const Json* claim_spec_ptr = Find(claim, {"spec"});
  const Json claim_spec = claim_spec_ptr ? *claim_spec_ptr : Json::object();

  // The XR's spec as the claim wants it.
  auto xr_spec_for = [&](const Json* existing_spec) {
    Json spec = Json::object();
    for (auto it = claim_spec.begin(); it != claim_spec.end(); ++it) {
      if (!ClaimOnly(it.key())) spec[it.key()] = *it;
    }
    if (existing_spec && existing_spec->is_object()) {
      for (auto it = existing_spec->begin(); it != existing_spec->end(); ++it) {
        const std::string& k = it.key();
        if (CompositeOnly(k)) {
          spec[k] = *it;
        } else if (SelectionField(k)) {
          bool automatic = GetString(spec, {"compositionUpdatePolicy"}) != "Manual";
          if (!spec.contains(k) || (k == "compositionRevisionRef" && automatic)) spec[k] = *it;
        }
      }
    }
    // An XRD's enforced composition wins over whatever the claim names (one writer).
    if (std::string enforced = GetString(Xrd(), {"spec", "enforcedCompositionRef", "name"});
        !enforced.empty()) {
      spec["compositionRef"] = Json{{"name", enforced}};
    }
    spec["claimRef"] = Json{{"apiVersion", types_.ApiVersion()},
                            {"kind", types_.claim_kind},
                            {"name", name},
                            {"namespace", ns}};
    if (!GetString(claim_spec, {"writeConnectionSecretToRef", "name"}).empty()) {
      spec["writeConnectionSecretToRef"] =
          Json{{"name", machinery::Uid(claim)},
               {"namespace", impl_.options_.connection_secret_namespace}};
    } else {
      spec.erase("writeConnectionSecretToRef");
    }
    return spec;
  };

  // The claim: finalizer, resourceRef, and the selection the XR made (or will make). Written
  // before the XR is created, so a claim deleted right then still finds its XR.
  Json current = claim;
  auto bind_claim = [&](const Json& xr_spec) -> core::Status {
    Json modified = current;
    machinery::AddFinalizer(modified, kClaimFinalizer);
    modified["spec"]["resourceRef"] =
        Json{{"apiVersion", types_.ApiVersion()}, {"kind", types_.xr_kind}, {"name", xr_name}};
    if (xr_spec.is_object()) {
      bool automatic = GetString(xr_spec, {"compositionUpdatePolicy"}) != "Manual";
      bool enforced = !GetString(Xrd(), {"spec", "enforcedCompositionRef", "name"}).empty();
      for (auto it = xr_spec.begin(); it != xr_spec.end(); ++it) {
        const std::string& k = it.key();
        if (!SelectionField(k)) continue;
        if (!claim_spec.contains(k) || (k == "compositionRevisionRef" && automatic) ||
            (k == "compositionRef" && enforced)) {
          modified["spec"][k] = *it;
        }
      }
    }
    if (modified == current) return core::Status::Ok();
    auto w = claim_committer.Commit(current, modified);
    claim_writes_.Wrote(r.Key(), current, w);
    if (!w.ok()) return w.status();
    current = *w;
    return core::Status::Ok();
  };

  Json xr_now;
  if (!xr) {
    auto selection = SelectComposition(claim_spec, types_.ApiVersion(), types_.xr_kind, Xrd(),
                                       impl_.compositions_->indexer().List(),
                                       impl_.revisions_->indexer().List());
    if (!selection.ok()) {
      return ClaimFailed(claim, "SelectComposition",
                         "cannot select a composition: " + selection.status().message());
    }
    auto inputs = StepInputs(selection->spec, impl_.functions_->indexer().List());
    if (!inputs.ok()) {
      return ClaimFailed(claim, "SelectComposition",
                         "composition \"" + selection->composition +
                             "\" cannot run: " + inputs.status().message());
    }
    Json spec = xr_spec_for(nullptr);
    spec["compositionRef"] = Json{{"name", selection->composition}};
    if (!selection->revision.empty()) {
      spec["compositionRevisionRef"] = Json{{"name", selection->revision}};
    }
    spec["compositionUpdatePolicy"] = selection->update_policy;
    spec["resourceRefs"] = PlannedResourceRefs(*inputs, xr_name);
    Json labels = Json::object();
    if (const Json* l = Find(claim, {"metadata", "labels"}); l && l->is_object()) labels = *l;
    labels[std::string(kLabelClaimName)] = name;
    labels[std::string(kLabelClaimNamespace)] = ns;
    labels[std::string(kLabelComposite)] = xr_name;
    Json object{{"apiVersion", types_.ApiVersion()},
                {"kind", types_.xr_kind},
                {"metadata", Json{{"name", xr_name}, {"labels", labels}}},
                {"spec", spec}};
    ApplyAnnotationChanges(object, ClaimAnnotationChanges(claim, Json()));
    if (auto bound = bind_claim(spec); !bound.ok()) return bound;
    auto created = xr_client.Create(object);
    if (!created.ok()) {
      if (core::IsAlreadyExists(created.status())) return Result::Requeue();  // cache lag
      if (core::IsInvalid(created.status()) ||
          created.status().reason() == core::Reason::kBadRequest) {
        return ClaimFailed(
            claim, "ConfigureCompositeResource",
            "cannot create composite resource " + xr_name + ": " + created.status().message());
      }
      return created.status();
    }
    xr_now = *std::move(created);
  } else {
    xr_now = *xr;
    Json want = xr_now;
    want["spec"] = xr_spec_for(Find(xr_now, {"spec"}));
    const Json* claim_labels = Find(claim, {"metadata", "labels"});
    if (claim_labels && claim_labels->is_object()) {
      Json& labels = machinery::MutableMetadata(want)["labels"];
      if (!labels.is_object()) labels = Json::object();
      for (auto it = claim_labels->begin(); it != claim_labels->end(); ++it) labels[it.key()] = *it;
      labels[std::string(kLabelClaimName)] = name;  // reserved: never taken from the claim
      labels[std::string(kLabelClaimNamespace)] = ns;
      labels[std::string(kLabelComposite)] = xr_name;
    }
    ApplyAnnotationChanges(want, ClaimAnnotationChanges(claim, xr_now));
    if (want != xr_now) {
      auto w = xr_committer.Commit(xr_now, want);
      xr_writes_.Wrote(xr_name, xr_now, w);
      if (!w.ok()) {
        if (core::IsInvalid(w.status())) {
          return ClaimFailed(
              claim, "ConfigureCompositeResource",
              "cannot update composite resource " + xr_name + ": " + w.status().message());
        }
        return w.status();
      }
      xr_now = *w;
    }
  }

  const Json* xr_spec_now = Find(xr_now, {"spec"});
  if (auto bound = bind_claim(xr_spec_now ? *xr_spec_now : Json::object()); !bound.ok()) {
    return bound;
  }

  // Status: the XR's, with the claim's own Synced.
  Json modified = current;
  Json status = Json::object();
  if (const Json* xs = Find(xr_now, {"status"}); xs && xs->is_object()) {
    for (auto it = xs->begin(); it != xs->end(); ++it) {
      if (it.key() != "conditions" && it.key() != "connectionDetails" &&
          it.key() != "claimConditionTypes") {
        status[it.key()] = *it;
      }
    }
  }
  if (const Json* cs = Find(current, {"status"}); cs && cs->is_object()) {
    for (std::string_view keep : {"conditions", "connectionDetails"}) {
      if (cs->contains(keep)) status[std::string(keep)] = (*cs)[std::string(keep)];
    }
  }
  modified["status"] = status;
  // Synced: the claim's own reconcile went well; an error composing its XR is the claim's
  // error too, since the claim is all its author sees (issue #23).
  auto xr_synced = reconcile::FindCondition(xr_now, "Synced");
  const bool xr_failed = xr_synced && xr_synced->status == reconcile::kConditionFalse;
  if (xr_failed) {
    xr_synced->last_transition_time.clear();
    xr_synced->observed_generation = 0;
    reconcile::SetCondition(modified, *xr_synced, impl_.clock_);
  } else {
    reconcile::SetCondition(
        modified, {.type = "Synced", .status = "True", .reason = "ReconcileSuccess"}, impl_.clock_);
  }
  if (auto ready = reconcile::FindCondition(xr_now, "Ready")) {
    ready->last_transition_time.clear();
    ready->observed_generation = 0;
    reconcile::SetCondition(modified, *ready, impl_.clock_);
  } else {
    // The XR was just created: its first status (written moments from now) queues the claim
    // again, so a status write now would only be overwritten. Unless the claim shows an error
    // that is gone, or the XR one to show.
    if (!xr_failed && !reconcile::IsConditionFalse(current, "Synced")) return Result::Done();
    reconcile::SetCondition(modified,
                            {.type = "Ready",
                             .status = "False",
                             .reason = "Creating",
                             .message = "waiting for composite resource " + xr_name},
                            impl_.clock_);
  }
  // The connection Secret, copied from the XR's.
  std::string secret = GetString(current, {"spec", "writeConnectionSecretToRef", "name"});
  std::string xr_secret = GetString(xr_now, {"spec", "writeConnectionSecretToRef", "name"});
  std::string xr_secret_ns = GetString(xr_now, {"spec", "writeConnectionSecretToRef", "namespace"});
  if (!secret.empty() && !xr_secret.empty()) {
    auto from =
        client::ResourceClient(impl_.manager_.rest(), client::resources::kSecrets, xr_secret_ns)
            .Get(xr_secret);
    if (from.ok()) {
      bool changed = false;
      core::Status s = PublishConnection(current, ns, secret, SecretData(*from), changed);
      if (!s.ok()) {
        auto f = ClaimFailed(current, "PropagateConnectionSecret",
                             "cannot write connection Secret " + secret + ": " + s.message());
        if (!f.ok()) return f.status();
        return Result::Requeue();  // backoff: the Secret in the way is not watched
      }
      if (changed || !Find(current, {"status", "connectionDetails", "lastPublishedTime"})) {
        modified["status"]["connectionDetails"]["lastPublishedTime"] =
            core::FormatTime(impl_.clock_.Now());
      }
    } else if (!core::IsNotFound(from.status())) {
      return from.status();
    }
  }
  auto w = claim_committer.CommitStatus(current, modified);
  claim_writes_.Wrote(r.Key(), current, w);
  if (!w.ok()) return w.status();
  return Result::Done();
}

// ---------------------------------------------------------------------------------------------

Composer::Composer(reconcile::Manager& manager, ComposerOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}
Composer::~Composer() = default;
core::Status Composer::Setup() { return impl_->Setup(); }
void Composer::Stop() { impl_->Stop(); }
size_t Composer::active_xrds() const { return impl_->active_xrds(); }

core::Status InstallManagerApis(client::RestClient& rest, std::chrono::milliseconds timeout,
                                const core::Clock& clock) {
  for (const std::string& file : apis::CrossplaneCrdFiles()) {
    auto crd = machinery::ParseYaml(apis::CrossplaneCrdYaml(file));
    if (!crd.ok()) return core::Internal("embedded " + file + ": " + crd.status().message());
    core::Status s = reconcile::InstallCrd(rest, *crd, timeout, clock);
    if (!s.ok()) return s;
  }
  // The built-in function, so that functionRef names resolve as on a real control plane.
  client::ResourceClient functions(rest, kFunctions);
  Json fn{
      {"apiVersion", "pkg.crossplane.io/v1"},
      {"kind", "Function"},
      {"metadata", Json{{"name", std::string(kPatchAndTransform)},
                        {"annotations", Json{{"klutch.anynines.com/built-in", "true"}}}}},
      {"spec", Json{{"package",
                     "xpkg.upbound.io/crossplane-contrib/function-patch-and-transform:v0.9.2"}}}};
  auto existing = functions.Get(kPatchAndTransform);
  if (!existing.ok()) {
    if (!core::IsNotFound(existing.status())) return existing.status();
    auto created = functions.Create(fn);
    if (!created.ok() && !core::IsAlreadyExists(created.status())) return created.status();
    existing = functions.Get(kPatchAndTransform);
    if (!existing.ok()) return existing.status();
  }
  Json modified = *existing;
  reconcile::SetCondition(modified,
                          {.type = "Installed",
                           .status = "True",
                           .reason = "ActivePackageRevision",
                           .message = "built into klutch manager"},
                          clock);
  reconcile::SetCondition(
      modified, {.type = "Healthy", .status = "True", .reason = "HealthyPackageRevision"}, clock);
  if (modified != *existing) {
    auto w = reconcile::Committer(functions, std::string(kFieldManager))
                 .CommitStatus(*existing, modified);
    if (!w.ok()) return w.status();
  }
  return core::Status::Ok();
}

}  // namespace klutch::compose
