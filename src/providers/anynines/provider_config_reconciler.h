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

// The ProviderConfig controller's logic (wired in anynines_provider.cc): for each ProviderConfig
// the usage count and finalizer, and the health check when due: health_interval after a success,
// health_retry_interval after a failure, at once when status.health.lastCheckTime is null or
// a resource found the service unreachable while it counted as healthy (RequestCheck, at most
// every 2 s). Thread-safe.
class ProviderConfigReconciler {
 public:
  explicit ProviderConfigReconciler(Context& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request);
  // Marks `name` for an early check; the caller queues it.
  void RequestCheck(const std::string& name);

 private:
  struct Health {
    bool checked = false;
    bool healthy = false;
    core::MonoTime at;
  };
  // Runs the check, writes status.health and the Event; returns the delay to the next check.
  std::chrono::milliseconds Check(const Json& pc, const Health& previous);

  Context& ctx_;
  core::Mutex mu_;
  std::map<std::string, Health> health_ GUARDED_BY(mu_);
  std::set<std::string> forced_ GUARDED_BY(mu_);
};

}  // namespace klutch::providers::anynines
