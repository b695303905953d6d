#include "controllers/builtin_controllers.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "apiserver/crd.h"
#include "client/kubeconfig.h"
#include "controllers/crd_reconciler.h"
#include "controllers/namespace_reconciler.h"
#include "controllers/store_controller.h"
#include "core/clock.h"
#include "core/log.h"
#include "reconcile/manager.h"

namespace klutch::controllers {

using apiserver::ResourceInfo;
using apiserver::ResourcePtr;
using machinery::Find;
using machinery::GetString;

namespace {

apiserver::WriteOptions As(const std::string& manager) {
  apiserver::WriteOptions o;
  o.field_manager = manager;
  return o;
}

// ---------------------------------------------------------------------------------------
// Garbage collection by ownerReferences. Keeps a graph of owner uid -> dependent keys and
// uid -> key of every object, fed by a watch on all of /registry/.
class GarbageCollector final : public StoreController, public BuiltinControllers {
 public:
  explicit GarbageCollector(apiserver::RestStorage& s)
      : StoreController("klutch-apiserver-gc", s, {"/registry/"}) {}
  void Stop() override { StoreController::Stop(); }

 protected:
  void Observe(const storage::KeyValue& kv) override {
    auto obj = machinery::ParseJson(*kv.value);
    if (!obj.ok()) return;
    for (const auto& key : Track(kv.key, &*obj, nullptr)) Enqueue(key);
  }

  std::vector<std::string> Map(const storage::Event& e) override {
    auto obj = machinery::ParseJson(*e.value);
    if (!obj.ok()) return {};
    if (e.type == storage::Event::Type::kDelete) return Track(e.key, nullptr, &*obj);
    return Track(e.key, &*obj, nullptr);
  }

  core::Status Reconcile(const std::string& key) override {
    auto k = ParseKey(storage_.registry(), key);
    if (!k) return core::Status::Ok();
    auto r = storage_.registry().FindStored(k->group, k->plural);
    if (!r) return core::Status::Ok();
    auto got = storage_.Get(*r, k->ns, k->name);
    if (!got.ok()) {
      if (!core::IsNotFound(got.status())) return got.status();
      return core::Status::Ok();
    }
    const Json& obj = *got;
    KLUTCH_RETURN_IF_ERROR(ProcessAsOwner(*r, obj, key));
    return ProcessAsDependent(*r, obj);
  }

 private:
  // Updates the graph; returns keys to look at (dependents of a vanished owner, the object
  // itself when it is an owner being deleted or a dependent).
  std::vector<std::string> Track(const std::string& key, const Json* now, const Json* gone) {
    std::vector<std::string> out;
    std::lock_guard<std::mutex> lock(mu_);
    if (gone) {
      std::string uid = machinery::Uid(*gone);
      uid_to_key_.erase(uid);
      RemoveDependent(key);
      auto it = dependents_.find(uid);
      if (it != dependents_.end()) out.insert(out.end(), it->second.begin(), it->second.end());
      return out;
    }
    std::string uid = machinery::Uid(*now);
    uid_to_key_[uid] = key;
    RemoveDependent(key);
    std::set<std::string> owners;
    if (const Json* refs = Find(*now, {"metadata", "ownerReferences"}); refs && refs->is_array()) {
      for (const auto& ref : *refs) {
        std::string owner = GetString(ref, {"uid"});
        if (owner.empty()) continue;
        owners.insert(owner);
        dependents_[owner].insert(key);
      }
    }
    if (!owners.empty()) {
      owners_of_[key] = owners;
      out.push_back(key);
    }
    if (machinery::IsBeingDeleted(*now) && (machinery::HasFinalizer(*now, "foregroundDeletion") ||
                                            machinery::HasFinalizer(*now, "orphan"))) {
      out.push_back(key);
    }
    return out;
  }

  void RemoveDependent(const std::string& key) {
    auto it = owners_of_.find(key);
    if (it == owners_of_.end()) return;
    for (const auto& owner : it->second) {
      auto d = dependents_.find(owner);
      if (d == dependents_.end()) continue;
      d->second.erase(key);
      if (d->second.empty()) dependents_.erase(d);
    }
    owners_of_.erase(it);
  }

  std::vector<std::string> DependentsOf(const std::string& uid) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = dependents_.find(uid);
    if (it == dependents_.end()) return {};
    return {it->second.begin(), it->second.end()};
  }

  enum class Owner { kExists, kAbsent, kUnknown };

  // Whether an owner reference points at an object that exists with that uid. kUnknown when
  // the answer cannot be had now (storage error): the caller must not act on it.
  Owner OwnerState(const Json& ref, const std::string& ns) {
    const std::string uid = GetString(ref, {"uid"});
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (uid_to_key_.count(uid)) return Owner::kExists;
    }
    auto gv = machinery::ParseApiVersion(GetString(ref, {"apiVersion"}));
    // Any served version of the kind will do: the object is the same.
    auto r = storage_.registry().FindGroupKind(gv.group, GetString(ref, {"kind"}));
    if (!r) return Owner::kAbsent;  // a kind nobody serves cannot have live objects here
    auto owner = storage_.Get(*r, r->namespaced ? ns : "", GetString(ref, {"name"}));
    if (!owner.ok()) return core::IsNotFound(owner.status()) ? Owner::kAbsent : Owner::kUnknown;
    return machinery::Uid(*owner) == uid ? Owner::kExists : Owner::kAbsent;
  }

