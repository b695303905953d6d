#include "providers/anynines_provider.h"

#include <array>
#include <map>

#include "client/dynamic.h"
#include "core/log.h"
#include "machinery/object.h"
#include "providers/anynines/connections.h"
#include "providers/anynines/context.h"
#include "providers/anynines/controllers.h"
#include "providers/anynines/provider_config_reconciler.h"
#include "reconcile/conditions.h"
#include "reconcile/events.h"

namespace klutch::providers {

using anynines::Context;
using client::GroupVersionResource;
using client::Informer;
using client::ObjectPtr;
using machinery::GetString;
using machinery::Json;
using reconcile::Request;
using reconcile::Result;

namespace {

constexpr std::array<std::string_view, 6> kRequiredCrds = {
    "serviceinstances.dataservices.anynines.com", "servicebindings.dataservices.anynines.com",
    "backups.dataservices.anynines.com",          "restores.dataservices.anynines.com",
    "providerconfigs.dataservices.anynines.com",  "providerconfigusages.dataservices.anynines.com"};

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
  std::string k = anynines::ClaimKey(o);
  return k.empty() ? std::vector<std::string>{} : std::vector<std::string>{k};
}

}  // namespace

// The controllers and informers of the managed resources, started once their CRDs exist.
class AnyninesRuntime {
 public:
  AnyninesRuntime(reconcile::Manager& manager, const AnyninesProviderOptions& options,
                  const core::Clock& clock, reconcile::EventRecorder& events)
      : manager_(manager),
        options_(options),
        connections_(
            anynines::CredentialSources{
                .get_secret =
                    [&manager](const std::string& ns, const std::string& name) {
                      return client::ResourceClient(manager.rest(), client::resources::kSecrets, ns)
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

  ~AnyninesRuntime() { Stop(); }

  // Informers, indexes, reconcilers and controllers, their watches, then the informers'
  // sync and the controllers' start.
  core::Status Start() {
    CreateInformers();
    AddIndexes();
    CreateControllers();
    WatchOwnKinds();
    WatchRelatedKinds();
    WatchProviderConfigs();
    return StartAll();
  }

  void Stop() {
    for (auto& c : controllers_) c->Stop();
    for (auto& i : informers_) i->Stop();
  }

 private:
  void CreateInformers() {
    auto informer = [&](const GroupVersionResource& gvr, client::InformerOptions o = {}) {
      o.clock = &ctx_.clock;
      informers_.push_back(std::make_unique<Informer>(manager_.rest(), gvr, std::move(o)));
      return informers_.back().get();
    };
    ctx_.instances = informer(anynines::kServiceInstances);
    ctx_.bindings = informer(anynines::kServiceBindings);
    ctx_.backups = informer(anynines::kBackups);
    ctx_.restores = informer(anynines::kRestores);
    ctx_.configs = informer(anynines::kProviderConfigs);
    ctx_.usages = informer(anynines::kProviderConfigUsages);
    ctx_.secrets =
        informer(client::resources::kSecrets,
                 {.field_selector = "type=" + std::string(anynines::kConnectionSecretType),
                  .compact = true});
  }

  void AddIndexes() {
    auto ref_index = [](const char* field) {
      return [field](const Json& o) {
        std::string name = GetString(o, {"spec", "forProvider", field});
        if (name.empty()) return std::vector<std::string>{};
        return std::vector<std::string>{
            GetString(o, {"metadata", "labels", anynines::kLabelClaimNamespace}) + "/" + name};
      };
    };
    auto pc_index = [](const Json& o) {
      return std::vector<std::string>{anynines::ProviderConfigName(o)};
    };
    for (Informer* i : {ctx_.instances, ctx_.bindings, ctx_.backups, ctx_.restores}) {
      (void)i->indexer().AddIndex(anynines::kByProviderConfig, pc_index);
    }
    (void)ctx_.instances->indexer().AddIndex(anynines::kByClaim, ClaimIndex);
    (void)ctx_.backups->indexer().AddIndex(anynines::kByClaim, ClaimIndex);
    (void)ctx_.bindings->indexer().AddIndex(anynines::kByInstanceRef, ref_index("instanceName"));
    (void)ctx_.backups->indexer().AddIndex(anynines::kByInstanceRef, ref_index("instanceName"));
    (void)ctx_.restores->indexer().AddIndex(anynines::kByBackupRef, ref_index("backupName"));
    (void)ctx_.usages->indexer().AddIndex(anynines::kByProviderConfig, [](const Json& o) {
      std::string pc = GetString(o, {"metadata", "labels", anynines::kLabelProviderConfig});
      return pc.empty() ? std::vector<std::string>{} : std::vector<std::string>{pc};
    });
  }

  void CreateControllers() {
    instance_reconciler_ = std::make_unique<anynines::ServiceInstanceReconciler>(ctx_);
    binding_reconciler_ = std::make_unique<anynines::ServiceBindingReconciler>(ctx_);
    backup_reconciler_ = std::make_unique<anynines::BackupReconciler>(ctx_);
    restore_reconciler_ = std::make_unique<anynines::RestoreReconciler>(ctx_);
    config_logic_ = std::make_unique<anynines::ProviderConfigReconciler>(ctx_);
    config_reconciler_ = std::make_unique<reconcile::FuncReconciler>(
        [this](const Request& r) { return config_logic_->Reconcile(r); });

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
  void WatchOwnKinds() {
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
        return Names(users->indexer().ByIndex(anynines::kByProviderConfig, machinery::Name(pc)));
      });
    }
  }

  // The resources one kind waits for: instances for bindings and backups, bindings for a
  // deleted instance, backups for restores; and the binding Secrets.
  void WatchRelatedKinds() {
    // Any change of an instance MR (its status too) may unblock bindings and backups.
    bindings_->Watches(*ctx_.instances, [this](const Json& inst) {
      std::vector<Request> out;
      for (const auto& b :
           ctx_.bindings->indexer().ByIndex(anynines::kByInstanceRef, anynines::ClaimKey(inst))) {
        out.push_back({"", machinery::Name(*b)});
      }
      return out;
    });
    // A binding going away may let the deletion of its instance go on.
    instances_->Watches(*ctx_.bindings, [this](const Json& binding) {
      std::string instance = GetString(binding, {"spec", "forProvider", "instanceName"});
      std::string ns = GetString(binding, {"metadata", "labels", anynines::kLabelClaimNamespace});
      std::vector<Request> out;
      if (instance.empty() || ns.empty()) return out;
      for (const auto& i :
           ctx_.instances->indexer().ByIndex(anynines::kByClaim, ns + "/" + instance)) {
        out.push_back({"", machinery::Name(*i)});
      }
      return out;
    });
    backups_->Watches(*ctx_.instances, [this](const Json& inst) {
      std::vector<Request> out;
      for (const auto& b :
           ctx_.backups->indexer().ByIndex(anynines::kByInstanceRef, anynines::ClaimKey(inst))) {
        out.push_back({"", machinery::Name(*b)});
      }
      return out;
    });
    restores_->Watches(*ctx_.backups, [this](const Json& backup) {
      std::vector<Request> out;
      for (const auto& r :
           ctx_.restores->indexer().ByIndex(anynines::kByBackupRef, anynines::ClaimKey(backup))) {
        out.push_back({"", machinery::Name(*r)});
      }
      return out;
    });
    bindings_->Owns(*ctx_.secrets, std::string(anynines::kGroup), "ServiceBinding",
                    /*owner_namespaced=*/false);
  }

  // The ProviderConfig controller: its own objects, their usages, and early health checks
  // resources ask for.
  void WatchProviderConfigs() {
    configs_->For(*ctx_.configs);
    configs_->Watches(*ctx_.usages, [](const Json& usage) {
      std::string pc = GetString(usage, {"metadata", "labels", anynines::kLabelProviderConfig});
      return pc.empty() ? std::vector<Request>{} : std::vector<Request>{{"", pc}};
    });
    ctx_.request_health_check = [this](const std::string& name) {
      config_logic_->RequestCheck(name);
      configs_->queue().Add(name);
    };
  }

  core::Status StartAll() {
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

  reconcile::Manager& manager_;
  const AnyninesProviderOptions& options_;
  anynines::Connections connections_;
  Context ctx_;
  std::vector<std::unique_ptr<Informer>> informers_;
  std::unique_ptr<anynines::ServiceInstanceReconciler> instance_reconciler_;
  std::unique_ptr<anynines::ServiceBindingReconciler> binding_reconciler_;
  std::unique_ptr<anynines::BackupReconciler> backup_reconciler_;
  std::unique_ptr<anynines::RestoreReconciler> restore_reconciler_;
  std::unique_ptr<anynines::ProviderConfigReconciler> config_logic_;
  std::unique_ptr<reconcile::FuncReconciler> config_reconciler_;
  std::vector<std::unique_ptr<reconcile::Controller>> controllers_;
  reconcile::Controller* instances_ = nullptr;
  reconcile::Controller* bindings_ = nullptr;
  reconcile::Controller* backups_ = nullptr;
  reconcile::Controller* restores_ = nullptr;
  reconcile::Controller* configs_ = nullptr;
};

class AnyninesProvider::Impl {
 public:
  Impl(reconcile::Manager& manager, AnyninesProviderOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_) {}
  ~Impl() { Stop(); }

  core::Status Setup() {
    crds_ = &manager_.Informer(client::resources::kCustomResourceDefinitions,
                               client::InformerOptions{.clock = &clock_});
    reconciler_ = std::make_unique<reconcile::FuncReconciler>(
        [this](const Request& r) { return ReconcileApis(r); });
    controller_ = &manager_.AddController("klutch-manager-anynines-apis", *reconciler_, 1);
    // Every CRD event of the group maps to one key: the provider's APIs as a whole.
    controller_->Watches(*crds_, [](const Json& crd) {
      std::string name = machinery::Name(crd);
      if (!name.ends_with(".dataservices.anynines.com")) return std::vector<Request>{};
      return std::vector<Request>{{"", "dataservices.anynines.com"}};
    });
    return core::Status::Ok();
  }

  void Stop() {
    std::unique_ptr<AnyninesRuntime> runtime;
    {
      core::MutexLock lock(mu_);
      stopped_ = true;
      runtime.swap(runtime_);
    }
    if (runtime) runtime->Stop();
    events_.Stop();
  }

  bool running() const {
    core::MutexLock lock(mu_);
    return runtime_ != nullptr;
  }

 private:
  core::Result<Result> ReconcileApis(const Request&) {
    bool ready = true;
    for (std::string_view name : kRequiredCrds) {
      ObjectPtr crd = crds_->indexer().Get(std::string(name));
      if (!crd || machinery::IsBeingDeleted(*crd) ||
          !reconcile::IsConditionTrue(*crd, "Established")) {
        ready = false;
      }
    }
    std::unique_ptr<AnyninesRuntime> old;
    {
      core::MutexLock lock(mu_);
      if (stopped_) return Result::Done();
      if (ready == (runtime_ != nullptr)) return Result::Done();
      if (!ready) old.swap(runtime_);
    }
    if (old) {
      KLUTCH_LOG(kInfo, "provider-anynines", "a dataservices.anynines.com CRD went away: stopping");
      old->Stop();
      return Result::Done();
    }
    auto runtime = std::make_unique<AnyninesRuntime>(manager_, options_, clock_, events_);
    if (auto s = runtime->Start(); !s.ok()) {
      runtime->Stop();
      return s;
    }
    KLUTCH_LOG(kInfo, "provider-anynines",
               "dataservices.anynines.com APIs found: controllers started");
    core::MutexLock lock(mu_);
    if (stopped_) {
      runtime->Stop();
      return Result::Done();
    }
    runtime_ = std::move(runtime);
    return Result::Done();
  }

  reconcile::Manager& manager_;
  const AnyninesProviderOptions options_;
  const core::Clock& clock_;
  reconcile::EventRecorder events_;
  Informer* crds_ = nullptr;
  std::unique_ptr<reconcile::FuncReconciler> reconciler_;
  reconcile::Controller* controller_ = nullptr;
  mutable core::Mutex mu_;
  std::unique_ptr<AnyninesRuntime> runtime_ GUARDED_BY(mu_);
  bool stopped_ GUARDED_BY(mu_) = false;
};

AnyninesProvider::AnyninesProvider(reconcile::Manager& manager, AnyninesProviderOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}
AnyninesProvider::~AnyninesProvider() = default;
core::Status AnyninesProvider::Setup() { return impl_->Setup(); }
void AnyninesProvider::Stop() { impl_->Stop(); }
bool AnyninesProvider::running() const { return impl_->running(); }

}  // namespace klutch::providers
