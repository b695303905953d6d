// ManagedReconciler: the pass every provider-anynines managed resource goes through, as
// Crossplane's managed reconciler: pause annotation, management policies, the ProviderConfig
// (usage record, clients), finalizer and external-name, then the kind's Run() (one subclass
// per kind: service_instance_reconciler.h, service_binding_reconciler.h, backup_reconciler.h,
// restore_reconciler.h; what each does beyond upstream: controllers.h). Also the helpers the
// kinds share. Thread-safe: pacing and memo state under its own lock.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "providers/anynines/connections.h"
#include "providers/anynines/context.h"
#include "providers/anynines/credentials.h"
#include "providers/anynines/pacer.h"
#include "providers/anynines/provider_config.h"
#include "reconcile/controller.h"

namespace klutch::providers::anynines {

// The shared pass structure; one subclass per kind.
class ManagedReconciler : public reconcile::Reconciler {
 public:
  ManagedReconciler(Context& ctx, client::Informer*& informer, std::string kind);
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) final;

 protected:
  struct Pass {
    std::string key;
    Json original;  // the object as last read or written
    Json mr;        // the working copy: status edits go here
    Policies policies;
    bool deleting = false;
    std::string pc_name;
    Connections::Connection conn;
  };

  virtual core::Result<reconcile::Result> Run(Pass& p) = 0;

  // Synced=False with the user's message, a Warning Event `reason`, status written; backs off.
  core::Result<reconcile::Result> Fail(Pass& p, const core::Status& error, std::string_view reason);
  // Synced=True, status written (resourceVersion precondition), next check after the fast
  // pace or in steady state (`sooner` caps the poll interval).
  core::Result<reconcile::Result> Fast(Pass& p);
  core::Result<reconcile::Result> Steady(
      Pass& p, std::optional<std::chrono::milliseconds> sooner = std::nullopt);
  // Writes status with a merge patch without precondition (after an external change).
  core::Status ForceStatus(Pass& p);
  // Writes status with the resourceVersion precondition (Conflict when stale).
  core::Status CommitStatus(Pass& p);
  // Sets (value) or removes (nullopt) annotations with a merge patch without precondition;
  // p.original takes the stored object, p.mr its metadata.
  core::Status Annotate(Pass& p, const std::map<std::string, std::optional<std::string>>& changes);
  // Creates a backup or restore once across lost answers: before `create` the highest ID that
  // `list` returns is recorded in annotation `pending_key`; a later pass that finds the mark
  // adopts the lowest newer ID that `taken` does not claim instead of asking again. On success
  // `id_key` holds the ID and the mark is gone; `adopted` says which way it went.
  core::Result<int64_t> CreateOnce(Pass& p, std::string_view pending_key, std::string_view id_key,
                                   const std::function<core::Result<Json>()>& list,
                                   const std::function<core::Result<int64_t>()>& create,
                                   const std::function<bool(int64_t)>& taken, bool& adopted);
  // Removes the finalizer: the pass is over.
  core::Result<reconcile::Result> Finalize(Pass& p);
  void Event(const Pass& p, std::string_view type, std::string_view reason,
             std::string_view message);
  // Whether an action (`what` with `hash`) was sent for this resource within poll_interval;
  // Remember() records one.
  bool RecentlySent(const std::string& key, const std::string& what, const std::string& hash);
  void Remember(const std::string& key, const std::string& what, const std::string& hash);

  Context& ctx_;
  client::Informer*& informer_;
  const std::string kind_;
  Pacer fast_;
  Pacer failures_;
  core::Mutex memo_mu_;
  struct Sent {
    std::string hash;
    core::MonoTime at;
  };
  std::map<std::string, Sent> memo_ GUARDED_BY(memo_mu_);  // "<key>|<what>"
  // The resourceVersion this reconciler last wrote per resource: a pass that finds the
  // informer behind it reads the resource from the server instead, so that it never acts on
  // a state from before its own write (a second unbind, a second backup).
  std::map<std::string, std::string> written_ GUARDED_BY(memo_mu_);
  void Wrote(const Pass& p);
};

// status.atProvider of `mr`, made an object when it is not one.
Json& AtProvider(Json& mr);
// The integer at `path` of `mr` (nullopt when absent or not an integer).
std::optional<int64_t> IntAt(const Json& mr, std::initializer_list<std::string_view> path);
// Annotation `key` of `mr` as an integer (nullopt when absent or not a number).
std::optional<int64_t> IntAnnotation(const Json& mr, std::string_view key);
// The one object of `informer` indexed under `value`; UserErrors for none or several, in the
// claim author's terms: the claim `name` their `field` names in namespace `ns`.
core::Result<client::ObjectPtr> FindOne(client::Informer& informer, const char* index,
                                        const std::string& value, std::string_view what,
                                        std::string_view name, std::string_view ns,
                                        std::string_view field);

// A UserError when `mr` reaches `target` (the `what` its claim names) through another
// ProviderConfig than the target's: its spec.serviceInstanceType names another data service,
// and the broker it would ask does not know the target.
core::Status SameServiceType(const Json& mr, const Json& target, std::string_view what,
                             std::string_view name);

}  // namespace klutch::providers::anynines
