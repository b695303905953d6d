#include "controllers/garbage_collector.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/log.h"
#include "machinery/object.h"
#include "reconcile/committer.h"

namespace klutch::controllers {

using client::Json;
using machinery::Find;
using machinery::GetString;

namespace {

const reconcile::Request kSyncResources{"", "resources", "*"};

std::string ResourceName(const machinery::GroupVersionResource& gvr) { return gvr.GroupResource(); }

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::set<std::string> OwnerUids(const Json& obj) {
  std::set<std::string> out;
  const Json* refs = Find(obj, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return out;
  for (const auto& ref : *refs) {
    std::string uid = GetString(ref, {"uid"});
    if (!uid.empty()) out.insert(uid);
  }
  return out;
}

}  // namespace

GarbageCollector::GarbageCollector(client::RestClient& rest, client::RestMapper& mapper,
                                   reconcile::Manager& manager)
    : rest_(rest), mapper_(mapper), manager_(manager) {}

core::Status GarbageCollector::Setup() {
  controller_ = &manager_.AddController(kName, *this, 2);
  // New CRDs bring new resources to follow.
  client::Informer& crds = manager_.Informer(client::resources::kCustomResourceDefinitions);
  auto sync = [this](const client::ObjectPtr&) { controller_->queue().Add(kSyncResources.Key()); };
  crds.AddEventHandler(
      {.on_add = sync,
       .on_update = [sync](const client::ObjectPtr&, const client::ObjectPtr& o) { sync(o); },
       .on_delete = sync});
  return SyncResources();
}

core::Status GarbageCollector::SyncResources() {
  KLUTCH_RETURN_IF_ERROR(mapper_.Refresh());
  std::vector<client::ResourceMapping> fresh;
  {
    core::MutexLock lock(mu_);
    for (const auto& m : mapper_.All()) {
      if (!m.preferred_version || !Contains(m.verbs, "list") || !Contains(m.verbs, "watch") ||
          !Contains(m.verbs, "delete")) {
        continue;
      }
      std::string name = ResourceName(m.gvr);
      if (followed_.count(name)) continue;
      followed_[name] = m;
      fresh.push_back(m);
    }
  }
  for (const auto& m : fresh) Watch(m);
  return core::Status::Ok();
}

void GarbageCollector::Watch(const client::ResourceMapping& m) {
  const std::string resource = ResourceName(m.gvr);
  client::Informer& informer = manager_.Informer(m.gvr, {.metadata_only = true});
  {
    core::MutexLock lock(mu_);
    informers_[resource] = &informer;
  }
  informer.AddEventHandler(
      {.on_add = [this, resource](const client::ObjectPtr& o) { Observe(resource, *o, false); },
       .on_update = [this, resource](const client::ObjectPtr&,
                                     const client::ObjectPtr& o) { Observe(resource, *o, false); },
       .on_delete = [this, resource](const client::ObjectPtr& o) { Observe(resource, *o, true); }});
}

void GarbageCollector::Observe(const std::string& resource, const Json& obj, bool deleted) {
  const std::string uid = machinery::Uid(obj);
  if (uid.empty()) return;
  reconcile::Request self{machinery::Namespace(obj), machinery::Name(obj), resource};
  std::vector<std::string> keys;
  {
    core::MutexLock lock(mu_);
    auto it = nodes_.find(uid);
    if (it != nodes_.end()) {
      for (const auto& owner : it->second.owners) {
        auto d = dependents_.find(owner);
        if (d == dependents_.end()) continue;
        d->second.erase(uid);
        if (d->second.empty()) dependents_.erase(d);
      }
    }
    if (deleted) {
      if (it != nodes_.end()) nodes_.erase(it);
      // Its dependents may now be orphans.
      if (auto d = dependents_.find(uid); d != dependents_.end()) {
        for (const auto& dep : d->second) {
          auto n = nodes_.find(dep);
          if (n != nodes_.end()) {
            keys.push_back(
                reconcile::Request{n->second.ns, n->second.name, n->second.resource}.Key());
          }
        }
      }
    } else {
      Node node{resource, self.ns, self.name, OwnerUids(obj)};
      for (const auto& owner : node.owners) dependents_[owner].insert(uid);
      bool has_owners = !node.owners.empty();
      nodes_[uid] = std::move(node);
      bool finalizing =
          machinery::IsBeingDeleted(obj) && (machinery::HasFinalizer(obj, "foregroundDeletion") ||
                                             machinery::HasFinalizer(obj, "orphan"));
      if (has_owners || finalizing) keys.push_back(self.Key());
    }
  }
  for (const auto& k : keys) controller_->queue().Add(k);
}

bool GarbageCollector::AllSynced() {
  core::MutexLock lock(mu_);
  for (const auto& [name, informer] : informers_) {
    if (!informer->HasSynced()) return false;
  }
  return true;
}

std::vector<reconcile::Request> GarbageCollector::DependentsOf(const std::string& uid) {
  core::MutexLock lock(mu_);
  std::vector<reconcile::Request> out;
  auto d = dependents_.find(uid);
  if (d == dependents_.end()) return out;
  for (const auto& dep : d->second) {
    auto n = nodes_.find(dep);
    if (n != nodes_.end()) out.push_back({n->second.ns, n->second.name, n->second.resource});
  }
  return out;
}

client::ObjectPtr GarbageCollector::Cached(const reconcile::Request& r) {
  client::Informer* informer = nullptr;
  {
    core::MutexLock lock(mu_);
    auto it = informers_.find(r.resource);
    if (it == informers_.end()) return nullptr;
    informer = it->second;
  }
  return informer->indexer().Get(r.ns.empty() ? r.name : r.ns + "/" + r.name);
}

GarbageCollector::Owner GarbageCollector::OwnerState(const Json& ref, const std::string& ns) {
  const std::string uid = GetString(ref, {"uid"});
  {
    core::MutexLock lock(mu_);
    if (nodes_.count(uid)) return Owner::kExists;
  }
  // Not (yet) in the graph: ask the server. Any served version of the kind will do.
  auto gv = machinery::ParseApiVersion(GetString(ref, {"apiVersion"}));
  auto mapping = mapper_.ForKind(gv.group, GetString(ref, {"kind"}));
  // A kind not served (yet: its CRD may come) cannot be checked; kube's collector retries
  // such a reference with backoff and never deletes because of it.
  if (!mapping.ok()) return Owner::kUnknown;
  // A cluster-scoped object cannot be owned by a namespaced one: kube ignores the reference
  // (event OwnerRefInvalidNamespace) rather than collect the object, e.g. a CRD a namespaced
  // APIServiceBinding owns.
  if (ns.empty() && mapping->namespaced) return Owner::kInvalid;
  client::ResourceClient owners(rest_, mapping->gvr, mapping->namespaced ? ns : "");
  auto owner = owners.Get(GetString(ref, {"name"}));
  if (!owner.ok()) return core::IsNotFound(owner.status()) ? Owner::kAbsent : Owner::kUnknown;
  return machinery::Uid(*owner) == uid ? Owner::kExists : Owner::kAbsent;
}

std::optional<client::ResourceClient> GarbageCollector::ClientFor(const reconcile::Request& r) {
  core::MutexLock lock(mu_);
  auto it = followed_.find(r.resource);
  if (it == followed_.end()) return std::nullopt;
  return client::ResourceClient(rest_, it->second.gvr, r.ns);
}

core::Status GarbageCollector::DeleteObject(const reconcile::Request& r, const Json& obj,
                                            const char* propagation) {
  auto rc = ClientFor(r);
  if (!rc) return core::Status::Ok();
  auto res = rc->Delete(r.name, {.propagation_policy = propagation,
                                 .precondition_uid = machinery::Uid(obj),
                                 // The cache may be behind a user removing a reference by hand.
                                 .precondition_resource_version = machinery::ResourceVersion(obj)});
  // A conflict means the object changed: its event queues it again.
  if (!res.ok() && !core::IsNotFound(res.status()) && !core::IsConflict(res.status())) {
    return res.status();
  }
  return core::Status::Ok();
}

core::Status GarbageCollector::DropOwners(const reconcile::Request& r, const Json& obj,
                                          const std::set<std::string>& uids) {
  auto rc = ClientFor(r);
  if (!rc) return core::Status::Ok();
  Json modified = obj;
  Json kept = Json::array();
  if (const Json* refs = Find(obj, {"metadata", "ownerReferences"}); refs && refs->is_array()) {
    for (const auto& ref : *refs) {
      if (!uids.count(GetString(ref, {"uid"}))) kept.push_back(ref);
    }
  }
  if (kept.empty()) {
    modified["metadata"].erase("ownerReferences");
  } else {
    modified["metadata"]["ownerReferences"] = std::move(kept);
  }
  auto res = reconcile::Committer(*rc, kName).Commit(obj, modified);
  if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
  return core::Status::Ok();
}

core::Result<reconcile::Result> GarbageCollector::ProcessAsOwner(const reconcile::Request& r,
                                                                 const Json& obj) {
  const bool orphan = machinery::HasFinalizer(obj, "orphan");
  const bool foreground = machinery::HasFinalizer(obj, "foregroundDeletion");
  if (!machinery::IsBeingDeleted(obj) || (!orphan && !foreground)) {
    return reconcile::Result::Done();
  }
  const std::string uid = machinery::Uid(obj);
  for (const auto& dep : DependentsOf(uid)) {
    client::ObjectPtr d = Cached(dep);
    if (!d) continue;
    bool other_live_owner = false;
    if (!orphan) {
      if (const Json* refs = Find(*d, {"metadata", "ownerReferences"}); refs && refs->is_array()) {
        for (const auto& ref : *refs) {
          if (GetString(ref, {"uid"}) == uid) continue;
          Owner state = OwnerState(ref, dep.ns);
          if (state == Owner::kUnknown) return core::Unavailable("owner lookup failed");
          if (state == Owner::kExists) other_live_owner = true;
        }
      }
    }
    if (orphan || other_live_owner) {
      // Orphaning, or a dependent other owners still hold: only the reference goes.
      KLUTCH_RETURN_IF_ERROR(DropOwners(dep, *d, {uid}));
      continue;
    }
    if (machinery::IsBeingDeleted(*d)) continue;
    KLUTCH_RETURN_IF_ERROR(DeleteObject(dep, *d, "Foreground"));
  }
  if (foreground && !DependentsOf(uid).empty()) {
    // Dependents' deletions show up as events; this only covers ones held by finalizers.
    return reconcile::Result::RequeueAfter(std::chrono::milliseconds(500));
  }
  auto rc = ClientFor(r);
  if (!rc) return reconcile::Result::Done();
  const char* finalizer = orphan ? "orphan" : "foregroundDeletion";
  Json modified = obj;
  Json kept = Json::array();
  for (const auto& f : obj["metadata"]["finalizers"]) {
    if (f != finalizer) kept.push_back(f);
  }
  modified["metadata"]["finalizers"] = std::move(kept);
  auto res = reconcile::Committer(*rc, kName).Commit(obj, modified);
  if (!res.ok() && !core::IsNotFound(res.status())) return res.status();
  return reconcile::Result::Done();
}

core::Status GarbageCollector::ProcessAsDependent(const reconcile::Request& r, const Json& obj) {
  const Json* refs = Find(obj, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array() || refs->empty()) return core::Status::Ok();
  std::set<std::string> dangling;
  size_t invalid = 0;
  for (const auto& ref : *refs) {
    Owner state = OwnerState(ref, r.ns);
    if (state == Owner::kUnknown) return core::Unavailable("owner lookup failed");
    if (state == Owner::kAbsent) dangling.insert(GetString(ref, {"uid"}));
    if (state == Owner::kInvalid) ++invalid;
  }
  if (dangling.empty()) return core::Status::Ok();
  // An invalid reference keeps the object, as a live owner would.
  if (dangling.size() + invalid < refs->size() || invalid > 0) return DropOwners(r, obj, dangling);
  if (machinery::IsBeingDeleted(obj)) return core::Status::Ok();
  return DeleteObject(r, obj, "Background");
}

core::Result<reconcile::Result> GarbageCollector::Reconcile(const reconcile::Request& request) {
  if (request == kSyncResources) {
    KLUTCH_RETURN_IF_ERROR(SyncResources());
    return reconcile::Result::Done();
  }
  // Decisions need the whole graph: while any followed resource (e.g. of a CRD just added)
  // has not listed yet, a dependent could be missed and later look orphaned.
  if (!AllSynced()) return reconcile::Result::RequeueAfter(std::chrono::milliseconds(200));
  client::ObjectPtr obj = Cached(request);
  if (!obj) return reconcile::Result::Done();
  KLUTCH_ASSIGN_OR_RETURN(reconcile::Result owner_result, ProcessAsOwner(request, *obj));
  KLUTCH_RETURN_IF_ERROR(ProcessAsDependent(request, *obj));
  return owner_result;
}

}  // namespace klutch::controllers
