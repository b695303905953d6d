// The managed-resource reconcilers of provider-anynines (data-services.md §6.2, §6.3, §6.6,
// §6.7), on the informers and clients of a Context (wired in anynines.cc).
//
// Every pass follows Crossplane's managed reconciler: pause annotation, management policies,
// the ProviderConfig (usage record, clients), finalizer and external-name, then observe the
// external resource and create, update or delete it. Failures set Synced=False with what the
// user can act on (api.h UserMessage) and a Warning Event, and back off from
// failure_backoff_min to poll_interval. While an operation is in flight a resource is checked
// again after fast_poll_min, doubling to fast_poll_max; in steady state after poll_interval.
// Writes after an external change (an operation key, a backup ID) do not wait for a matching
// resourceVersion, so a concurrent status write cannot make the provider forget it.
//
// Beyond upstream:
//  * ServiceInstance: brokers without the a9s `GET /instances/{id}` (404 without
//    InstanceNotFound, 405, 501) are observed through the OSB fetch `GET
//    /v2/service_instances/{id}`; the broker's failed operation description is shown; an update
//    is not repeated for the same desired state within poll_interval; organization and space
//    GUIDs and acceptsIncomplete never make an instance "not up to date".
//  * ServiceBinding: binding waits for its instance to be Ready; a 202 bind is retried (the
//    same PUT) until the broker answers with credentials; a binding the broker lost (404/410)
//    is bound again; the Secret is repaired when deleted or changed. Credential rotation: when
//    the ProviderConfig's kAnnotationMaxCredentialAge is set and the current broker binding is
//    older, a new one ("<uid>-r<n>") is created, the Secret updated in one write, and the
//    superseded binding unbound after kAnnotationCredentialGracePeriod; the binding state lives
//    in the MR's annotations (context.h), so it survives restarts; deleting the MR unbinds
//    every binding it still holds.
//  * Backup: a backup the manager reports deleted (or forgets) outside deletion is reported
//    (Ready=False), not taken again.
//  * Backup, Restore: a creation whose answer was lost (the manager crashed after taking it) is
//    adopted on the next pass instead of repeated (CreateOnce).
//  * Unknown service or plan names list what the broker's catalog offers.
//
// Thread-safe: reconcilers keep only pacing and memo state, under their own locks.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "providers/anynines/context.h"
#include "providers/anynines/credentials.h"
#include "providers/anynines/provider_config.h"
#include "reconcile/controller.h"

namespace klutch::client {
class RestMapper;
}

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

// Deleting an instance that ServiceBindings still use waits until they are gone (unbind
// before deprovision, as Cloud Foundry and Crossplane's Usage do), saying which bindings hold
// it, unless the MR or the composite resource that controls it carries
// kAnnotationDeleteInUse: "true".
class ServiceInstanceReconciler final : public ManagedReconciler {
 public:
  explicit ServiceInstanceReconciler(Context& ctx);
  ~ServiceInstanceReconciler() override;

 private:
  core::Result<reconcile::Result> Run(Pass& p) override;
  core::Result<std::string> NewInstanceId(OsbClient& osb);
  // The claim names of the binding MRs that use this instance (same claim namespace).
  std::vector<std::string> BindingsUsing(const Json& mr) const;
  // kAnnotationDeleteInUse on the MR or on its controlling composite resource.
  bool DeletionForced(const Json& mr);
  core::Result<reconcile::Result> WaitForBindings(Pass& p, const std::vector<std::string>& users);

  std::unique_ptr<client::RestMapper> mapper_;  // finds the controlling composite's resource
};

class ServiceBindingReconciler final : public ManagedReconciler {
 public:
  explicit ServiceBindingReconciler(Context& ctx)
      : ManagedReconciler(ctx, ctx.bindings, "ServiceBinding") {}

 private:
  struct Superseded {
    std::string id;
    core::SystemTime at;
  };
  struct Target {
    std::string ns, name;  // the connection Secret; empty when there is none
  };
  core::Result<reconcile::Result> Run(Pass& p) override;
  core::Result<reconcile::Result> Delete(Pass& p, const std::vector<Superseded>& superseded);
  // Publishes credentials from a bind answer (or a fetched binding) as the Secret and the
  // status; `binding_id`/`generation` become the current binding.
  core::Result<reconcile::Result> Publish(Pass& p, const Json& credentials,
                                          const std::string& binding_id, int64_t generation,
                                          std::vector<Superseded> superseded, bool rotated);
  // Writes the Secret when it does not hold `data` yet.
  core::Status WriteSecret(const Pass& p, const Target& target, const SecretData& data);
  Target SecretTarget(const Json& mr) const;
  void SetConnectionDetails(Pass& p, const SecretData& data);
};

class BackupReconciler final : public ManagedReconciler {
 public:
  explicit BackupReconciler(Context& ctx) : ManagedReconciler(ctx, ctx.backups, "Backup") {}

 private:
  core::Result<reconcile::Result> Run(Pass& p) override;
};

class RestoreReconciler final : public ManagedReconciler {
 public:
  explicit RestoreReconciler(Context& ctx) : ManagedReconciler(ctx, ctx.restores, "Restore") {}

 private:
  core::Result<reconcile::Result> Run(Pass& p) override;
};

// §6.2 update: the `parameters` to send for going from `observed` to `desired` (objects or
// null): keys only in observed -> null, keys whose values differ -> the desired value (arrays
// compared order-insensitively; an empty array or null counts as missing), equal keys left
// out. An empty object when nothing differs.
Json ParameterDelta(const Json& observed, const Json& desired);

}  // namespace klutch::providers::anynines
