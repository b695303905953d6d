// ConsumerQuotaReconciler (klutch-backend-consumerquota): ResourceQuota `klutch-consumer`
// with the object counts of BackendControllersOptions::consumer_quota in every cluster
// namespace made by /bind and in each provider namespace made for one; re-created when
// deleted, its claim kinds following the exports of the cluster namespace. Keyed by namespace
// name (request.ns empty). Nothing here is the user's to fix, so there is no Failed: a failed
// write is retried. Reads the informers' caches; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bind/backend_context.h"
#include "reconcile/controller.h"
#include "reconcile/step.h"

namespace klutch::bind {

inline const client::GroupVersionResource kResourceQuotas{"", "v1", "resourcequotas"};

// spec.hard of ResourceQuota `klutch-consumer` for a consumer whose cluster namespace holds
// `exports` (see BackendControllersOptions::consumer_quota): "count/<resource>" -> count as a
// string, sorted; empty when `quota` is.
client::Json QuotaHard(const std::map<std::string, int64_t>& quota,
                       const std::vector<client::ObjectPtr>& exports);

class ConsumerQuotaReconciler final : public reconcile::Reconciler {
 public:
  // `ctx` must outlive the reconciler; ctx.quotas is set.
  explicit ConsumerQuotaReconciler(BackendContext& ctx) : ctx_(ctx) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  struct Pass;  // what the steps of one reconcile share

  // The cluster namespace `ns` is (made by /bind) or was made for; nullopt when neither.
  std::optional<std::string> ClusterNamespaceOf(const client::Json& ns) const;
  // The quota created when the cache has none (the pass ends), else it goes on.
  reconcile::Step CreateQuota(Pass& pass);
  // The stored quota's hard counts and label as wanted.
  core::Result<reconcile::Result> UpdateQuota(Pass& pass);

  BackendContext& ctx_;
};

}  // namespace klutch::bind
