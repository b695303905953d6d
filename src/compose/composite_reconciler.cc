#include "compose/composite_reconciler.h"

#include <map>
#include <set>
#include <utility>
#include <vector>

#include "compose/composed_status.h"
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

using client::GroupVersionResource;
using client::Json;
using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;
using reconcile::Continue;
using reconcile::Result;
using reconcile::Step;

// Where a planned composed resource lives and what watches it.
struct CompositeReconciler::Target {
  GroupVersionResource gvr;
  bool namespaced = false;
  std::string name;
  std::string ns;
  client::Informer* informer = nullptr;
};

struct CompositeReconciler::Pass {
  const Json& xr;
  const std::string key;
  const std::string xr_name;
  const std::string xr_uid;
  reconcile::Committer committer;
  Selection selection;
  std::vector<Json> inputs;               // one per function step
  std::map<std::string, Target> targets;  // by composition resource name
  std::map<std::string, ObservedResource> observed;
  Json composite;  // the XR as the function steps left it
  std::vector<DesiredResource> desired;
  std::map<std::string, std::string> details;  // connection details
  Json refs = Json::array();                   // spec.resourceRefs
  std::set<std::string> wanted;                // "gvr|ns/name"
  std::vector<std::string> unready;            // name, and ": why" when the resource says why
  bool failing = false;                        // one of them reports an error, not progress
  Json current;                                // the XR as last written
};

bool CompositeReconciler::Synced() const {
  return context_.compositions->HasSynced() && context_.revisions->HasSynced() && xrs_.HasSynced();
}

core::Result<Result> CompositeReconciler::Reconcile(const reconcile::Request& r) {
  if (!Synced()) return Result::RequeueAfter(std::chrono::milliseconds(200));
  ObjectPtr xr = xrs_.indexer().Get(r.Key());
  if (!xr) return Result::Done();
  if (xr_writes_.Stale(r.Key(), *xr)) return Result::Done();
  if (machinery::IsBeingDeleted(*xr)) return ReportDeletion(*xr, r.Key());
  Pass pass{.xr = *xr,
            .key = r.Key(),
            .xr_name = machinery::Name(*xr),
            .xr_uid = machinery::Uid(*xr),
            .committer = reconcile::Committer(client::ResourceClient(context_.rest(), types_.xr),
                                              std::string(kFieldManager))};
  if (IsPaused(*xr)) return MarkPaused(*xr, pass.committer, xr_writes_, r.Key(), context_.clock);
  KLUTCH_RUN_STEP(SelectRevision(pass));
  KLUTCH_RUN_STEP(ObserveComposed(pass));
  KLUTCH_RUN_STEP(RunFunctions(pass));
  KLUTCH_RUN_STEP(ApplyComposed(pass));
  KLUTCH_RETURN_IF_ERROR(DeleteUnwanted(pass));
  KLUTCH_RETURN_IF_ERROR(EnsureCompositeSpec(pass));
  return UpdateStatus(pass);
}

// The composition revision and the function inputs it runs.
Step CompositeReconciler::SelectRevision(Pass& pass) {
  const Json* spec_ptr = Find(pass.xr, {"spec"});
  const Json spec = spec_ptr ? *spec_ptr : Json::object();
  auto selection = SelectComposition(spec, types_.ApiVersion(), types_.xr_kind, context_.Xrd(xrd_),
                                     context_.compositions->indexer().List(),
                                     context_.revisions->indexer().List());
  if (!selection.ok()) {
    return Failed(pass.xr, "SelectComposition",
                  "cannot select a composition: " + selection.status().message(), false);
  }
  pass.selection = *std::move(selection);
  auto inputs = StepInputs(pass.selection.spec, context_.functions->indexer().List());
  if (!inputs.ok()) {
    return Failed(pass.xr, "ComposeResources",
                  "composition \"" + pass.selection.composition +
                      "\" cannot run: " + inputs.status().message(),
                  false);
  }
  pass.inputs = *std::move(inputs);
  return Continue();
}

