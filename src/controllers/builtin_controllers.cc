#include "controllers/builtin_controllers.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "apiserver/crd.h"
#include "controllers/store_controller.h"
#include "core/clock.h"
#include "core/log.h"

namespace klutch::controllers {

using apiserver::ResourceInfo;
using apiserver::ResourcePtr;
using machinery::Find;
using machinery::GetString;

namespace {

constexpr const char* kNamespacePrefix = "/registry/core/namespaces/";
constexpr const char* kServiceAccountPrefix = "/registry/core/serviceaccounts/";
constexpr const char* kConfigMapPrefix = "/registry/core/configmaps/";
constexpr const char* kRootCaConfigMap = "kube-root-ca.crt";
constexpr const char* kCrdPrefix = "/registry/apiextensions.k8s.io/customresourcedefinitions/";

apiserver::WriteOptions As(const std::string& manager) {
  apiserver::WriteOptions o;
  o.field_manager = manager;
  return o;
}

// Every resource (at its storage version) that lives in namespaces.
std::vector<ResourcePtr> NamespacedResources(const apiserver::Registry& registry) {
  std::vector<ResourcePtr> out;
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& r : registry.All()) {
    if (!r->namespaced) continue;
    auto stored = registry.FindStored(r->group, r->plural);
    if (!stored || !seen.insert({stored->group, stored->plural}).second) continue;
    out.push_back(stored);
  }
  return out;
}

// ---------------------------------------------------------------------------------------
class NamespaceController final : public StoreController, public BuiltinControllers {
 public:
  explicit NamespaceController(apiserver::RestStorage& s)
      : StoreController("klutch-apiserver-namespace", s, {kNamespacePrefix}) {}
  void Stop() override { StoreController::Stop(); }

 protected:
  core::Status Reconcile(const std::string& key) override {
    const auto& registry = storage_.registry();
    auto ns_resource = registry.Find("", "v1", "namespaces");
    std::string name = key.substr(std::strlen(kNamespacePrefix));
    auto ns = storage_.Get(*ns_resource, "", name);
    if (!ns.ok()) return core::IsNotFound(ns.status()) ? core::Status::Ok() : ns.status();
    if (!machinery::IsBeingDeleted(*ns)) return core::Status::Ok();

    // Delete everything inside; objects with finalizers stay until their owners finish.
    size_t remaining = 0;
    for (const auto& r : NamespacedResources(registry)) {
      auto list = storage_.List(*r, name, {});
      if (!list.ok()) return list.status();
      for (auto& item : list->items) {
        ++remaining;
        const Json& obj = item.Object();
        if (machinery::IsBeingDeleted(obj)) continue;
        auto del =
            storage_.Delete(*r, name, machinery::Name(obj), {.propagation_policy = "Background"});
        if (!del.ok() && !core::IsNotFound(del.status())) return del.status();
      }
    }
    if (remaining > 0) {
      // Check again shortly: deletions are in flight or waiting for finalizers.
      std::lock_guard<std::mutex> lock(empty_mu_);
      empty_once_.erase(name);
      Enqueue(key, std::chrono::milliseconds(100));
      return core::Status::Ok();
    }
    {
      // A create admitted just before the namespace turned Terminating may commit after the
      // lists above: finalize only after a second empty pass, once such writes have landed.
      std::lock_guard<std::mutex> lock(empty_mu_);
      if (empty_once_.insert(name).second) {
        Enqueue(key, std::chrono::milliseconds(200));
        return core::Status::Ok();
      }
      empty_once_.erase(name);
    }
    apiserver::WriteOptions opts = As(name_prefix_);
    opts.subresource = "finalize";
    auto res = storage_.Mutate(
        *ns_resource, "", name,
        [](Json& o) {
          Json* spec = o.contains("spec") ? &o["spec"] : nullptr;
          if (spec && spec->contains("finalizers") && (*spec)["finalizers"].is_array()) {
            Json kept = Json::array();
            for (const auto& f : (*spec)["finalizers"]) {
              if (f != "kubernetes") kept.push_back(f);
            }
            (*spec)["finalizers"] = std::move(kept);
          }
          return core::Status::Ok();
        },
        opts);
    if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
    return core::Status::Ok();
  }

 private:
  const std::string name_prefix_ = "klutch-apiserver-namespace";
  std::mutex empty_mu_;
  std::set<std::string> empty_once_ GUARDED_BY(empty_mu_);  // namespaces seen empty once
};

// ---------------------------------------------------------------------------------------
// What every active namespace holds on a real cluster: a "default" ServiceAccount and the
// "kube-root-ca.crt" ConfigMap with the cluster CA (for in-cluster clients). Both come back
// if deleted; the ConfigMap is reset if edited.
class NamespaceDefaultsController final : public StoreController, public BuiltinControllers {
 public:
  NamespaceDefaultsController(apiserver::RestStorage& s, std::string ca_pem)
      : StoreController("klutch-apiserver-namespace-defaults", s,
                        {kNamespacePrefix, kServiceAccountPrefix, kConfigMapPrefix}),
        ca_pem_(std::move(ca_pem)) {}
  void Stop() override { StoreController::Stop(); }

