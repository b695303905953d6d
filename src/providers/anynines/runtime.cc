#include "providers/anynines/runtime.h"

#include <functional>
#include <string>
#include <utility>

#include "client/dynamic.h"
#include "machinery/object.h"

namespace klutch::providers::anynines {

using client::GroupVersionResource;
using client::Informer;
using client::ObjectPtr;
using machinery::GetString;
using reconcile::Request;

namespace {

// Whether two states of an object differ in more than status and server bookkeeping: the
// provider's own status writes then queue nothing.
bool ChangedBeyondStatus(const Json& a, const Json& b) {
  auto strip = [](const Json& o) {
    Json c = o;
    if (c.is_object()) {
      c.erase("status");
      if (c.contains("metadata") && c["metadata"].is_object()) {
        c["metadata"].erase("resourceVersion");
        c["metadata"].erase("managedFields");
      }
    }
    return c;
  };
  return strip(a) != strip(b);
}

using KeysFunc = std::function<std::vector<std::string>(const Json&)>;

// Queues keys(object) on add, delete and resync, and on updates that change more than status.
void WatchChanges(Informer& informer, reconcile::Controller& controller, KeysFunc keys) {
  auto add = [&controller, keys](const ObjectPtr& o) {
    for (const std::string& k : keys(*o)) controller.queue().Add(k);
  };
  informer.AddEventHandler({.on_add = add,
                            .on_update =
                                [add](const ObjectPtr& old_obj, const ObjectPtr& new_obj) {
                                  if (old_obj == new_obj ||
                                      ChangedBeyondStatus(*old_obj, *new_obj)) {
                                    add(new_obj);
                                  }
                                },
                            .on_delete = add});
}

std::vector<std::string> Names(const std::vector<ObjectPtr>& objects) {
  std::vector<std::string> out;
  for (const auto& o : objects) out.push_back(machinery::Name(*o));
  return out;
}

std::vector<std::string> ClaimIndex(const Json& o) {
  std::string k = ClaimKey(o);
  return k.empty() ? std::vector<std::string>{} : std::vector<std::string>{k};
}

}  // namespace

Runtime::Runtime(reconcile::Manager& manager, const AnyninesProviderOptions& options,
                 const core::Clock& clock, reconcile::EventRecorder& events)
    : manager_(manager),
      options_(options),
      connections_(
          CredentialSources{.get_secret =
                                [&manager](const std::string& ns, const std::string& name) {
                                  return client::ResourceClient(manager.rest(),
                                                                client::resources::kSecrets, ns)
                                      .Get(name);
                                },
                            .getenv = options.getenv,
                            .read_file = nullptr},
          options, clock),
      ctx_{.rest = manager.rest(),
           .clock = clock,
           .events = events,
           .options = options,
           .connections = connections_} {}

core::Status Runtime::Start() {
  CreateInformers();
  AddIndexes();
  CreateControllers();
  WatchOwnKinds();
  WatchRelatedKinds();
  WatchProviderConfigs();
  return StartAll();
}

void Runtime::Stop() {
  for (auto& c : controllers_) c->Stop();
  for (auto& i : informers_) i->Stop();
}

void Runtime::CreateInformers() {
  auto informer = [&](const GroupVersionResource& gvr, client::InformerOptions o = {}) {
    o.clock = &ctx_.clock;
    informers_.push_back(std::make_unique<Informer>(manager_.rest(), gvr, std::move(o)));
    return informers_.back().get();
  };
  ctx_.instances = informer(kServiceInstances);
  ctx_.bindings = informer(kServiceBindings);
  ctx_.backups = informer(kBackups);
  ctx_.restores = informer(kRestores);
  ctx_.configs = informer(kProviderConfigs);
  ctx_.usages = informer(kProviderConfigUsages);
  ctx_.secrets =
      informer(client::resources::kSecrets,
               {.field_selector = "type=" + std::string(kConnectionSecretType), .compact = true});
}

void Runtime::AddIndexes() {
  auto ref_index = [](const char* field) {
    return [field](const Json& o) {
      std::string name = GetString(o, {"spec", "forProvider", field});
      if (name.empty()) return std::vector<std::string>{};
      return std::vector<std::string>{GetString(o, {"metadata", "labels", kLabelClaimNamespace}) +
                                      "/" + name};
    };
  };
  auto pc_index = [](const Json& o) { return std::vector<std::string>{ProviderConfigName(o)}; };
  for (Informer* i : {ctx_.instances, ctx_.bindings, ctx_.backups, ctx_.restores}) {
    (void)i->indexer().AddIndex(kByProviderConfig, pc_index);
  }
  (void)ctx_.instances->indexer().AddIndex(kByClaim, ClaimIndex);
  (void)ctx_.backups->indexer().AddIndex(kByClaim, ClaimIndex);
  (void)ctx_.bindings->indexer().AddIndex(kByInstanceRef, ref_index("instanceName"));
  (void)ctx_.backups->indexer().AddIndex(kByInstanceRef, ref_index("instanceName"));
  (void)ctx_.restores->indexer().AddIndex(kByBackupRef, ref_index("backupName"));
  (void)ctx_.usages->indexer().AddIndex(kByProviderConfig, [](const Json& o) {
    std::string pc = GetString(o, {"metadata", "labels", kLabelProviderConfig});
    return pc.empty() ? std::vector<std::string>{} : std::vector<std::string>{pc};
  });
}

void Runtime::CreateControllers() {
  instance_reconciler_ = std::make_unique<ServiceInstanceReconciler>(ctx_);
  binding_reconciler_ = std::make_unique<ServiceBindingReconciler>(ctx_);
  backup_reconciler_ = std::make_unique<BackupReconciler>(ctx_);
  restore_reconciler_ = std::make_unique<RestoreReconciler>(ctx_);
  config_reconciler_ = std::make_unique<ProviderConfigReconciler>(ctx_);

  auto controller = [&](const std::string& name, reconcile::Reconciler& r) {
    controllers_.push_back(std::make_unique<reconcile::Controller>(
        name, r,
        reconcile::ControllerOptions{
            .workers = options_.workers, .metrics = &manager_.metrics(), .clock = &ctx_.clock}));
    return controllers_.back().get();
  };
  instances_ = controller("klutch-manager-anynines-serviceinstance", *instance_reconciler_);
  bindings_ = controller("klutch-manager-anynines-servicebinding", *binding_reconciler_);
  backups_ = controller("klutch-manager-anynines-backup", *backup_reconciler_);
  restores_ = controller("klutch-manager-anynines-restore", *restore_reconciler_);
  configs_ = controller("klutch-manager-anynines-providerconfig", *config_reconciler_);
}

// Each managed kind queues itself; a changed ProviderConfig (spec, rotation annotations)
// revisits the resources using it.
void Runtime::WatchOwnKinds() {
  auto self = [](const Json& o) { return std::vector<std::string>{machinery::Name(o)}; };
  WatchChanges(*ctx_.instances, *instances_, self);
  WatchChanges(*ctx_.bindings, *bindings_, self);
  WatchChanges(*ctx_.backups, *backups_, self);
  WatchChanges(*ctx_.restores, *restores_, self);
  for (auto [informer, c] :
       {std::pair{ctx_.instances, instances_}, std::pair{ctx_.bindings, bindings_},
        std::pair{ctx_.backups, backups_}, std::pair{ctx_.restores, restores_}}) {
    Informer* users = informer;
    WatchChanges(*ctx_.configs, *c, [users](const Json& pc) {
      return Names(users->indexer().ByIndex(kByProviderConfig, machinery::Name(pc)));
    });
  }
}

// The resources one kind waits for: instances for bindings and backups, bindings for a
// deleted instance, backups for restores; and the binding Secrets.
void Runtime::WatchRelatedKinds() {
  // Any change of an instance MR (its status too) may unblock bindings and backups.
  bindings_->Watches(*ctx_.instances, [this](const Json& inst) {
    std::vector<Request> out;
    for (const auto& b : ctx_.bindings->indexer().ByIndex(kByInstanceRef, ClaimKey(inst))) {
      out.push_back({"", machinery::Name(*b)});
    }
    return out;
  });
  // A binding going away may let the deletion of its instance go on.
  instances_->Watches(*ctx_.bindings, [this](const Json& binding) {
    std::string instance = GetString(binding, {"spec", "forProvider", "instanceName"});
    std::string ns = GetString(binding, {"metadata", "labels", kLabelClaimNamespace});
    std::vector<Request> out;
    if (instance.empty() || ns.empty()) return out;
    for (const auto& i : ctx_.instances->indexer().ByIndex(kByClaim, ns + "/" + instance)) {
      out.push_back({"", machinery::Name(*i)});
    }
    return out;
  });
  backups_->Watches(*ctx_.instances, [this](const Json& inst) {
    std::vector<Request> out;
    for (const auto& b : ctx_.backups->indexer().ByIndex(kByInstanceRef, ClaimKey(inst))) {
      out.push_back({"", machinery::Name(*b)});
    }
    return out;
  });
  restores_->Watches(*ctx_.backups, [this](const Json& backup) {
    std::vector<Request> out;
    for (const auto& r : ctx_.restores->indexer().ByIndex(kByBackupRef, ClaimKey(backup))) {
      out.push_back({"", machinery::Name(*r)});
    }
    return out;
  });
  bindings_->Owns(*ctx_.secrets, std::string(kGroup), "ServiceBinding",
                  /*owner_namespaced=*/false);
}

// The ProviderConfig controller: its own objects, their usages, and early health checks
// resources ask for.
void Runtime::WatchProviderConfigs() {
  configs_->For(*ctx_.configs);
  configs_->Watches(*ctx_.usages, [](const Json& usage) {
    std::string pc = GetString(usage, {"metadata", "labels", kLabelProviderConfig});
    return pc.empty() ? std::vector<Request>{} : std::vector<Request>{{"", pc}};
  });
  ctx_.request_health_check = [this](const std::string& name) {
    config_reconciler_->RequestCheck(name);
    configs_->queue().Add(name);
  };
}

core::Status Runtime::StartAll() {
  for (auto& i : informers_) i->Start();
  for (auto& i : informers_) {
    if (!i->WaitForSync(std::chrono::seconds(60))) {
      return core::Status(core::Reason::kTimeout, "provider-anynines: the cache of " +
                                                      i->gvr().GroupResource() + " did not sync");
    }
  }
  for (auto& c : controllers_) c->Start();
  return core::Status::Ok();
}

}  // namespace klutch::providers::anynines