// What exists of each planned composed resource.
Step CompositeReconciler::ObserveComposed(Pass& pass) {
  for (const Json& input : pass.inputs) {
    const Json* resources = Find(input, {"resources"});
    if (!resources || !resources->is_array()) continue;
    for (const Json& res : *resources) {
      std::string rname = GetString(res, {"name"});
      if (rname.empty() || !Find(res, {"base"})) continue;  // RunPatchAndTransform reports it
      Target t;
      KLUTCH_RUN_STEP(ResolveTarget(pass, res, t));
      KLUTCH_RUN_STEP(ObserveExisting(pass, res, t));
      pass.targets.emplace(rname, std::move(t));
    }
  }
  return Continue();
}

// The resource, name, namespace and (synced) informer of composition resource `res`.
Step CompositeReconciler::ResolveTarget(Pass& pass, const Json& res, Target& t) {
  const std::string rname = GetString(res, {"name"});
  const Json& base = *Find(res, {"base"});
  std::string api_version = GetString(base, {"apiVersion"});
  std::string kind = GetString(base, {"kind"});
  auto slash = api_version.find('/');
  std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
  std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
  auto mapping = context_.mapper.ForKind(group, kind, version);
  if (!mapping.ok()) {
    return Failed(pass.xr, "ComposeResources",
                  "composed resource \"" + rname + "\": " + mapping.status().message() +
                      ": install the provider that serves " + kind + "." + api_version,
                  true);
  }
  t = Target{.gvr = mapping->gvr, .namespaced = mapping->namespaced};
  t.name = GetString(base, {"metadata", "name"});
  if (t.name.empty()) t.name = ComposedName(pass.xr_name, rname);
  t.ns = GetString(base, {"metadata", "namespace"});
  if (t.namespaced && t.ns.empty()) {
    return Failed(pass.xr, "ComposeResources",
                  "composed resource \"" + rname + "\" is a namespaced " + kind +
                      " but its base sets no metadata.namespace",
                  false);
  }
  std::chrono::milliseconds age{0};
  t.informer = &context_.composed.Get(t.gvr, age);
  if (t.informer->HasSynced()) return Continue();
  if (age < std::chrono::seconds(10)) return Result::RequeueAfter(std::chrono::milliseconds(50));
  // Never listed: most likely RBAC. Say so and back off instead of spinning.
  auto f =
      Failed(pass.xr, "ComposeResources",
             "cannot list and watch " + t.gvr.GroupResource() + " (composed resource \"" + rname +
                 "\"): check that klutch manager may list and watch it "
                 "(RBAC) and that its CustomResourceDefinition is served",
             false);
  if (!f.ok()) return f.status();
  return Result::RequeueAfter(std::chrono::seconds(10));
}

// The existing object of target `t` (when this XR controls it) and its connection details.
Step CompositeReconciler::ObserveExisting(Pass& pass, const Json& res, const Target& t) {
  const std::string rname = GetString(res, {"name"});
  ObjectPtr existing = t.informer->indexer().Get(t.ns.empty() ? t.name : t.ns + "/" + t.name);
  if (!existing && !GetString(res, {"base", "metadata", "name"}).empty()) {
    // A name the composition fixes may belong to an object the informer's label selector
    // does not show: never take over (and later garbage-collect) someone else's object.
    auto live = client::ResourceClient(context_.rest(), t.gvr, t.ns).Get(t.name);
    if (live.ok()) {
      existing = std::make_shared<const Json>(*std::move(live));
    } else if (!core::IsNotFound(live.status())) {
      return live.status();
    }
  }
  if (!existing) return Continue();
  if (ControllerUid(*existing) != pass.xr_uid) {
    // Retried with backoff: the object the message asks to delete is not watched.
    return Failed(pass.xr, "ComposeResources",
                  GetString(res, {"base", "kind"}) + " " + t.name + " (composed resource \"" +
                      rname +
                      "\") exists and is controlled by another resource: delete "
                      "it so this composite can create its own",
                  true);
  }
  ObservedResource obs{.object = *existing};
  // Connection details from the resource's connection Secret, when it writes one.
  std::string secret = GetString(*existing, {"spec", "writeConnectionSecretToRef", "name"});
  std::string secret_ns = GetString(*existing, {"spec", "writeConnectionSecretToRef", "namespace"});
  const Json* details = Find(res, {"connectionDetails"});
  if (!secret.empty() && !secret_ns.empty() && details && !details->empty()) {
    auto s =
        client::ResourceClient(context_.rest(), client::resources::kSecrets, secret_ns).Get(secret);
    if (s.ok()) obs.connection = SecretData(*s);
  }
  pass.observed.emplace(rname, std::move(obs));
  return Continue();
}

