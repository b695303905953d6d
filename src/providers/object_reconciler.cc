#include "providers/object_reconciler.h"

#include <fmt/format.h>

#include <set>
#include <utility>

#include "client/kubeconfig.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"

namespace klutch::providers {

using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;
using machinery::Json;
using reconcile::Request;
using reconcile::Result;

namespace {

constexpr std::string_view kFinalizer = "finalizer.managedresource.crossplane.io";
constexpr std::string_view kFieldManager = "klutch-provider-kubernetes";
// Hash of the manifest last applied, on the live object: a field dropped from the manifest is
// then noticed (the live object still "covers" the smaller manifest) and removed by the apply.
constexpr std::string_view kManifestHashAnnotation = "kubernetes.klutch.anynines.com/manifest-hash";

struct Policies {
  bool create = true, update = true, del = true;
};

Policies PoliciesOf(const Json& object) {
  Policies p;
  const Json* list = Find(object, {"spec", "managementPolicies"});
  if (list && list->is_array() && !list->empty()) {
    std::set<std::string> s;
    for (const auto& v : machinery::Strings(list)) s.insert(v);
    bool all = s.count("*") > 0;
    p.create = all || s.count("Create");
    p.update = all || s.count("Update");
    p.del = all || s.count("Delete");
    return p;
  }
  std::string legacy = GetString(object, {"spec", "managementPolicy"});
  if (legacy == "ObserveCreateUpdate") p.del = false;
  if (legacy == "ObserveDelete") p.create = p.update = false;
  if (legacy == "Observe") p.create = p.update = p.del = false;
  return p;
}

}  // namespace

// What the steps of one Object pass share.
struct ObjectReconciler::Pass {
  const Json& object;
  const std::string key;  // the Object's name
  reconcile::Committer committer;
  Json manifest;  // spec.forProvider.manifest, its namespace normalized
  std::string api_version, kind, name, ns;
  bool local = false;  // the ProviderConfig is this cluster
  Target target;
  client::ResourceMapping mapping;
  Policies policies;
  Json current;   // the Object as last written
  Json observed;  // the live object (null when none)
  bool exists = false;
};

ObjectReconciler::ObjectReconciler(client::RestClient& rest, client::Informer& objects,
                                   client::Informer& configs, const core::Clock& clock,
                                   reconcile::EventRecorder& events,
                                   std::chrono::milliseconds poll_interval, WatchManifest watch)
    : rest_(rest),
      mapper_(rest),
      objects_(objects),
      configs_(configs),
      clock_(clock),
      events_(events),
      poll_interval_(poll_interval),
      watch_(std::move(watch)) {}

core::Result<Result> ObjectReconciler::Reconcile(const Request& r) {
  if (!configs_.HasSynced()) return Result::RequeueAfter(std::chrono::milliseconds(200));
  ObjectPtr ptr = objects_.indexer().Get(r.Key());
  if (!ptr) return Result::Done();
  Pass p{.object = *ptr,
         .key = r.name,
         .committer = reconcile::Committer(client::ResourceClient(rest_, kKubernetesObjects),
                                           std::string(kFieldManager))};
  KLUTCH_RUN_STEP(ReadManifest(p));
  KLUTCH_RUN_STEP(ResolveKind(p));
  client::ResourceClient live_client(*p.target.client, p.mapping.gvr, p.ns);
  if (machinery::IsBeingDeleted(p.object)) return DeleteManaged(p, live_client);
  KLUTCH_RETURN_IF_ERROR(EnsureFinalizer(p));
  KLUTCH_RUN_STEP(ApplyManifest(p, live_client));
  return UpdateObjectStatus(p);
}

ObjectReconciler::Target ObjectReconciler::ClientFor(const std::string& name, bool& local,
                                                     std::string& error) {
  ObjectPtr pc = configs_.indexer().Get(name);
  if (!pc) {
    error = "ProviderConfig " + name +
            " not found: create it (credentials.source InjectedIdentity uses the manager's "
            "own cluster)";
    return {};
  }
  std::string source = GetString(*pc, {"spec", "credentials", "source"});
  if (source == "InjectedIdentity" || source.empty()) {
    local = true;
    // Non-owning: the manager's client and this mapper outlive every reconcile.
    return {std::shared_ptr<client::RestClient>(std::shared_ptr<void>(), &rest_),
            std::shared_ptr<client::RestMapper>(std::shared_ptr<void>(), &mapper_)};
  }
  if (source != "Secret") {
    error = "ProviderConfig " + name + ": credentials.source " + source +
            " is not supported here (InjectedIdentity or Secret)";
    return {};
  }
  std::string ns = GetString(*pc, {"spec", "credentials", "secretRef", "namespace"});
  std::string sname = GetString(*pc, {"spec", "credentials", "secretRef", "name"});
  std::string key = GetString(*pc, {"spec", "credentials", "secretRef", "key"});
  auto secret = client::ResourceClient(rest_, client::resources::kSecrets, ns).Get(sname);
  if (!secret.ok()) {
    error = "ProviderConfig " + name + ": cannot read Secret " + ns + "/" + sname + ": " +
            secret.status().message();
    return {};
  }
  std::string encoded = GetString(*secret, {"data", key});
  auto text = core::Base64Decode(encoded);
  if (!text || text->empty()) {
    error = "ProviderConfig " + name + ": Secret " + ns + "/" + sname + " has no key " + key;
    return {};
  }
  return RemoteClientFor(name, *text, "Secret " + ns + "/" + sname, error);
}

ObjectReconciler::Target ObjectReconciler::RemoteClientFor(const std::string& name,
                                                           const std::string& kubeconfig,
                                                           const std::string& source,
                                                           std::string& error) {
  core::MutexLock lock(mu_);
  auto it = remote_.find(kubeconfig);
  if (it != remote_.end()) return {it->second.client, it->second.mapper};
  auto parsed = client::ParseKubeconfig(kubeconfig, source, ".");
  core::Result<client::RestConfig> config = parsed.ok()
                                                ? client::ResolveKubeconfig(*parsed)
                                                : core::Result<client::RestConfig>(parsed.status());
  if (!config.ok()) {
    error = "ProviderConfig " + name + ": " + config.status().message();
    return {};
  }
  auto rest = client::RestClient::New(*config);
  if (!rest.ok()) {
    error = "ProviderConfig " + name + ": " + rest.status().message();
    return {};
  }
  // One client (and discovery cache) per distinct kubeconfig; a rotated one replaces the
  // clients of its ProviderConfig's earlier kubeconfigs.
  std::erase_if(remote_, [&](const auto& kv) { return kv.second.provider_config == name; });
  Remote remote{.provider_config = name, .client = std::move(*rest)};
  remote.mapper = std::make_shared<client::RestMapper>(*remote.client);
  Remote& stored = remote_.emplace(kubeconfig, std::move(remote)).first->second;
  return {stored.client, stored.mapper};
}

core::Result<Result> ObjectReconciler::Failed(const Json& object, std::string_view reason,
                                              const std::string& message) {
  Json modified = object;
  bool changed = reconcile::SetCondition(
      modified,
      {.type = "Synced", .status = "False", .reason = "ReconcileError", .message = message},
      clock_);
  if (changed) {
    auto w = reconcile::Committer(client::ResourceClient(rest_, kKubernetesObjects),
                                  std::string(kFieldManager))
                 .CommitStatus(object, modified);
    if (!w.ok()) return w.status();
    events_.Event(object, reconcile::kEventTypeWarning, reason, message);
  }
  return Result::RequeueAfter(poll_interval_);
}

// The manifest, which must name its apiVersion, kind and name.
reconcile::Step ObjectReconciler::ReadManifest(Pass& p) {
  const Json* manifest_ptr = Find(p.object, {"spec", "forProvider", "manifest"});
  if (!manifest_ptr || !manifest_ptr->is_object()) {
    return Failed(p.object, "InvalidManifest", "spec.forProvider.manifest must be an object");
  }
  p.manifest = *manifest_ptr;
  p.api_version = GetString(p.manifest, {"apiVersion"});
  p.kind = GetString(p.manifest, {"kind"});
  p.name = GetString(p.manifest, {"metadata", "name"});
  if (p.api_version.empty() || p.kind.empty() || p.name.empty()) {
    return Failed(p.object, "InvalidManifest",
                  "spec.forProvider.manifest needs apiVersion, kind and metadata.name");
  }
  return reconcile::Continue();
}

// The ProviderConfig's client and the manifest's resource there (the Object released when
// its kind is no longer served and it is being deleted); the namespace normalized; a local
// manifest watched.
reconcile::Step ObjectReconciler::ResolveKind(Pass& p) {
  std::string pc = GetString(p.object, {"spec", "providerConfigRef", "name"});
  if (pc.empty()) pc = "default";
  std::string error;
  p.target = ClientFor(pc, p.local, error);
  if (!p.target.client) return Failed(p.object, "ProviderConfig", error);
  auto slash = p.api_version.find('/');
  std::string group = slash == std::string::npos ? "" : p.api_version.substr(0, slash);
  std::string version =
      slash == std::string::npos ? p.api_version : p.api_version.substr(slash + 1);
  auto mapping = p.target.mapper->ForKind(group, p.kind, version);
  if (!mapping.ok() && core::IsNotFound(mapping.status()) && machinery::IsBeingDeleted(p.object) &&
      machinery::HasFinalizer(p.object, kFinalizer)) {
    // The kind is no longer served there, so no such object can exist: let the Object go
    // instead of holding its XR's (and claim's) deletion forever.
    Json modified = p.object;
    machinery::RemoveFinalizer(modified, kFinalizer);
    auto w = p.committer.Commit(p.object, modified);
    if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
    events_.Event(p.object, reconcile::kEventTypeNormal, "ManifestKindGone",
                  p.kind + "." + p.api_version + " is no longer served: nothing to delete");
    return Result::Done();
  }
  if (!mapping.ok()) {
    return Failed(p.object, "UnknownKind",
                  "cannot manage " + p.kind + "." + p.api_version + ": " +
                      mapping.status().message() + " (install its CustomResourceDefinition)");
  }
  p.mapping = *std::move(mapping);
  p.ns = GetString(p.manifest, {"metadata", "namespace"});
  if (p.mapping.namespaced && p.ns.empty()) {
    p.ns = "default";
    p.manifest["metadata"]["namespace"] = p.ns;
  }
  if (!p.mapping.namespaced) {
    p.ns.clear();
    if (p.manifest["metadata"].is_object()) p.manifest["metadata"].erase("namespace");
  }
  if (p.local) watch_(p.mapping.gvr, p.ns, p.name, p.key);
  p.policies = PoliciesOf(p.object);
  return reconcile::Continue();
}

// A deleted Object: the managed object deleted (unless orphaned), then the finalizer.
core::Result<Result> ObjectReconciler::DeleteManaged(Pass& p, client::ResourceClient& live_client) {
  const Json& object = p.object;
  if (!machinery::HasFinalizer(object, kFinalizer)) return Result::Done();
  bool orphan = GetString(object, {"spec", "deletionPolicy"}) == "Orphan";
  if (p.policies.del && !orphan) {
    auto live = live_client.Get(p.name);
    if (live.ok()) {
      if (!machinery::IsBeingDeleted(*live)) {
        auto d = live_client.Delete(p.name);
        if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
      }
      // What the managed object waits for (its own Ready=False message, such as an operator
      // saying it is still in use) is this Object's, so that the claim shows it.
      std::string message = fmt::format("waiting for {} {} to be deleted", p.kind,
                                        p.ns.empty() ? p.name : p.ns + "/" + p.name);
      if (auto ready = reconcile::FindCondition(*live, "Ready");
          ready && ready->status == "False" && !ready->message.empty()) {
        message += ": " + ready->message;
      }
      Json modified = object;
      reconcile::SetCondition(
          modified, {.type = "Ready", .status = "False", .reason = "Deleting", .message = message},
          clock_);
      auto w = p.committer.CommitStatus(object, modified);
      if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
      return Result::RequeueAfter(p.local ? poll_interval_ : std::chrono::milliseconds(1000));
    }
    if (!core::IsNotFound(live.status())) return live.status();
  }
  Json modified = object;
  machinery::RemoveFinalizer(modified, kFinalizer);
  auto w = p.committer.Commit(object, modified);
  if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
  return Result::Done();
}

core::Status ObjectReconciler::EnsureFinalizer(Pass& p) {
  p.current = p.object;
  if (machinery::HasFinalizer(p.object, kFinalizer) || !p.policies.del) {
    return core::Status::Ok();
  }
  Json modified = p.object;
  machinery::AddFinalizer(modified, kFinalizer);
  auto w = p.committer.Commit(p.object, modified);
  if (!w.ok()) return w.status();
  p.current = *w;
  return core::Status::Ok();
}

// Server-side applies the manifest when the live object differs (or is missing), as the
// management policies allow.
reconcile::Step ObjectReconciler::ApplyManifest(Pass& p, client::ResourceClient& live_client) {
  auto live = live_client.Get(p.name);
  if (!live.ok() && !core::IsNotFound(live.status())) return live.status();
  p.exists = live.ok();
  p.observed = p.exists ? *live : Json();
  machinery::SetAnnotation(p.manifest, kManifestHashAnnotation, machinery::JsonHash(p.manifest));
  bool want_write =
      p.exists ? p.policies.update &&
                     !machinery::Covers(p.observed, p.manifest, machinery::ListCover::kInOrder)
               : p.policies.create;
  if (!want_write) return reconcile::Continue();
  auto applied = live_client.Patch(p.name, client::PatchType::kApply, machinery::Dump(p.manifest),
                                   {.field_manager = std::string(kFieldManager), .force = true});
  if (!applied.ok()) {
    return Failed(p.current, "ApplyManifest",
                  "cannot apply " + p.kind + " " + (p.ns.empty() ? p.name : p.ns + "/" + p.name) +
                      ": " + applied.status().message());
  }
  p.observed = *std::move(applied);
  p.exists = true;
  return reconcile::Continue();
}

// status.atProvider.manifest, Synced, and Ready per the readiness policy.
core::Result<Result> ObjectReconciler::UpdateObjectStatus(Pass& p) {
  Json modified = p.current;
  if (p.exists) {
    if (p.observed.is_object()) {
      Json& meta = machinery::MutableMetadata(p.observed);
      meta.erase("managedFields");
    }
    modified["status"]["atProvider"]["manifest"] = p.observed;
  }
  reconcile::SetCondition(
      modified, {.type = "Synced", .status = "True", .reason = "ReconcileSuccess"}, clock_);
  std::string policy = GetString(p.current, {"spec", "readiness", "policy"});
  // An object that says it is not ready (Ready=False, as the a8s operator's Postgresql does
  // while it provisions or when it cannot run) is not, whatever the policy: its message is
  // what the claim shows.
  auto object_ready = p.exists ? reconcile::FindCondition(p.observed, "Ready") : std::nullopt;
  const bool says_not_ready = object_ready && object_ready->status == "False";
  bool ready = p.exists && !says_not_ready;
  if (p.exists && policy == "DeriveFromObject") {
    ready = reconcile::IsConditionTrue(p.observed, "Ready");
  } else if (p.exists && policy == "AllTrue") {
    const Json* conditions = Find(p.observed, {"status", "conditions"});
    ready = conditions && conditions->is_array() && !conditions->empty();
    if (ready) {
      for (const Json& c : *conditions) {
        if (GetString(c, {"status"}) != "True") ready = false;
      }
    }
  }
  if (ready) {
    reconcile::SetCondition(modified, {.type = "Ready", .status = "True", .reason = "Available"},
                            clock_);
  } else {
    reconcile::SetCondition(
        modified,
        {.type = "Ready",
         .status = "False",
         .reason = p.exists ? "Unavailable" : "Creating",
         .message = !p.exists ? "the object does not exist and management policies do not "
                                "allow creating it"
                    : says_not_ready && !object_ready->message.empty()
                        ? object_ready->message
                        : "the object is not ready yet (readiness policy " +
                              (policy.empty() ? std::string("SuccessfulCreate") : policy) + ")"},
        clock_);
  }
  auto w = p.committer.CommitStatus(p.current, modified);
  if (!w.ok()) return w.status();
  return Result::RequeueAfter(poll_interval_);
}

}  // namespace klutch::providers
