#include "compose/xrd_reconciler.h"

#include <utility>

#include "compose/names.h"
#include "compose/object_helpers.h"
#include "compose/xrd.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::compose {

using client::GroupVersionResource;
using client::Json;
using client::ObjectPtr;
using machinery::Find;
using reconcile::Continue;
using reconcile::Result;
using reconcile::Step;

namespace {
// How often an XRD whose CRD name is taken by a foreign CRD looks again: that CRD is not
// watched (the CRD informer sees only the XRDs' own), and deleting it must be enough.
constexpr std::chrono::seconds kConflictRecheck{5};
}  // namespace

struct XrdReconciler::Pass {
  const Json& xrd;
  const std::string name;
  reconcile::Committer committer;
  client::ResourceClient crd_client;
  core::Result<XrdTypes> types;
  core::Result<GeneratedCrds> crds;
  Json current;  // the XRD as last written
  Json status;   // its status as this pass wants it
  bool xr_ready = false;
  bool claim_ready = false;
};

core::Result<Result> XrdReconciler::Reconcile(const reconcile::Request& r) {
  ObjectPtr xrd = context_.xrds->indexer().Get(r.Key());
  if (!xrd) {
    StopRuntime(r.name);
    return Result::Done();
  }
  Pass pass{.xrd = *xrd,
            .name = r.name,
            .committer = reconcile::Committer(client::ResourceClient(context_.rest(), kXrds),
                                              std::string(kFieldManager)),
            .crd_client = client::ResourceClient(context_.rest(),
                                                 client::resources::kCustomResourceDefinitions),
            .types = XrdTypesOf(*xrd),
            .crds = CrdsForXrd(*xrd)};
  if (machinery::IsBeingDeleted(*xrd)) return Delete(pass);
  KLUTCH_RETURN_IF_ERROR(EnsureFinalizer(pass));
  pass.status = pass.current;
  if (!pass.crds.ok()) return Failed(pass, "InvalidDefinition", pass.crds.status().message());
  if (!pass.types.ok()) return Failed(pass, "InvalidDefinition", pass.types.status().message());
  KLUTCH_RUN_STEP(EnsureCrds(pass));
  KLUTCH_RUN_STEP(EnsureRuntime(pass));
  return UpdateStatus(pass);
}

// A deleted XRD: blocked while claims or XRs exist, else its runtime stopped, its CRDs
// deleted and the finalizer removed.
core::Result<Result> XrdReconciler::Delete(Pass& pass) {
  const Json& xrd = pass.xrd;
  if (!machinery::HasFinalizer(xrd, kXrdFinalizer)) return Result::Done();
  KLUTCH_ASSIGN_OR_RETURN(std::vector<std::string> left, RemainingKinds(pass));
  if (!left.empty()) {
    std::string message = "cannot delete: " + core::Join(left, " and ") +
                          " resources of this definition still exist; delete them first "
                          "(kubectl get claim,composite)";
    Json modified = xrd;
    bool changed = reconcile::SetCondition(
        modified,
        {.type = "Established", .status = "True", .reason = "DeletionBlocked", .message = message},
        context_.clock);
    if (changed) {
      auto w = pass.committer.CommitStatus(xrd, modified);
      if (!w.ok()) return w.status();
      context_.events.Event(xrd, reconcile::kEventTypeWarning, "DeletionBlocked", message);
    }
    // The last claim's or XR's deletion queues the XRD again while its runtime runs; the
    // recheck covers a manager that restarted in between.
    return Result::RequeueAfter(std::chrono::seconds(10));
  }
  StopRuntime(pass.name);
  KLUTCH_RETURN_IF_ERROR(DeleteOwnedCrds(pass));
  Json modified = xrd;
  machinery::RemoveFinalizer(modified, kXrdFinalizer);
  auto w = pass.committer.Commit(xrd, modified);
  if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  return Result::Done();
}

core::Result<std::vector<std::string>> XrdReconciler::RemainingKinds(Pass& pass) {
  // Asked of the server, not a cache: after a restart there is no runtime, and a cache
  // that has not synced would say "none" while every XR (and its database) still exists.
  std::vector<std::string> left;
  if (!pass.types.ok()) return left;
  std::vector<std::pair<GroupVersionResource, std::string>> kinds = {
      {pass.types->claim, pass.types->claim_kind}, {pass.types->xr, pass.types->xr_kind}};
  for (const auto& [gvr, kind] : kinds) {
    if (gvr.resource.empty()) continue;
    auto some = client::ResourceClient(context_.rest(), gvr).List({.limit = 1});
    if (!some.ok()) {
      if (core::IsNotFound(some.status())) continue;  // the CRD is gone already
      return some.status();
    }
    const Json* items = Find(*some, {"items"});
    if (items && items->is_array() && !items->empty()) left.push_back(kind);
  }
  return left;
}