  core::Status ProcessAsOwner(const ResourceInfo& r, const Json& obj, const std::string& key) {
    if (!machinery::IsBeingDeleted(obj)) return core::Status::Ok();
    const std::string uid = machinery::Uid(obj);
    const bool orphan = machinery::HasFinalizer(obj, "orphan");
    const bool foreground = machinery::HasFinalizer(obj, "foregroundDeletion");
    if (!orphan && !foreground) return core::Status::Ok();
    auto deps = DependentsOf(uid);
    for (const auto& dep_key : deps) {
      auto k = ParseKey(storage_.registry(), dep_key);
      if (!k) continue;
      auto dr = storage_.registry().FindStored(k->group, k->plural);
      if (!dr) continue;
      bool other_live_owner = false;
      if (!orphan) {
        auto dep = storage_.Get(*dr, k->ns, k->name);
        if (!dep.ok()) {
          if (core::IsNotFound(dep.status())) continue;
          return dep.status();
        }
        if (const Json* refs = Find(*dep, {"metadata", "ownerReferences"});
            refs && refs->is_array()) {
          for (const auto& ref : *refs) {
            if (GetString(ref, {"uid"}) == uid) continue;
            Owner state = OwnerState(ref, k->ns);
            if (state == Owner::kUnknown) return core::Unavailable("owner lookup failed");
            if (state == Owner::kExists) other_live_owner = true;
          }
        }
      }
      if (orphan || other_live_owner) {
        // Orphaning, or a dependent that other owners still hold: only the reference goes.
        auto res = storage_.Mutate(
            *dr, k->ns, k->name, [&](Json& d) { return DropOwner(d, uid); }, As(name()));
        if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
      } else {
        auto res = storage_.Delete(*dr, k->ns, k->name, {.propagation_policy = "Foreground"});
        if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
      }
    }
    if (foreground && !DependentsOf(uid).empty()) {
      Enqueue(key, std::chrono::milliseconds(100));
      return core::Status::Ok();
    }
    const char* finalizer = orphan ? "orphan" : "foregroundDeletion";
    auto res = storage_.Mutate(
        r, machinery::Namespace(obj), machinery::Name(obj),
        [&](Json& o) {
          Json kept = Json::array();
          for (const auto& f : o["metadata"].value("finalizers", Json::array())) {
            if (f != finalizer) kept.push_back(f);
          }
          o["metadata"]["finalizers"] = std::move(kept);
          return core::Status::Ok();
        },
        As(name()));
    if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
    return core::Status::Ok();
  }

  static core::Status DropOwner(Json& d, const std::string& uid) {
    Json& refs = d["metadata"]["ownerReferences"];
    Json kept = Json::array();
    for (const auto& ref : refs) {
      if (GetString(ref, {"uid"}) != uid) kept.push_back(ref);
    }
    if (kept.empty()) {
      d["metadata"].erase("ownerReferences");
    } else {
      refs = std::move(kept);
    }
    return core::Status::Ok();
  }

  core::Status ProcessAsDependent(const ResourceInfo& r, const Json& obj) {
    const Json* refs = Find(obj, {"metadata", "ownerReferences"});
    if (!refs || !refs->is_array() || refs->empty()) return core::Status::Ok();
    std::vector<std::string> dangling;
    for (const auto& ref : *refs) {
      Owner state = OwnerState(ref, machinery::Namespace(obj));
      if (state == Owner::kUnknown) return core::Unavailable("owner lookup failed");
      if (state == Owner::kAbsent) dangling.push_back(GetString(ref, {"uid"}));
    }
    if (dangling.empty()) return core::Status::Ok();
    if (dangling.size() < refs->size()) {
      // Other owners remain: only drop the references to the vanished ones.
      auto res = storage_.Mutate(
          r, machinery::Namespace(obj), machinery::Name(obj),
          [&](Json& d) {
            for (const auto& uid : dangling) KLUTCH_RETURN_IF_ERROR(DropOwner(d, uid));
            return core::Status::Ok();
          },
          As(name()));
      if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
      return core::Status::Ok();
    }
    if (machinery::IsBeingDeleted(obj)) return core::Status::Ok();
    auto res = storage_.Delete(
        r, machinery::Namespace(obj), machinery::Name(obj),
        {.propagation_policy = "Background", .precondition_uid = machinery::Uid(obj)});
    if (!res.ok() && !core::IsNotFound(res.status()) && !core::IsConflict(res.status())) {
      return res.status();
    }
    return core::Status::Ok();
  }

  std::mutex mu_;
  std::map<std::string, std::string> uid_to_key_ GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> dependents_ GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> owners_of_ GUARDED_BY(mu_);
};

