// The ProviderConfig controller of provider-anynines (data-services.md §4.6): health checks
// into status.health with CheckSuccess / CheckFailure Events, status.users and the
// `in-use.crossplane.io` finalizer that keeps a used ProviderConfig from going away.
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "core/clock.h"
#include "core/status.h"
#include "core/sync.h"
#include "providers/anynines/context.h"
#include "reconcile/controller.h"

namespace klutch::providers::anynines {

// The ProviderConfig controller's logic (wired in runtime.cc): for each ProviderConfig the
// finalizer and usage count (a deleted one waits, with an InUse Event, while it is used), and
// the health check when due: health_interval after a success, health_retry_interval after a
// failure, at once when status.health.lastCheckTime is null or a resource found the service
// unreachable while it counted as healthy (RequestCheck, at most every 2 s). Thread-safe.
class ProviderConfigReconciler final : public reconcile::Reconciler {
 public:
  explicit ProviderConfigReconciler(Context& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;
  // Marks `name` for an early check; the caller queues it.
  void RequestCheck(const std::string& name);

 private:
  struct Pass;  // what the steps of one reconcile share
  struct Health {
    bool checked = false;
    bool healthy = false;
    core::MonoTime at;
  };
  // A ProviderConfig gone: its health and requested check are forgotten.
  void Forget(const std::string& name);
  // A deleted ProviderConfig: kept (InUse Event) while used, else the finalizer removed.
  core::Result<reconcile::Result> Delete(Pass& p);
  core::Status EnsureFinalizer(Pass& p);
  // status.users.
  core::Status RecordUsers(Pass& p);
  // The health check when due; the delay to the next one.
  core::Result<reconcile::Result> CheckHealthWhenDue(Pass& p);
  // After a restart: the last check's outcome as status.health records it, into `h`.
  void RestoreHealth(const Json& pc, core::MonoTime now, Health& h);
  // Runs the check, writes status.health and the Event; returns the delay to the next check.
  std::chrono::milliseconds Check(const Json& pc, const Health& previous);

  Context& ctx_;
  core::Mutex mu_;
  std::map<std::string, Health> health_ GUARDED_BY(mu_);
  std::set<std::string> forced_ GUARDED_BY(mu_);
};

}  // namespace klutch::providers::anynines