 protected:
  std::vector<std::string> Map(const storage::Event& e) override {
    for (auto [prefix, name] : {std::pair{kServiceAccountPrefix, "default"},
                                std::pair{kConfigMapPrefix, kRootCaConfigMap}}) {
      if (!e.key.starts_with(prefix)) continue;
      std::string rest = e.key.substr(std::strlen(prefix));
      auto slash = rest.find('/');
      if (slash == std::string::npos || rest.substr(slash + 1) != name) return {};
      return {kNamespacePrefix + rest.substr(0, slash)};
    }
    return {e.key};
  }
  void Observe(const storage::KeyValue& kv) override {
    if (kv.key.starts_with(kNamespacePrefix)) Enqueue(kv.key);
  }

  core::Status Reconcile(const std::string& key) override {
    const auto& registry = storage_.registry();
    std::string ns = key.substr(std::strlen(kNamespacePrefix));
    auto ns_obj = storage_.Get(*registry.Find("", "v1", "namespaces"), "", ns);
    if (!ns_obj.ok())
      return core::IsNotFound(ns_obj.status()) ? core::Status::Ok() : ns_obj.status();
    if (machinery::IsBeingDeleted(*ns_obj)) return core::Status::Ok();
    auto tolerate = [](const core::Status& st) {
      // A namespace that started terminating meanwhile refuses new content: fine.
      return st.ok() || core::IsAlreadyExists(st) || st.reason() == core::Reason::kForbidden ||
             core::IsNotFound(st);
    };
    auto sa = registry.Find("", "v1", "serviceaccounts");
    Json account = {{"apiVersion", "v1"},
                    {"kind", "ServiceAccount"},
                    {"metadata", {{"name", "default"}, {"namespace", ns}}}};
    auto res = storage_.Create(*sa, ns, account, As(name()));
    if (!tolerate(res.status())) return res.status();

    auto cm = registry.Find("", "v1", "configmaps");
    Json want_data = {{"ca.crt", ca_pem_}};
    auto current = storage_.Get(*cm, ns, kRootCaConfigMap);
    if (current.ok()) {
      if (current->value("data", Json::object()) == want_data) return core::Status::Ok();
      auto fixed = storage_.Mutate(
          *cm, ns, kRootCaConfigMap,
          [&](Json& o) {
            o["data"] = want_data;
            return core::Status::Ok();
          },
          As(name()));
      return tolerate(fixed.status()) ? core::Status::Ok() : fixed.status();
    }
    if (!core::IsNotFound(current.status())) return current.status();
    Json config = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata",
                    {{"name", kRootCaConfigMap},
                     {"namespace", ns},
                     {"annotations",
                      {{"kubernetes.io/description",
                        "The cluster CA bundle, for clients in this namespace to verify the API "
                        "server's certificate."}}}}},
                   {"data", want_data}};
    auto created = storage_.Create(*cm, ns, config, As(name()));
    return tolerate(created.status()) ? core::Status::Ok() : created.status();
  }

 private:
  std::string ca_pem_;
};

// ---------------------------------------------------------------------------------------
class CrdController final : public StoreController, public BuiltinControllers {
 public:
  CrdController(apiserver::ApiServer& server)
      : StoreController("klutch-apiserver-crd", server.storage(), {kCrdPrefix}), server_(server) {}
  void Stop() override { StoreController::Stop(); }