core::Status XrdReconciler::DeleteOwnedCrds(Pass& pass) {
  if (!pass.crds.ok()) return core::Status::Ok();
  std::vector<Json> owned{pass.crds->composite};
  if (pass.crds->claim) owned.push_back(*pass.crds->claim);
  for (const Json& crd : owned) {
    ObjectPtr existing = context_.crds->indexer().Get(machinery::Name(crd));
    if (existing && ControllerUid(*existing) == machinery::Uid(pass.xrd)) {
      auto d = pass.crd_client.Delete(machinery::Name(crd));
      if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
    }
  }
  return core::Status::Ok();
}

core::Status XrdReconciler::EnsureFinalizer(Pass& pass) {
  pass.current = pass.xrd;
  if (machinery::HasFinalizer(pass.current, kXrdFinalizer)) return core::Status::Ok();
  Json modified = pass.current;
  machinery::AddFinalizer(modified, kXrdFinalizer);
  auto w = pass.committer.Commit(pass.current, modified);
  if (!w.ok()) return w.status();
  pass.current = *w;
  return core::Status::Ok();
}

// The XR CRD, then the claim CRD; a conflict or an invalid CRD is the user's to fix.
Step XrdReconciler::EnsureCrds(Pass& pass) {
  auto xr_ready = EnsureCrd(pass, pass.crds->composite);
  if (!xr_ready.ok()) return CrdFailed(pass, xr_ready.status(), "");
  pass.xr_ready = *xr_ready;
  if (!pass.crds->claim) return Continue();
  auto claim_ready = EnsureCrd(pass, *pass.crds->claim);
  if (!claim_ready.ok()) return CrdFailed(pass, claim_ready.status(), "claim ");
  pass.claim_ready = *claim_ready;
  return Continue();
}

Step XrdReconciler::CrdFailed(Pass& pass, const core::Status& status, std::string_view what) {
  if (status.reason() == core::Reason::kConflict) {
    auto failed = Failed(pass, "ConflictingCustomResourceDefinition", status.message());
    if (!failed.ok()) return failed;
    return Result::RequeueAfter(kConflictRecheck);
  }
  if (core::IsInvalid(status)) {
    return Failed(pass, "InvalidDefinition",
                  "the generated " + std::string(what) +
                      "CustomResourceDefinition is invalid: " + status.message());
  }
  return status;
}