class All final : public BuiltinControllers {
 public:
  std::vector<std::unique_ptr<BuiltinControllers>> parts;
  void Stop() override {
    for (auto& p : parts) p->Stop();
  }
  ~All() override { Stop(); }
};

template <typename T, typename... Args>
core::Status Launch(All& all, Args&... args) {
  auto c = std::make_unique<T>(args...);
  KLUTCH_RETURN_IF_ERROR(c->Start());
  all.parts.push_back(std::move(c));
  return core::Status::Ok();
}

}  // namespace

namespace {

// The API server's registry, as the CRD controller sees it.
class ServerCrdServing final : public CrdServing {
 public:
  explicit ServerCrdServing(apiserver::ApiServer& server) : server_(server) {}
  core::Status Serve(const Json& crd) override { return server_.RegisterCrd(crd); }
  void StopServing(const std::string& name) override { server_.UnregisterCrd(name); }
  bool Serves(const std::string& crd_name, const std::string& group,
              const std::string& plural) const override {
    auto r = server_.registry().FindStored(group, plural);
    return r && r->crd_name == crd_name;
  }

 private:
  apiserver::ApiServer& server_;
};

// The framework-based controllers: a loopback client with the admin credentials, one
// Manager, shared informers.
class Framework final : public BuiltinControllers {
 public:
  static core::Result<std::unique_ptr<Framework>> Start(apiserver::ApiServer& server) {
    auto f = std::unique_ptr<Framework>(new Framework(server));
    KLUTCH_ASSIGN_OR_RETURN(client::RestConfig config,
                            client::LoadKubeconfig({.paths = {server.admin_kubeconfig_path()}}));
    config.user_agent = "klutch-apiserver-controllers";
    config.qps = 0;  // in-process: the server's own limits apply
    KLUTCH_ASSIGN_OR_RETURN(f->rest_, client::RestClient::New(std::move(config)));
    std::ifstream ca_in(server.ca_file());
    std::string ca_pem((std::istreambuf_iterator<char>(ca_in)), std::istreambuf_iterator<char>());
    f->manager_ = std::make_unique<reconcile::Manager>(
        *f->rest_, reconcile::ManagerOptions{.name = "klutch-apiserver"});
    f->mapper_ = std::make_unique<client::RestMapper>(*f->rest_);
    auto& m = *f->manager_;
    client::Informer& namespaces = m.Informer(client::resources::kNamespaces);
    client::Informer& accounts = m.Informer(client::resources::kServiceAccounts,
                                            {.field_selector = "metadata.name=default"});
    client::Informer& root_cas =
        m.Informer(client::resources::kConfigMaps,
                   {.field_selector = std::string("metadata.name=") + kRootCaConfigMap});
    client::Informer& crds = m.Informer(client::resources::kCustomResourceDefinitions);

    f->namespace_ =
        std::make_unique<NamespaceReconciler>(*f->rest_, namespaces.indexer(), *f->mapper_);
    m.AddController("klutch-apiserver-namespace", *f->namespace_).For(namespaces);

    f->defaults_ = std::make_unique<NamespaceDefaultsReconciler>(
        *f->rest_, namespaces.indexer(), accounts.indexer(), root_cas.indexer(), ca_pem);
    auto& defaults = m.AddController("klutch-apiserver-namespace-defaults", *f->defaults_);
    defaults.For(namespaces);
    auto to_namespace = [](const Json& o) -> std::vector<reconcile::Request> {
      return {{"", machinery::Namespace(o)}};
    };
    defaults.Watches(accounts, to_namespace);
    defaults.Watches(root_cas, to_namespace);

    f->serving_ = std::make_unique<ServerCrdServing>(server);
    f->crd_ = std::make_unique<CrdReconciler>(*f->rest_, crds.indexer(), *f->serving_);
    m.AddController("klutch-apiserver-crd", *f->crd_, 2).For(crds);

    KLUTCH_RETURN_IF_ERROR(m.Start());
    return f;
  }
  void Stop() override {
    if (manager_) manager_->Stop();
  }
  ~Framework() override { Stop(); }

 private:
  explicit Framework(apiserver::ApiServer&) {}
  std::unique_ptr<client::RestClient> rest_;
  std::unique_ptr<client::RestMapper> mapper_;
  std::unique_ptr<ServerCrdServing> serving_;
  std::unique_ptr<NamespaceReconciler> namespace_;
  std::unique_ptr<NamespaceDefaultsReconciler> defaults_;
  std::unique_ptr<CrdReconciler> crd_;
  std::unique_ptr<reconcile::Manager> manager_;  // last: stopped and destroyed first
};

}  // namespace

core::Result<std::unique_ptr<BuiltinControllers>> StartBuiltinControllers(
    apiserver::ApiServer& server) {
  auto all = std::make_unique<All>();
  KLUTCH_ASSIGN_OR_RETURN(auto framework, Framework::Start(server));
  all->parts.push_back(std::move(framework));
  KLUTCH_RETURN_IF_ERROR(Launch<GarbageCollector>(*all, server.storage()));
  return std::unique_ptr<BuiltinControllers>(std::move(all));
}

}  // namespace klutch::controllers
