// GarbageCollector (klutch-apiserver-gc), on the src/reconcile framework: deletion by
// ownerReferences, as kube-controller-manager's garbage collector does it.
//
// It keeps a metadata-only informer for every resource discovery lists (list + watch),
// adding informers as CRDs appear, and from their events a graph: uid -> object, owner uid
// -> dependents. Keys are "resource.group#namespace/name". Reconciling an object:
//   - as an owner being deleted with the `orphan` finalizer: its dependents lose their
//     reference to it, then the finalizer goes;
//   - with `foregroundDeletion`: dependents that no other live owner holds are deleted
//     (foreground too), others lose the reference; the finalizer goes once none are left;
//   - as a dependent: references to owners that no longer exist (by uid) are dropped, and
//     when none of its owners exists the object is deleted (background, uid precondition).
// An owner's existence is read from the graph, else with a GET; when that fails the object
// is retried later rather than acted on. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "client/discovery.h"
#include "core/sync.h"
#include "reconcile/manager.h"

namespace klutch::controllers {

class GarbageCollector final : public reconcile::Reconciler {
 public:
  static constexpr const char* kName = "klutch-apiserver-gc";
  // Wires itself into `manager`: a controller, an informer on CRDs (to follow new
  // resources) and one metadata informer per resource found now.
  GarbageCollector(client::RestClient& rest, client::RestMapper& mapper,
                   reconcile::Manager& manager);
  core::Status Setup();

  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  // kInvalid: a reference that can never hold (a namespaced owner of a cluster-scoped object).
  enum class Owner { kExists, kAbsent, kUnknown, kInvalid };
  struct Node {
    std::string resource;  // "resource.group"
    std::string ns, name;
    std::set<std::string> owners;  // owner uids
  };

  // Starts informers for resources not yet followed.
  core::Status SyncResources();
  void Watch(const client::ResourceMapping& m);
  void Observe(const std::string& resource, const client::Json& obj, bool deleted);
  Owner OwnerState(const client::Json& ref, const std::string& ns);
  client::ObjectPtr Cached(const reconcile::Request& r);
  core::Result<reconcile::Result> ProcessAsOwner(const reconcile::Request& r,
                                                 const client::Json& obj);
  core::Status ProcessAsDependent(const reconcile::Request& r, const client::Json& obj);
  // A client for the request's resource in its namespace; nullopt when not followed.
  std::optional<client::ResourceClient> ClientFor(const reconcile::Request& r);
  // Deletes the cached object, guarded by its uid and resourceVersion.
  core::Status DeleteObject(const reconcile::Request& r, const client::Json& obj,
                            const char* propagation);
  core::Status DropOwners(const reconcile::Request& r, const client::Json& obj,
                          const std::set<std::string>& uids);
  std::vector<reconcile::Request> DependentsOf(const std::string& uid);
  bool AllSynced();

  client::RestClient& rest_;
  client::RestMapper& mapper_;
  reconcile::Manager& manager_;
  reconcile::Controller* controller_ = nullptr;

  core::Mutex mu_;
  std::map<std::string, client::ResourceMapping> followed_ GUARDED_BY(mu_);
  std::map<std::string, client::Informer*> informers_ GUARDED_BY(mu_);
  std::map<std::string, Node> nodes_ GUARDED_BY(mu_);                        // by uid
  std::map<std::string, std::set<std::string>> dependents_ GUARDED_BY(mu_);  // owner uid -> uids
};

}  // namespace klutch::controllers