// Creates or updates a CRD, refusing to take over one this XRD does not own.
core::Result<bool> XrdReconciler::EnsureCrd(Pass& pass, Json crd) {
  const std::string name = machinery::Name(crd);
  const std::string uid = machinery::Uid(pass.xrd);
  // What we last wrote, so an unchanged CRD is left alone even after the server filled in
  // its defaults (kube-apiserver adds spec.conversion and names.singular).
  machinery::SetAnnotation(crd, kDesiredHashAnnotation, machinery::JsonHash(crd["spec"]));
  ObjectPtr existing = context_.crds->indexer().Get(name);
  if (!existing) {
    // Not in the cache: a CRD without our label, or one we created a moment ago.
    auto got = pass.crd_client.Get(name);
    if (got.ok()) {
      if (ControllerUid(*got) != uid) {
        return core::Status(core::Reason::kConflict,
                            "CustomResourceDefinition " + name +
                                " already exists and is not owned by this "
                                "CompositeResourceDefinition: delete it or rename the XRD");
      }
      existing = std::make_shared<const Json>(*std::move(got));
    } else {
      if (!core::IsNotFound(got.status())) return got.status();
      auto created = pass.crd_client.Create(crd);
      if (!created.ok()) return created.status();
      return false;
    }
  }
  if (ControllerUid(*existing) != uid) {
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
  if (same) return reconcile::IsConditionTrue(*existing, "Established");
  Json updated = *existing;
  updated["spec"] = crd["spec"];
  Json& meta = machinery::MutableMetadata(updated);
  meta["labels"] = crd["metadata"]["labels"];
  meta["ownerReferences"] = crd["metadata"]["ownerReferences"];
  machinery::SetAnnotation(updated, kDesiredHashAnnotation,
                           machinery::Annotation(crd, kDesiredHashAnnotation));
  auto u = pass.crd_client.Update(updated);
  if (!u.ok()) return u.status();
  return false;
}

// Starts (or restarts, when the types changed) the runtime and the controllers whose CRDs
// serve.
Step XrdReconciler::EnsureRuntime(Pass& pass) {
  std::unique_ptr<XrdRuntime> replaced;
  {
    core::MutexLock lock(mu_);
    if (stopped_) return Result::Done();
    auto it = runtimes_.find(pass.name);
    if (it != runtimes_.end() && !(it->second->types() == *pass.types)) {
      replaced = std::move(it->second);
      runtimes_.erase(it);
      it = runtimes_.end();
    }
    if (it == runtimes_.end()) {
      auto runtime = std::make_unique<XrdRuntime>(context_, pass.name, *pass.types);
      it = runtimes_.emplace(pass.name, std::move(runtime)).first;
    }
    XrdRuntime* rt = it->second.get();
    if (pass.xr_ready && !rt->composite_started()) rt->StartComposite();
    if (pass.crds->claim && pass.claim_ready && !rt->claim_started()) rt->StartClaim();
  }
  if (replaced) replaced->Stop();
  return Continue();
}

// Established / Offered: True once the CRD serves, else waiting for it; the types served.
core::Result<Result> XrdReconciler::UpdateStatus(Pass& pass) {
  auto mark = [&](std::string type, bool ready, std::string reason, std::string what) {
    if (ready) {
      reconcile::SetCondition(pass.status, {.type = type, .status = "True", .reason = reason},
                              context_.clock);
    } else {
      reconcile::SetCondition(
          pass.status,
          {.type = type,
           .status = "False",
           .reason = "WaitingForCustomResourceDefinition",
           .message = "waiting for the " + what + " CustomResourceDefinition to be established"},
          context_.clock);
    }
  };
  const XrdTypes& types = *pass.types;
  mark("Established", pass.xr_ready, "WatchingCompositeResource", "composite resource");
  Json controllers{
      {"compositeResourceType", Json{{"apiVersion", types.ApiVersion()}, {"kind", types.xr_kind}}}};
  if (pass.crds->claim) {
    mark("Offered", pass.claim_ready, "WatchingCompositeResourceClaim", "claim");
    controllers["compositeResourceClaimType"] =
        Json{{"apiVersion", types.ApiVersion()}, {"kind", types.claim_kind}};
  }
  pass.status["status"]["controllers"] = controllers;
  auto w = pass.committer.CommitStatus(pass.current, pass.status);
  if (!w.ok()) return w.status();
  return Result::Done();
}

core::Result<Result> XrdReconciler::Failed(Pass& pass, std::string_view reason,
                                           const std::string& message) {
  reconcile::SetCondition(
      pass.status,
      {.type = "Established", .status = "False", .reason = std::string(reason), .message = message},
      context_.clock);
  if (Find(pass.xrd, {"spec", "claimNames"})) {
    reconcile::SetCondition(
        pass.status,
        {.type = "Offered", .status = "False", .reason = std::string(reason), .message = message},
        context_.clock);
  }
  auto w = pass.committer.CommitStatus(pass.current, pass.status);
  if (!w.ok()) return w.status();
  if (*w != pass.current) {
    context_.events.Event(pass.xrd, reconcile::kEventTypeWarning, reason, message);
  }
  return Result::Done();
}

void XrdReconciler::StopRuntime(const std::string& xrd) {
  std::unique_ptr<XrdRuntime> stopped;
  {
    core::MutexLock lock(mu_);
    auto it = runtimes_.find(xrd);
    if (it != runtimes_.end()) {
      stopped = std::move(it->second);
      runtimes_.erase(it);
    }
  }
  if (stopped) stopped->Stop();
}

void XrdReconciler::ForEachRuntime(std::string_view api_version, std::string_view kind,
                                   const std::function<void(XrdRuntime&)>& fn) {
  core::MutexLock lock(mu_);
  for (auto& [xrd, rt] : runtimes_) {
    if (rt->types().xr_kind == kind && rt->types().ApiVersion() == api_version) fn(*rt);
  }
}

void XrdReconciler::Stop() {
  std::map<std::string, std::unique_ptr<XrdRuntime>> runtimes;
  {
    core::MutexLock lock(mu_);
    stopped_ = true;
    runtimes.swap(runtimes_);
  }
  for (auto& [name, rt] : runtimes) rt->Stop();
}

size_t XrdReconciler::active() const {
  core::MutexLock lock(mu_);
  return runtimes_.size();
}

}  // namespace klutch::compose