// Runs the function steps; each sees the composite the previous one produced.
Step CompositeReconciler::RunFunctions(Pass& pass) {
  pass.composite = pass.xr;
  for (const Json& input : pass.inputs) {
    auto step = RunPatchAndTransform(input, pass.composite, pass.observed);
    if (!step.ok()) {
      return Failed(pass.xr, "ComposeResources",
                    "cannot compose resources with composition \"" + pass.selection.composition +
                        "\": " + step.status().message(),
                    false);
    }
    pass.composite = std::move(step->composite);
    for (auto& d : step->resources) pass.desired.push_back(std::move(d));
    for (auto& [k, v] : step->connection_details) pass.details[k] = v;
  }
  return Continue();
}

// Labels, annotations and owner of each desired resource; applies those that differ.
Step CompositeReconciler::ApplyComposed(Pass& pass) {
  for (DesiredResource& d : pass.desired) {
    auto tit = pass.targets.find(d.name);
    if (tit == pass.targets.end()) continue;
    const Target& t = tit->second;
    Json& object = d.object;
    Json& meta = machinery::MutableMetadata(object);
    meta["name"] = t.name;
    if (t.namespaced) meta["namespace"] = t.ns;
    if (!meta.contains("labels") || !meta["labels"].is_object()) meta["labels"] = Json::object();
    meta["labels"][std::string(kLabelComposite)] = pass.xr_name;
    const Json* xr_labels = Find(pass.xr, {"metadata", "labels"});
    for (std::string_view key : {kLabelClaimName, kLabelClaimNamespace}) {
      std::string v = xr_labels ? GetString(*xr_labels, {key}) : "";
      if (!v.empty()) meta["labels"][std::string(key)] = v;
    }
    if (!meta.contains("annotations") || !meta["annotations"].is_object()) {
      meta["annotations"] = Json::object();
    }
    meta["annotations"][std::string(kAnnotationResourceName)] = d.name;
    meta["ownerReferences"] = Json::array({ControllerRef(pass.xr)});
    meta["annotations"][std::string(kDesiredHashAnnotation)] = machinery::JsonHash(object);
    pass.refs.push_back(Json{{"apiVersion", GetString(object, {"apiVersion"})},
                             {"kind", GetString(object, {"kind"})},
                             {"name", t.name}});
    pass.wanted.insert(GvrKey(t.gvr) + "|" + t.ns + "/" + t.name);
    auto obs = pass.observed.find(d.name);
    if (!d.ready) {
      std::string why = obs == pass.observed.end() ? "" : UnreadyReason(obs->second.object);
      pass.unready.push_back(why.empty() ? d.name : d.name + ": " + why);
      pass.failing =
          pass.failing || (obs != pass.observed.end() && ComposedFailing(obs->second.object));
    }
    if (obs != pass.observed.end() &&
        machinery::Covers(obs->second.object, object, machinery::ListCover::kInOrder)) {
      continue;
    }
    KLUTCH_RUN_STEP(ApplyOne(pass, d, t));
  }
  return Continue();
}

