#include "compose/claim_reconciler.h"

#include <vector>

#include "compose/names.h"
#include "compose/object_helpers.h"
#include "compose/selection.h"
#include "compose/xrd.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::compose {

using client::Json;
using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;
using reconcile::Continue;
using reconcile::Result;
using reconcile::Step;

namespace {

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
// Selection fields: the claim's when it has them, else the XR's (propagated back).
bool SelectionField(const std::string& key) {
  return key == "compositionRef" || key == "compositionSelector" ||
         key == "compositionRevisionRef" || key == "compositionUpdatePolicy" ||
         key == "compositionRevisionSelector";
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

}  // namespace

struct ClaimReconciler::Pass {
  const Json& claim;
  const std::string key;
  const std::string ns;
  const std::string name;
  client::ResourceClient xr_client;
  reconcile::Committer claim_committer;
  reconcile::Committer xr_committer;
  std::string xr_name;  // spec.resourceRef's, else derived from the claim's uid
  ObjectPtr xr;         // the cache's (or the server's) XR, null when none
  Json claim_spec;
  Json current;  // the claim as last written
  Json xr_now;   // the XR as last written
  bool BoundHere(const Json& x) const {
    return GetString(x, {"spec", "claimRef", "name"}) == name &&
           GetString(x, {"spec", "claimRef", "namespace"}) == ns;
  }
};

bool ClaimReconciler::Synced() const {
  return context_.compositions->HasSynced() && context_.revisions->HasSynced() &&
         xrs_.HasSynced() && claims_.HasSynced();
}

core::Result<Result> ClaimReconciler::Reconcile(const reconcile::Request& r) {
  if (!Synced()) return Result::RequeueAfter(std::chrono::milliseconds(200));
  ObjectPtr claim = claims_.indexer().Get(r.Key());
  if (!claim) return Result::Done();
  if (claim_writes_.Stale(r.Key(), *claim)) return Result::Done();
  const std::string ns = machinery::Namespace(*claim);
  client::ResourceClient xr_client(context_.rest(), types_.xr);
  Pass pass{
      .claim = *claim,
      .key = r.Key(),
      .ns = ns,
      .name = machinery::Name(*claim),
      .xr_client = xr_client,
      .claim_committer = reconcile::Committer(
          client::ResourceClient(context_.rest(), types_.claim, ns), std::string(kFieldManager)),
      .xr_committer = reconcile::Committer(xr_client, std::string(kFieldManager))};
  pass.xr_name = GetString(*claim, {"spec", "resourceRef", "name"});
  if (pass.xr_name.empty()) pass.xr_name = DerivedName(pass.name, machinery::Uid(*claim), 253);
  pass.xr = xrs_.indexer().Get(pass.xr_name);

  if (machinery::IsBeingDeleted(*claim)) return Delete(pass);
  if (IsPaused(*claim)) {
    return MarkPaused(*claim, pass.claim_committer, claim_writes_, r.Key(), context_.clock);
  }
  if (pass.xr && !pass.BoundHere(*pass.xr)) {
    return Failed(*claim, "BindCompositeResource",
                  "composite resource " + pass.xr_name + " is bound to another claim (" +
                      GetString(*pass.xr, {"spec", "claimRef", "namespace"}) + "/" +
                      GetString(*pass.xr, {"spec", "claimRef", "name"}) +
                      "): remove spec.resourceRef to get a composite of its own");
  }
  const Json* claim_spec = Find(*claim, {"spec"});
  pass.claim_spec = claim_spec ? *claim_spec : Json::object();
  pass.current = *claim;
  KLUTCH_RUN_STEP(pass.xr ? UpdateComposite(pass) : CreateComposite(pass));
  const Json* xr_spec_now = Find(pass.xr_now, {"spec"});
  KLUTCH_RETURN_IF_ERROR(BindClaim(pass, xr_spec_now ? *xr_spec_now : Json::object()));
  return PropagateStatus(pass);
}

// A deleted claim: its XR deleted per compositeDeletePolicy, then the finalizer removed.
core::Result<Result> ClaimReconciler::Delete(Pass& pass) {
  const Json& claim = pass.claim;
  if (!machinery::HasFinalizer(claim, kClaimFinalizer)) return Result::Done();
  std::string policy = GetString(claim, {"spec", "compositeDeletePolicy"});
  if (policy.empty())
    policy = GetString(context_.Xrd(xrd_), {"spec", "defaultCompositeDeletePolicy"});
  if (policy.empty()) policy = "Background";
  if (!pass.xr) {
    // The cache may not have seen an XR created moments ago: never release the claim on
    // its word alone, or the XR (and its data service) would be left without an owner.
    auto live = pass.xr_client.Get(pass.xr_name);
    if (live.ok()) {
      pass.xr = std::make_shared<const Json>(*std::move(live));
    } else if (!core::IsNotFound(live.status())) {
      return live.status();
    }
  }
  if (pass.xr && pass.BoundHere(*pass.xr)) {
    if (!machinery::IsBeingDeleted(*pass.xr)) {
      auto d = pass.xr_client.Delete(pass.xr_name, {.propagation_policy = policy});
      if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
    }
    // Foreground: the claim stays until the XR and its composed resources are gone (the
    // XR's deletion queues the claim again), and says what the deletion waits for.
    if (policy == "Foreground") return ReportForegroundDeletion(pass);
  }
  Json modified = claim;
  machinery::RemoveFinalizer(modified, kClaimFinalizer);
  auto w = pass.claim_committer.Commit(claim, modified);
  claim_writes_.Wrote(pass.key, claim, w);
  if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  return Result::Done();
}

// While a Foreground deletion waits for the XR: Ready=False, reason Deleting, with the XR's
// message.
core::Result<Result> ClaimReconciler::ReportForegroundDeletion(Pass& pass) {
  const Json& claim = pass.claim;
  const Json& xr = *pass.xr;
  // Annotations still travel: one may be what the deletion waits for (ADR 0014).
  Json changed = ClaimAnnotationChanges(claim, xr);
  if (!changed.empty()) {
    auto p = pass.xr_client.Patch(pass.xr_name, client::PatchType::kMerge,
                                  machinery::Dump(Json{{"metadata", {{"annotations", changed}}}}),
                                  {.field_manager = std::string(kFieldManager)});
    if (!p.ok() && !core::IsNotFound(p.status())) return p.status();
  }
  auto xr_ready = reconcile::FindCondition(xr, "Ready");
  std::string message = xr_ready && xr_ready->reason == "Deleting" ? xr_ready->message : "";
  Json modified = claim;
  reconcile::SetCondition(
      modified,
      {.type = "Ready",
       .status = "False",
       .reason = "Deleting",
       .message = message.empty() ? "deleting the composite resource and its resources" : message},
      context_.clock);
  if (modified != claim) {
    auto w = pass.claim_committer.CommitStatus(claim, modified);
    claim_writes_.Wrote(pass.key, claim, w);
    if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  }
  return Result::Done();
}

Json ClaimReconciler::CompositeSpecFor(const Pass& pass, const Json* existing_spec) const {
  Json spec = Json::object();
  for (auto it = pass.claim_spec.begin(); it != pass.claim_spec.end(); ++it) {
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
  if (std::string enforced =
          GetString(context_.Xrd(xrd_), {"spec", "enforcedCompositionRef", "name"});
      !enforced.empty()) {
    spec["compositionRef"] = Json{{"name", enforced}};
  }
  spec["claimRef"] = Json{{"apiVersion", types_.ApiVersion()},
                          {"kind", types_.claim_kind},
                          {"name", pass.name},
                          {"namespace", pass.ns}};
  if (!GetString(pass.claim_spec, {"writeConnectionSecretToRef", "name"}).empty()) {
    spec["writeConnectionSecretToRef"] =
        Json{{"name", machinery::Uid(pass.claim)},
             {"namespace", context_.options.connection_secret_namespace}};
  } else {
    spec.erase("writeConnectionSecretToRef");
  }
  return spec;
}

// Written before the XR is created, so a claim deleted right then still finds its XR.
core::Status ClaimReconciler::BindClaim(Pass& pass, const Json& xr_spec) {
  Json modified = pass.current;
  machinery::AddFinalizer(modified, kClaimFinalizer);
  modified["spec"]["resourceRef"] =
      Json{{"apiVersion", types_.ApiVersion()}, {"kind", types_.xr_kind}, {"name", pass.xr_name}};
  if (xr_spec.is_object()) {
    bool automatic = GetString(xr_spec, {"compositionUpdatePolicy"}) != "Manual";
    bool enforced =
        !GetString(context_.Xrd(xrd_), {"spec", "enforcedCompositionRef", "name"}).empty();
    for (auto it = xr_spec.begin(); it != xr_spec.end(); ++it) {
      const std::string& k = it.key();
      if (!SelectionField(k)) continue;
      if (!pass.claim_spec.contains(k) || (k == "compositionRevisionRef" && automatic) ||
          (k == "compositionRef" && enforced)) {
        modified["spec"][k] = *it;
      }
    }
  }
  if (modified == pass.current) return core::Status::Ok();
  auto w = pass.claim_committer.Commit(pass.current, modified);
  claim_writes_.Wrote(pass.key, pass.current, w);
  if (!w.ok()) return w.status();
  pass.current = *w;
  return core::Status::Ok();
}

// A new XR: the composition chosen now and its resources planned, the claim bound first.
Step ClaimReconciler::CreateComposite(Pass& pass) {
  const Json& claim = pass.claim;
  auto selection = SelectComposition(pass.claim_spec, types_.ApiVersion(), types_.xr_kind,
                                     context_.Xrd(xrd_), context_.compositions->indexer().List(),
                                     context_.revisions->indexer().List());
  if (!selection.ok()) {
    return Failed(claim, "SelectComposition",
                  "cannot select a composition: " + selection.status().message());
  }
  auto inputs = StepInputs(selection->spec, context_.functions->indexer().List());
  if (!inputs.ok()) {
    return Failed(
        claim, "SelectComposition",
        "composition \"" + selection->composition + "\" cannot run: " + inputs.status().message());
  }
  Json spec = CompositeSpecFor(pass, nullptr);
  spec["compositionRef"] = Json{{"name", selection->composition}};
  if (!selection->revision.empty()) {
    spec["compositionRevisionRef"] = Json{{"name", selection->revision}};
  }
  spec["compositionUpdatePolicy"] = selection->update_policy;
  spec["resourceRefs"] = PlannedResourceRefs(*inputs, pass.xr_name);
  Json labels = Json::object();
  if (const Json* l = Find(claim, {"metadata", "labels"}); l && l->is_object()) labels = *l;
  labels[std::string(kLabelClaimName)] = pass.name;
  labels[std::string(kLabelClaimNamespace)] = pass.ns;
  labels[std::string(kLabelComposite)] = pass.xr_name;
  Json object{{"apiVersion", types_.ApiVersion()},
              {"kind", types_.xr_kind},
              {"metadata", Json{{"name", pass.xr_name}, {"labels", labels}}},
              {"spec", spec}};
  ApplyAnnotationChanges(object, ClaimAnnotationChanges(claim, Json()));
  KLUTCH_RUN_STEP(BindClaim(pass, spec));
  auto created = pass.xr_client.Create(object);
  if (!created.ok()) {
    if (core::IsAlreadyExists(created.status())) return Result::Requeue();  // cache lag
    if (core::IsInvalid(created.status()) ||
        created.status().reason() == core::Reason::kBadRequest) {
      return Failed(
          claim, "ConfigureCompositeResource",
          "cannot create composite resource " + pass.xr_name + ": " + created.status().message());
    }
    return created.status();
  }
  pass.xr_now = *std::move(created);
  return Continue();
}

// An existing XR: spec, labels and annotations as the claim wants them.
Step ClaimReconciler::UpdateComposite(Pass& pass) {
  const Json& claim = pass.claim;
  pass.xr_now = *pass.xr;
  Json want = pass.xr_now;
  want["spec"] = CompositeSpecFor(pass, Find(pass.xr_now, {"spec"}));
  const Json* claim_labels = Find(claim, {"metadata", "labels"});
  if (claim_labels && claim_labels->is_object()) {
    Json& labels = machinery::MutableMetadata(want)["labels"];
    if (!labels.is_object()) labels = Json::object();
    for (auto it = claim_labels->begin(); it != claim_labels->end(); ++it) labels[it.key()] = *it;
    labels[std::string(kLabelClaimName)] = pass.name;  // reserved: never taken from the claim
    labels[std::string(kLabelClaimNamespace)] = pass.ns;
    labels[std::string(kLabelComposite)] = pass.xr_name;
  }
  ApplyAnnotationChanges(want, ClaimAnnotationChanges(claim, pass.xr_now));
  if (want == pass.xr_now) return Continue();
  auto w = pass.xr_committer.Commit(pass.xr_now, want);
  xr_writes_.Wrote(pass.xr_name, pass.xr_now, w);
  if (!w.ok()) {
    if (core::IsInvalid(w.status())) {
      return Failed(
          claim, "ConfigureCompositeResource",
          "cannot update composite resource " + pass.xr_name + ": " + w.status().message());
    }
    return w.status();
  }
  pass.xr_now = *w;
  return Continue();
}

// Status: the XR's, with the claim's own Synced (an error composing its XR is the claim's
// error too, since the claim is all its author sees: issue #23), the XR's Ready, and the
// connection Secret.
core::Result<Result> ClaimReconciler::PropagateStatus(Pass& pass) {
  const Json& current = pass.current;
  Json modified = current;
  Json status = Json::object();
  if (const Json* xs = Find(pass.xr_now, {"status"}); xs && xs->is_object()) {
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
  auto xr_synced = reconcile::FindCondition(pass.xr_now, "Synced");
  const bool xr_failed = xr_synced && xr_synced->status == reconcile::kConditionFalse;
  if (xr_failed) {
    xr_synced->last_transition_time.clear();
    xr_synced->observed_generation = 0;
    reconcile::SetCondition(modified, *xr_synced, context_.clock);
  } else {
    reconcile::SetCondition(modified,
                            {.type = "Synced", .status = "True", .reason = "ReconcileSuccess"},
                            context_.clock);
  }
  if (auto ready = reconcile::FindCondition(pass.xr_now, "Ready")) {
    ready->last_transition_time.clear();
    ready->observed_generation = 0;
    reconcile::SetCondition(modified, *ready, context_.clock);
  } else {
    // The XR was just created: its first status (written moments from now) queues the claim
    // again, so a status write now would only be overwritten. Unless the claim shows an error
    // that is gone, or the XR one to show.
    if (!xr_failed && !reconcile::IsConditionFalse(current, "Synced")) return Result::Done();
    reconcile::SetCondition(modified,
                            {.type = "Ready",
                             .status = "False",
                             .reason = "Creating",
                             .message = "waiting for composite resource " + pass.xr_name},
                            context_.clock);
  }
  KLUTCH_RUN_STEP(PropagateConnectionSecret(pass, modified));
  auto w = pass.claim_committer.CommitStatus(current, modified);
  claim_writes_.Wrote(pass.key, current, w);
  if (!w.ok()) return w.status();
  return Result::Done();
}

// The connection Secret, copied from the XR's; its publication time in `modified`'s status.
Step ClaimReconciler::PropagateConnectionSecret(Pass& pass, Json& modified) {
  const Json& current = pass.current;
  std::string secret = GetString(current, {"spec", "writeConnectionSecretToRef", "name"});
  std::string xr_secret = GetString(pass.xr_now, {"spec", "writeConnectionSecretToRef", "name"});
  std::string xr_secret_ns =
      GetString(pass.xr_now, {"spec", "writeConnectionSecretToRef", "namespace"});
  if (secret.empty() || xr_secret.empty()) return Continue();
  auto from = client::ResourceClient(context_.rest(), client::resources::kSecrets, xr_secret_ns)
                  .Get(xr_secret);
  if (!from.ok()) {
    if (core::IsNotFound(from.status())) return Continue();
    return from.status();
  }
  bool changed = false;
  core::Status s = PublishConnectionSecret(context_.rest(), current, pass.ns, secret,
                                           SecretData(*from), changed);
  if (!s.ok()) {
    auto f = Failed(current, "PropagateConnectionSecret",
                    "cannot write connection Secret " + secret + ": " + s.message());
    if (!f.ok()) return f.status();
    return Result::Requeue();  // backoff: the Secret in the way is not watched
  }
  if (changed || !Find(current, {"status", "connectionDetails", "lastPublishedTime"})) {
    modified["status"]["connectionDetails"]["lastPublishedTime"] =
        core::FormatTime(context_.clock.Now());
  }
  return Continue();
}

core::Result<Result> ClaimReconciler::Failed(const Json& claim, std::string_view reason,
                                             const std::string& message) {
  Json modified = claim;
  bool changed = reconcile::SetCondition(
      modified,
      {.type = "Synced", .status = "False", .reason = "ReconcileError", .message = message},
      context_.clock);
  if (!reconcile::FindCondition(modified, "Ready")) {
    reconcile::SetCondition(modified,
                            {.type = "Ready",
                             .status = "False",
                             .reason = "Creating",
                             .message = "the claim has no composite resource yet"},
                            context_.clock);
  }
  if (changed) {
    auto w = reconcile::Committer(
                 client::ResourceClient(context_.rest(), types_.claim, machinery::Namespace(claim)),
                 std::string(kFieldManager))
                 .CommitStatus(claim, modified);
    claim_writes_.Wrote(machinery::Namespace(claim) + "/" + machinery::Name(claim), claim, w);
    if (!w.ok()) return w.status();
    KLUTCH_LOG(kWarn, "compose", "{} {}/{}: {}: {}", GetString(claim, {"kind"}),
               machinery::Namespace(claim), machinery::Name(claim), reason, message);
    context_.events.Event(claim, reconcile::kEventTypeWarning, reason, message);
  }
  return Result::Done();
}

}  // namespace klutch::compose
