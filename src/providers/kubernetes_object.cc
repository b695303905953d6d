#include "providers/kubernetes_object.h"

#include <map>
#include <set>

#include "client/discovery.h"
#include "client/dynamic.h"
#include "client/kubeconfig.h"
#include "core/log.h"
#include "core/strings.h"
#include "machinery/object.h"
#include "reconcile/committer.h"
#include "reconcile/conditions.h"
#include "reconcile/events.h"

namespace klutch::providers {

using client::GroupVersionResource;
using client::ObjectPtr;
using machinery::Find;
using machinery::GetString;
using machinery::Json;
using reconcile::Request;
using reconcile::Result;

namespace {

const GroupVersionResource kObjects{"kubernetes.crossplane.io", "v1alpha1", "objects"};
const GroupVersionResource kProviderConfigs{"kubernetes.crossplane.io", "v1alpha1",
                                            "providerconfigs"};
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

std::string ManifestKey(const GroupVersionResource& gvr, const std::string& ns,
                        const std::string& name) {
  return gvr.group + "/" + gvr.resource + "|" + ns + "/" + name;
}

}  // namespace

class ObjectProvider::Impl {
 public:
  Impl(reconcile::Manager& manager, ObjectProviderOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        mapper_(manager.rest()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_) {}
  ~Impl() { Stop(); }

  core::Status Setup() {
    client::InformerOptions o{.clock = &clock_};
    objects_ = &manager_.Informer(kObjects, o);
    configs_ = &manager_.Informer(kProviderConfigs, o);
    reconciler_ = std::make_unique<reconcile::FuncReconciler>(
        [this](const Request& r) { return Reconcile(r); });
    controller_ = &manager_.AddController("klutch-manager-object", *reconciler_, options_.workers);
    controller_->For(*objects_);
    // A ProviderConfig appearing or changing revisits every Object using it.
    controller_->Watches(*configs_, [this](const Json& pc) {
      std::vector<Request> out;
      for (const auto& o : objects_->indexer().List()) {
        std::string name = GetString(*o, {"spec", "providerConfigRef", "name"});
        if ((name.empty() ? "default" : name) == machinery::Name(pc)) {
          out.push_back({"", machinery::Name(*o)});
        }
      }
      return out;
    });
    return core::Status::Ok();
  }

  void Stop() {
    std::map<std::string, std::unique_ptr<client::Informer>> watched;
    {
      core::MutexLock lock(mu_);
      if (stopped_) return;
      stopped_ = true;
      watched.swap(watched_);
    }
    for (auto& [k, i] : watched) i->Stop();
    events_.Stop();
  }

 private:
  // The client (and its discovery) for a ProviderConfig; empty with `error` set when
  // unusable. Shared, so that a rotated kubeconfig's old client lives on while in use.
  struct Target {
    std::shared_ptr<client::RestClient> client;
    std::shared_ptr<client::RestMapper> mapper;
  };
  Target ClientFor(const std::string& name, bool& local, std::string& error) {
    ObjectPtr pc = configs_->indexer().Get(name);
    if (!pc) {
      error = "ProviderConfig " + name +
              " not found: create it (credentials.source InjectedIdentity uses the manager's "
              "own cluster)";
      return {};
    }
    std::string source = GetString(*pc, {"spec", "credentials", "source"});
    if (source == "InjectedIdentity" || source.empty()) {
      local = true;
      // Non-owning: the manager's client and mapper outlive every reconcile.
      return {std::shared_ptr<client::RestClient>(std::shared_ptr<void>(), &manager_.rest()),
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
    auto secret =
        client::ResourceClient(manager_.rest(), client::resources::kSecrets, ns).Get(sname);
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
    core::MutexLock lock(mu_);
    auto it = remote_.find(*text);
    if (it != remote_.end()) return {it->second.client, it->second.mapper};
    auto parsed = client::ParseKubeconfig(*text, "Secret " + ns + "/" + sname, ".");
    core::Result<client::RestConfig> config =
        parsed.ok() ? client::ResolveKubeconfig(*parsed)
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
    Remote& stored = remote_.emplace(*text, std::move(remote)).first->second;
    return {stored.client, stored.mapper};
  }

  void Watch(const GroupVersionResource& gvr, const std::string& key, const std::string& object) {
    core::MutexLock lock(mu_);
    if (stopped_) return;
    owners_[key] = object;
    std::string gk = gvr.group + "/" + gvr.version + "/" + gvr.resource;
    if (watched_.count(gk)) return;
    client::InformerOptions o{.metadata_only = true, .clock = &clock_};
    auto informer = std::make_unique<client::Informer>(manager_.rest(), gvr, o);
    auto route = [this, gvr](const ObjectPtr& live) {
      std::string k = ManifestKey(gvr, machinery::Namespace(*live), machinery::Name(*live));
      core::MutexLock l(mu_);
      auto it = owners_.find(k);
      if (it != owners_.end()) controller_->queue().Add(it->second);
    };
    informer->AddEventHandler(
        {.on_add = route,
         .on_update = [route](const ObjectPtr&, const ObjectPtr& o) { route(o); },
         .on_delete = route});
    informer->Start();
    watched_.emplace(gk, std::move(informer));
  }

  core::Result<Result> Fail(const Json& object, std::string_view reason,
                            const std::string& message) {
    Json modified = object;
    bool changed = reconcile::SetCondition(
        modified,
        {.type = "Synced", .status = "False", .reason = "ReconcileError", .message = message},
        clock_);
    if (changed) {
      auto w = reconcile::Committer(client::ResourceClient(manager_.rest(), kObjects),
                                    std::string(kFieldManager))
                   .CommitStatus(object, modified);
      if (!w.ok()) return w.status();
      events_.Event(object, reconcile::kEventTypeWarning, reason, message);
    }
    return Result::RequeueAfter(options_.poll_interval);
  }

  core::Result<Result> Reconcile(const Request& r) {
    if (!configs_->HasSynced()) return Result::RequeueAfter(std::chrono::milliseconds(200));
    ObjectPtr ptr = objects_->indexer().Get(r.Key());
    if (!ptr) return Result::Done();
    const Json& object = *ptr;
    client::ResourceClient objects(manager_.rest(), kObjects);
    reconcile::Committer committer(objects, std::string(kFieldManager));
    const Json* manifest_ptr = Find(object, {"spec", "forProvider", "manifest"});
    if (!manifest_ptr || !manifest_ptr->is_object()) {
      return Fail(object, "InvalidManifest", "spec.forProvider.manifest must be an object");
    }
    Json manifest = *manifest_ptr;
    std::string api_version = GetString(manifest, {"apiVersion"});
    std::string kind = GetString(manifest, {"kind"});
    std::string name = GetString(manifest, {"metadata", "name"});
    if (api_version.empty() || kind.empty() || name.empty()) {
      return Fail(object, "InvalidManifest",
                  "spec.forProvider.manifest needs apiVersion, kind and metadata.name");
    }
    std::string pc = GetString(object, {"spec", "providerConfigRef", "name"});
    if (pc.empty()) pc = "default";
    bool local = false;
    std::string error;
    Target target = ClientFor(pc, local, error);
    if (!target.client) return Fail(object, "ProviderConfig", error);
    auto slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    std::string version = slash == std::string::npos ? api_version : api_version.substr(slash + 1);
    core::Result<client::ResourceMapping> mapping = target.mapper->ForKind(group, kind, version);
    if (!mapping.ok() && core::IsNotFound(mapping.status()) && machinery::IsBeingDeleted(object) &&
        machinery::HasFinalizer(object, kFinalizer)) {
      // The kind is no longer served there, so no such object can exist: let the Object go
      // instead of holding its XR's (and claim's) deletion forever.
      Json modified = object;
      machinery::RemoveFinalizer(modified, kFinalizer);
      auto w = committer.Commit(object, modified);
      if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
      events_.Event(object, reconcile::kEventTypeNormal, "ManifestKindGone",
                    kind + "." + api_version + " is no longer served: nothing to delete");
      return Result::Done();
    }
    if (!mapping.ok()) {
      return Fail(object, "UnknownKind",
                  "cannot manage " + kind + "." + api_version + ": " + mapping.status().message() +
                      " (install its CustomResourceDefinition)");
    }
    std::string ns = GetString(manifest, {"metadata", "namespace"});
    if (mapping->namespaced && ns.empty()) {
      ns = "default";
      manifest["metadata"]["namespace"] = ns;
    }
    if (!mapping->namespaced) {
      ns.clear();
      if (manifest["metadata"].is_object()) manifest["metadata"].erase("namespace");
    }
    client::ResourceClient live_client(*target.client, mapping->gvr, ns);
    if (local) Watch(mapping->gvr, ManifestKey(mapping->gvr, ns, name), r.name);
    Policies policies = PoliciesOf(object);

    if (machinery::IsBeingDeleted(object)) {
      if (!machinery::HasFinalizer(object, kFinalizer)) return Result::Done();
      bool orphan = GetString(object, {"spec", "deletionPolicy"}) == "Orphan";
      if (policies.del && !orphan) {
        auto live = live_client.Get(name);
        if (live.ok()) {
          if (!machinery::IsBeingDeleted(*live)) {
            auto d = live_client.Delete(name);
            if (!d.ok() && !core::IsNotFound(d.status())) return d.status();
          }
          Json modified = object;
          reconcile::SetCondition(
              modified, {.type = "Ready", .status = "False", .reason = "Deleting"}, clock_);
          auto w = committer.CommitStatus(object, modified);
          if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
          return Result::RequeueAfter(local ? options_.poll_interval
                                            : std::chrono::milliseconds(1000));
        }
        if (!core::IsNotFound(live.status())) return live.status();
      }
      Json modified = object;
      machinery::RemoveFinalizer(modified, kFinalizer);
      auto w = committer.Commit(object, modified);
      if (!w.ok() && !core::IsNotFound(w.status())) return w.status();
      return Result::Done();
    }

    Json current = object;
    if (!machinery::HasFinalizer(object, kFinalizer) && policies.del) {
      Json modified = object;
      machinery::AddFinalizer(modified, kFinalizer);
      auto w = committer.Commit(object, modified);
      if (!w.ok()) return w.status();
      current = *w;
    }

    auto live = live_client.Get(name);
    if (!live.ok() && !core::IsNotFound(live.status())) return live.status();
    bool exists = live.ok();
    Json observed = exists ? *live : Json();
    machinery::SetAnnotation(manifest, kManifestHashAnnotation, machinery::JsonHash(manifest));
    bool want_write = exists ? policies.update && !machinery::Covers(observed, manifest,
                                                                     machinery::ListCover::kInOrder)
                             : policies.create;
    if (want_write) {
      auto applied =
          live_client.Patch(name, client::PatchType::kApply, machinery::Dump(manifest),
                            {.field_manager = std::string(kFieldManager), .force = true});
      if (!applied.ok()) {
        return Fail(current, "ApplyManifest",
                    "cannot apply " + kind + " " + (ns.empty() ? name : ns + "/" + name) + ": " +
                        applied.status().message());
      }
      observed = *std::move(applied);
      exists = true;
    }
    Json modified = current;
    if (exists) {
      if (observed.is_object()) {
        Json& meta = machinery::MutableMetadata(observed);
        meta.erase("managedFields");
      }
      modified["status"]["atProvider"]["manifest"] = observed;
    }
    reconcile::SetCondition(
        modified, {.type = "Synced", .status = "True", .reason = "ReconcileSuccess"}, clock_);
    std::string policy = GetString(current, {"spec", "readiness", "policy"});
    bool ready = exists;
    if (exists && policy == "DeriveFromObject") {
      ready = reconcile::IsConditionTrue(observed, "Ready");
    } else if (exists && policy == "AllTrue") {
      const Json* conditions = Find(observed, {"status", "conditions"});
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
           .reason = exists ? "Unavailable" : "Creating",
           .message = exists ? "the object is not ready yet (readiness policy " +
                                   (policy.empty() ? std::string("SuccessfulCreate") : policy) + ")"
                             : "the object does not exist and management policies do not "
                               "allow creating it"},
          clock_);
    }
    auto w = committer.CommitStatus(current, modified);
    if (!w.ok()) return w.status();
    return Result::RequeueAfter(options_.poll_interval);
  }

  reconcile::Manager& manager_;
  ObjectProviderOptions options_;
  const core::Clock& clock_;
  client::RestMapper mapper_;
  reconcile::EventRecorder events_;
  client::Informer* objects_ = nullptr;
  client::Informer* configs_ = nullptr;
  std::unique_ptr<reconcile::FuncReconciler> reconciler_;
  reconcile::Controller* controller_ = nullptr;
  core::Mutex mu_;
  struct Remote {
    std::string provider_config;
    std::shared_ptr<client::RestClient> client;
    std::shared_ptr<client::RestMapper> mapper;
  };
  std::map<std::string, Remote> remote_ GUARDED_BY(mu_);  // by kubeconfig text
  std::map<std::string, std::unique_ptr<client::Informer>> watched_ GUARDED_BY(mu_);
  std::map<std::string, std::string> owners_ GUARDED_BY(mu_);  // manifest key -> Object
  bool stopped_ GUARDED_BY(mu_) = false;
};

ObjectProvider::ObjectProvider(reconcile::Manager& manager, ObjectProviderOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}
ObjectProvider::~ObjectProvider() = default;
core::Status ObjectProvider::Setup() { return impl_->Setup(); }
void ObjectProvider::Stop() { impl_->Stop(); }

}  // namespace klutch::providers
