#include "providers/object_provider.h"

#include <map>

#include "client/informer.h"
#include "machinery/object.h"
#include "providers/object_reconciler.h"
#include "reconcile/events.h"

namespace klutch::providers {

using client::GroupVersionResource;
using client::ObjectPtr;
using machinery::GetString;
using machinery::Json;
using reconcile::Request;

namespace {

std::string ManifestKey(const GroupVersionResource& gvr, const std::string& ns,
                        const std::string& name) {
  return gvr.group + "/" + gvr.resource + "|" + ns + "/" + name;
}

}  // namespace

// The wiring: the informers, the controller and its watches (a changed ProviderConfig, the
// local manifests' kinds); the logic is ObjectReconciler's.
class ObjectProvider::Impl {
 public:
  Impl(reconcile::Manager& manager, ObjectProviderOptions options)
      : manager_(manager),
        options_(std::move(options)),
        clock_(options_.clock ? *options_.clock : core::RealClock::Get()),
        events_(manager.rest(), {options_.component, options_.instance}, &clock_) {}
  ~Impl() { Stop(); }

  core::Status Setup() {
    client::InformerOptions o{.clock = &clock_};
    objects_ = &manager_.Informer(kKubernetesObjects, o);
    configs_ = &manager_.Informer(kKubernetesProviderConfigs, o);
    reconciler_ = std::make_unique<ObjectReconciler>(
        manager_.rest(), *objects_, *configs_, clock_, events_, options_.poll_interval,
        [this](const GroupVersionResource& gvr, const std::string& ns, const std::string& name,
               const std::string& object) { Watch(gvr, ManifestKey(gvr, ns, name), object); });
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
  // Queues `object` whenever the local object `key` (ManifestKey) changes: one metadata-only
  // informer per kind, started on first use.
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

  reconcile::Manager& manager_;
  ObjectProviderOptions options_;
  const core::Clock& clock_;
  reconcile::EventRecorder events_;
  client::Informer* objects_ = nullptr;
  client::Informer* configs_ = nullptr;
  std::unique_ptr<ObjectReconciler> reconciler_;
  reconcile::Controller* controller_ = nullptr;
  core::Mutex mu_;
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
