// The Composer: the informers and controllers of the composition engine (composer.h).
#include "compose/composer.h"

#include "apis/crossplane_crds.h"
#include "client/discovery.h"
#include "compose/compose_context.h"
#include "compose/composed_informers.h"
#include "compose/composition_revision_reconciler.h"
#include "compose/names.h"
#include "compose/xrd.h"
#include "compose/xrd_reconciler.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"
#include "reconcile/crd_installer.h"
#include "reconcile/events.h"

namespace klutch::compose {

using client::Json;
using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;

class Composer::Impl {
 public:
  Impl(reconcile::Manager& manager, ComposerOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        mapper_(manager.rest()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_),
        composed_(manager.rest(), clock_, [this](const Json& o) { RouteComposed(o); }),
        breaker_(options_.breaker_writes, options_.breaker_window, options_.breaker_cooldown,
                 clock_,
                 manager.metric_registry().Counter(
                     "klutch_manager_circuit_breaker_trips_total",
                     "Times an XR's composed-resource writes were held back")),
        context_{.manager = manager,
                 .options = options_,
                 .clock = clock_,
                 .mapper = mapper_,
                 .events = events_,
                 .composed_writes = manager.metric_registry().Counter(
                     "klutch_manager_composed_writes_total",
                     "Writes to composed resources, by verb (apply, delete)"),
                 .composed = composed_,
                 .breaker = breaker_},
        xrd_reconciler_(context_),
        revision_reconciler_(context_) {}
  ~Impl() { Stop(); }

  core::Status Setup();
  void Stop();
  size_t active_xrds() const { return xrd_reconciler_.active(); }

 private:
  // Queues the XRs using a Composition (or one of its revisions) and the unbound claims of
  // its type.
  void EnqueueForComposition(const Json& composition_or_revision);
  // Queues the controlling XR of a composed resource.
  void RouteComposed(const Json& composed);

  reconcile::Manager& manager_;
  ComposerOptions options_;
  const core::Clock& clock_;
  client::RestMapper mapper_;
  reconcile::EventRecorder events_;
  ComposedInformers composed_;
  CircuitBreaker breaker_;
  ComposeContext context_;
  XrdReconciler xrd_reconciler_;
  CompositionRevisionReconciler revision_reconciler_;
  core::Mutex mu_;
  bool stopped_ GUARDED_BY(mu_) = false;
  client::Informer::HandlerId composition_handler_ = 0;
  client::Informer::HandlerId revision_handler_ = 0;
};

core::Status Composer::Impl::Setup() {
  client::InformerOptions o{.clock = &clock_};
  context_.xrds = &manager_.Informer(kXrds, o);
  context_.compositions = &manager_.Informer(kCompositions, o);
  context_.revisions = &manager_.Informer(kCompositionRevisions, o);
  context_.functions = &manager_.Informer(kFunctions, o);
  client::InformerOptions crd_options{.label_selector = std::string(kLabelXrdName),
                                      .clock = &clock_};
  context_.crds = &manager_.Informer(client::resources::kCustomResourceDefinitions, crd_options);

  auto& xrd =
      manager_.AddController("klutch-manager-compositeresourcedefinition", xrd_reconciler_, 2);
  xrd.For(*context_.xrds);
  xrd.Watches(*context_.crds, reconcile::MapByLabels("", std::string(kLabelXrdName)));
  context_.xrd_controller = &xrd;
  auto& comp =
      manager_.AddController("klutch-manager-compositionrevision", revision_reconciler_, 1);
  comp.For(*context_.compositions);
  comp.Owns(*context_.revisions, "apiextensions.crossplane.io", "Composition", false);

  client::EventHandler reroute{
      .on_add = [this](const ObjectPtr& o) { EnqueueForComposition(*o); },
      .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { EnqueueForComposition(*o); },
      .on_delete = [this](const ObjectPtr& o) { EnqueueForComposition(*o); }};
  composition_handler_ = context_.compositions->AddEventHandler(reroute);
  revision_handler_ = context_.revisions->AddEventHandler(reroute);
  return core::Status::Ok();
}

void Composer::Impl::Stop() {
  {
    core::MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (composition_handler_) context_.compositions->RemoveEventHandler(composition_handler_);
  if (revision_handler_) context_.revisions->RemoveEventHandler(revision_handler_);
  xrd_reconciler_.Stop();
  composed_.Stop();
  events_.Stop();
}

void Composer::Impl::EnqueueForComposition(const Json& o) {
  std::string name = machinery::Kind(o) == "CompositionRevision"
                         ? GetString(o, {"metadata", "labels", kLabelCompositionName})
                         : machinery::Name(o);
  std::string api_version = GetString(o, {"spec", "compositeTypeRef", "apiVersion"});
  std::string kind = GetString(o, {"spec", "compositeTypeRef", "kind"});
  xrd_reconciler_.ForEachRuntime(api_version, kind, [&](XrdRuntime& rt) {
    rt.EnqueueUsers(name);
    rt.EnqueueUnboundClaims();
  });
}

void Composer::Impl::RouteComposed(const Json& composed) {
  const Json* refs = Find(composed, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return;
  for (const Json& r : *refs) {
    const Json* c = Find(r, {"controller"});
    if (!c || !c->is_boolean() || !*c->get_ptr<const Json::boolean_t*>()) continue;
    std::string name = GetString(r, {"name"});
    xrd_reconciler_.ForEachRuntime(GetString(r, {"apiVersion"}), GetString(r, {"kind"}),
                                   [&](XrdRuntime& rt) { rt.EnqueueComposite(name); });
  }
}

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