 protected:
  core::Status Reconcile(const std::string& key) override {
    const auto& registry = storage_.registry();
    auto crd_resource = registry.Find("apiextensions.k8s.io", "v1", "customresourcedefinitions");
    std::string name = key.substr(std::strlen(kCrdPrefix));
    auto crd = storage_.Get(*crd_resource, "", name);
    if (!crd.ok()) {
      if (!core::IsNotFound(crd.status())) return crd.status();
      server_.UnregisterCrd(name);
      return core::Status::Ok();
    }
    if (machinery::IsBeingDeleted(*crd)) return Cleanup(*crd_resource, *crd);
    // Serve first, then report Established: clients that wait for the condition can use the
    // resources immediately.
    auto st = server_.RegisterCrd(*crd);
    bool accepted = st.ok();
    apiserver::WriteOptions opts = As(name_);
    opts.subresource = "status";
    std::string now = core::FormatTime(core::RealClock::Get().Now());
    auto res = storage_.Mutate(
        *crd_resource, "", name,
        [&](Json& o) {
          Json& status = o["status"];
          if (!status.is_object()) status = Json::object();
          const Json* spec_names = Find(o, {"spec", "names"});
          Json names = spec_names && spec_names->is_object() ? *spec_names : Json::object();
          const std::string kind = GetString(names, {"kind"});
          if (GetString(names, {"singular"}).empty() && !kind.empty()) {
            std::string lower = kind;
            for (auto& c : lower)
              c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
            names["singular"] = lower;
          }
          if (GetString(names, {"listKind"}).empty() && !kind.empty()) {
            names["listKind"] = kind + "List";
          }
          if (accepted) status["acceptedNames"] = names;
          Json stored = Json::array();
          if (const Json* sv = Find(status, {"storedVersions"}); sv && sv->is_array()) {
            for (const auto& v : *sv) {
              if (v.is_string()) stored.push_back(v);
            }
          }
          if (const Json* versions = Find(o, {"spec", "versions"});
              versions && versions->is_array()) {
            for (const auto& v : *versions) {
              const Json* storage = Find(v, {"storage"});
              if (!storage || !storage->is_boolean() || !storage->get<bool>()) continue;
              std::string vn = GetString(v, {"name"});
              bool have = false;
              for (const auto& sv : stored) have = have || sv == vn;
              if (!have) stored.push_back(vn);
            }
          }
          status["storedVersions"] = stored;
          SetCondition(status, "NamesAccepted", accepted ? "True" : "False",
                       accepted ? "NoConflicts" : "InvalidNames",
                       accepted ? "no conflicts found" : st.message(), now);
          SetCondition(
              status, "Established", accepted ? "True" : "False",
              accepted ? "InitialNamesAccepted" : "NotAccepted",
              accepted ? "the initial names have been accepted" : "not all names are accepted",
              now);
          return core::Status::Ok();
        },
        opts);
    if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
    return core::Status::Ok();
  }

 private:
  static void SetCondition(Json& status, const std::string& type, const std::string& value,
                           const std::string& reason, const std::string& message,
                           const std::string& now) {
    Json& conds = status["conditions"];
    if (!conds.is_array()) conds = Json::array();
    // Whatever else a client wrote there, keep only well-formed conditions.
    Json kept = Json::array();
    for (auto& c : conds) {
      if (c.is_object() && !GetString(c, {"type"}).empty()) kept.push_back(std::move(c));
    }
    conds = std::move(kept);
    for (auto& c : conds) {
      if (GetString(c, {"type"}) != type) continue;
      if (GetString(c, {"status"}) != value) c["lastTransitionTime"] = now;
      c["status"] = value;
      c["reason"] = reason;
      c["message"] = message;
      return;
    }
    conds.push_back({{"type", type},
                     {"status", value},
                     {"lastTransitionTime", now},
                     {"reason", reason},
                     {"message", message}});
  }

  core::Status Cleanup(const ResourceInfo& crd_resource, const Json& crd) {
    const std::string name = machinery::Name(crd);
    const auto& registry = storage_.registry();
    auto r = registry.FindStored(GetString(crd, {"spec", "group"}),
                                 GetString(crd, {"spec", "names", "plural"}));
    size_t remaining = 0;
    // Only instances this CRD serves: never a built-in kind or another CRD's objects.
    if (r && r->crd_name == name) {
      auto list = storage_.List(*r, "", {});
      if (!list.ok()) return list.status();
      for (auto& item : list->items) {
        ++remaining;
        const Json& obj = item.Object();
        if (machinery::IsBeingDeleted(obj)) continue;
        auto del = storage_.Delete(*r, machinery::Namespace(obj), machinery::Name(obj), {});
        if (!del.ok() && !core::IsNotFound(del.status())) return del.status();
      }
    }
    if (remaining > 0) {
      Enqueue(kCrdPrefix + name, std::chrono::milliseconds(100));
      return core::Status::Ok();
    }
    auto res = storage_.Mutate(
        crd_resource, "", name,
        [](Json& o) {
          Json& f = o["metadata"]["finalizers"];
          if (!f.is_array()) f = Json::array();
          Json kept = Json::array();
          for (const auto& x : f) {
            if (x != apiserver::kCrdCleanupFinalizer) kept.push_back(x);
          }
          f = std::move(kept);
          return core::Status::Ok();
        },
        As(name_));
    if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
    return core::Status::Ok();
  }

  apiserver::ApiServer& server_;
  const std::string name_ = "klutch-apiserver-crd";
};

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

core::Result<std::unique_ptr<BuiltinControllers>> StartBuiltinControllers(
    apiserver::ApiServer& server) {
  auto all = std::make_unique<All>();
  auto& s = server.storage();
  KLUTCH_RETURN_IF_ERROR(Launch<CrdController>(*all, server));
  KLUTCH_RETURN_IF_ERROR(Launch<NamespaceController>(*all, s));
  std::ifstream ca_in(server.ca_file());
  std::string ca_pem((std::istreambuf_iterator<char>(ca_in)), std::istreambuf_iterator<char>());
  KLUTCH_RETURN_IF_ERROR(Launch<NamespaceDefaultsController>(*all, s, ca_pem));
  KLUTCH_RETURN_IF_ERROR(Launch<GarbageCollector>(*all, s));
  return std::unique_ptr<BuiltinControllers>(std::move(all));
}

}  // namespace klutch::controllers