// Server-side applies one composed resource, unless its circuit breaker is open.
Step CompositeReconciler::ApplyOne(Pass& pass, DesiredResource& d, const Target& t) {
  const ComposerOptions& options = context_.options;
  std::chrono::milliseconds wait{0};
  if (!context_.breaker.AllowWrite(pass.xr_name + "/" + d.name, wait)) {
    // No countdown in the text: the condition changes once per trip, not every second.
    std::string message = "holding back writes to composed resources for " +
                          std::to_string(options.breaker_cooldown.count() / 1000) + "s: \"" +
                          d.name + "\" was rewritten more than " +
                          std::to_string(options.breaker_writes) + " times in " +
                          std::to_string(options.breaker_window.count() / 1000) +
                          "s, so another controller may be changing a field this composition sets";
    auto f = Failed(pass.xr, "CircuitBreakerOpen", message, false, "CircuitBreakerOpen");
    if (!f.ok()) return f.status();
    return Result::RequeueAfter(wait);
  }
  auto applied = client::ResourceClient(context_.rest(), t.gvr, t.ns)
                     .Patch(t.name, client::PatchType::kApply, machinery::Dump(d.object),
                            {.field_manager = std::string(kFieldManager), .force = true});
  context_.composed_writes.Increment({{"verb", "apply"}});
  if (applied.ok()) return Continue();
  bool user_error =
      core::IsInvalid(applied.status()) || applied.status().reason() == core::Reason::kBadRequest;
  return Failed(pass.xr, "ComposeResources",
                "cannot apply composed resource \"" + d.name + "\" (" +
                    GetString(d.object, {"kind"}) + " " + t.name +
                    "): " + applied.status().message(),
                !user_error);
}

// Composed resources this XR no longer wants.
core::Status CompositeReconciler::DeleteUnwanted(Pass& pass) {
  std::vector<std::pair<GroupVersionResource, Json>> stale;
  for (const auto& [rname, t] : pass.targets) {
    for (const auto& o : t.informer->indexer().ByIndex(kByComposite, pass.xr_name)) {
      std::string key = GvrKey(t.gvr) + "|" + machinery::Namespace(*o) + "/" + machinery::Name(*o);
      if (!pass.wanted.count(key) && ControllerUid(*o) == pass.xr_uid &&
          !machinery::IsBeingDeleted(*o)) {
        stale.emplace_back(t.gvr, *o);
        pass.wanted.insert(key);  // once
      }
    }
  }
  for (const auto& [gvr, o] : stale) {
    auto d = client::ResourceClient(context_.rest(), gvr, machinery::Namespace(o))
                 .Delete(machinery::Name(o));
    context_.composed_writes.Increment({{"verb", "delete"}});
    if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
  }
  return core::Status::Ok();
}

// The XR's spec: selection and resource references.
core::Status CompositeReconciler::EnsureCompositeSpec(Pass& pass) {
  pass.current = pass.xr;
  Json with_spec = pass.xr;
  with_spec["spec"]["compositionRef"] = Json{{"name", pass.selection.composition}};
  if (!pass.selection.revision.empty()) {
    with_spec["spec"]["compositionRevisionRef"] = Json{{"name", pass.selection.revision}};
  }
  with_spec["spec"]["resourceRefs"] = pass.refs;
  if (with_spec == pass.current) return core::Status::Ok();
  auto w = pass.committer.Commit(pass.current, with_spec);
  xr_writes_.Wrote(pass.key, pass.current, w);
  if (!w.ok()) return w.status();
  pass.current = *w;
  return core::Status::Ok();
}

// The connection Secret, with the XRD's connectionSecretKeys; its publication time in
// `modified`'s status.
Step CompositeReconciler::PublishConnection(Pass& pass, Json& modified) {
  const Json& current = pass.current;
  std::string secret_name = GetString(current, {"spec", "writeConnectionSecretToRef", "name"});
  std::string secret_ns = GetString(current, {"spec", "writeConnectionSecretToRef", "namespace"});
  if (secret_name.empty() || secret_ns.empty()) return Continue();
  std::map<std::string, std::string> published = pass.details;
  const Json xrd = context_.Xrd(xrd_);
  const Json* keys = Find(xrd, {"spec", "connectionSecretKeys"});
  if (keys && keys->is_array() && !keys->empty()) {
    std::set<std::string> allowed;
    for (const auto& k : machinery::Strings(keys)) allowed.insert(k);
    std::erase_if(published, [&](const auto& kv) { return !allowed.count(kv.first); });
  }
  bool changed = false;
  core::Status s =
      PublishConnectionSecret(context_.rest(), current, secret_ns, secret_name, published, changed);
  if (!s.ok()) {
    return Failed(current, "PublishConnectionDetails",
                  "cannot publish connection details: " + s.message(), true);
  }
  if (changed || !Find(current, {"status", "connectionDetails", "lastPublishedTime"})) {
    modified["status"]["connectionDetails"]["lastPublishedTime"] =
        core::FormatTime(context_.clock.Now());
  }
  return Continue();
}

// Status: the functions' ToComposite patches, the connection Secret, Synced and Ready.
core::Result<Result> CompositeReconciler::UpdateStatus(Pass& pass) {
  Json modified = pass.current;
  if (const Json* st = Find(pass.composite, {"status"})) modified["status"] = *st;
  KLUTCH_RUN_STEP(PublishConnection(pass, modified));
  reconcile::SetCondition(
      modified, {.type = "Synced", .status = "True", .reason = "ReconcileSuccess"}, context_.clock);
  if (pass.unready.empty()) {
    reconcile::SetCondition(modified, {.type = "Ready", .status = "True", .reason = "Available"},
                            context_.clock);
  } else {
    reconcile::SetCondition(modified,
                            {.type = "Ready",
                             .status = "False",
                             .reason = pass.failing ? "Unavailable" : "Creating",
                             .message = "Unready resources: " + core::Join(pass.unready, "; ")},
                            context_.clock);
  }
  auto w = pass.committer.CommitStatus(pass.current, modified);
  xr_writes_.Wrote(pass.key, pass.current, w);
  if (!w.ok()) return w.status();
  return Result::Done();
}

core::Result<Result> CompositeReconciler::ReportDeletion(const Json& xr, const std::string& key) {
  std::vector<std::string> waiting;
  const Json* refs = Find(xr, {"spec", "resourceRefs"});
  for (const Json& ref : refs && refs->is_array() ? *refs : Json::array()) {
    std::string api_version = GetString(ref, {"apiVersion"});
    auto slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
    auto mapping = context_.mapper.ForKind(group, GetString(ref, {"kind"}), version);
    if (!mapping.ok()) continue;
    std::chrono::milliseconds age{0};
    client::Informer& informer = context_.composed.Get(mapping->gvr, age);
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
                          context_.clock);
  if (modified == xr) return Result::Done();
  client::ResourceClient xr_client(context_.rest(), types_.xr);
  auto w = reconcile::Committer(xr_client, std::string(kFieldManager)).CommitStatus(xr, modified);
  xr_writes_.Wrote(key, xr, w);
  if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  return Result::Done();
}

core::Result<Result> CompositeReconciler::Failed(const Json& xr, std::string_view reason,
                                                 const std::string& message, bool retry,
                                                 std::string_view condition_reason) {
  Json modified = xr;
  bool changed = reconcile::SetCondition(modified,
                                         {.type = "Synced",
                                          .status = "False",
                                          .reason = std::string(condition_reason),
                                          .message = message},
                                         context_.clock);
  if (changed) {
    auto w = reconcile::Committer(client::ResourceClient(context_.rest(), types_.xr),
                                  std::string(kFieldManager))
                 .CommitStatus(xr, modified);
    xr_writes_.Wrote(machinery::Name(xr), xr, w);
    if (!w.ok()) return w.status();
    KLUTCH_LOG(kWarn, "compose", "{} {}: {}: {}", types_.xr_kind, machinery::Name(xr), reason,
               message);
    context_.events.Event(xr, reconcile::kEventTypeWarning, reason, message);
  }
  if (retry) return Result::Requeue();
  return Result::Done();
}

}  // namespace klutch::compose
