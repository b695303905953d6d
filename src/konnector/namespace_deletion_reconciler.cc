// §4.6: a consumer namespace that is gone takes its APIServiceNamespace with it.
#include "konnector/namespace_deletion_reconciler.h"

#include "apis/klutch/register.h"
#include "client/dynamic.h"
#include "konnector/connection.h"

namespace klutch::konnector::internal {
namespace {

using client::ObjectPtr;
using reconcile::Request;
using reconcile::Result;

}  // namespace

NamespaceDeletionReconciler::NamespaceDeletionReconciler(Connection& connection)
    : connection_(connection), ctx_(connection.ctx()) {}

core::Result<Result> NamespaceDeletionReconciler::Reconcile(const Request& request) {
  const std::string& ns = request.name;
  if (!connection_.CachesSynced() || !ctx_.app_namespaces.HasSynced()) return Result::Done();
  if (ctx_.app_namespaces.indexer().Get(ns)) return Result::Done();
  if (!connection_.service_namespaces().indexer().Get(connection_.provider_ns() + "/" + ns))
    return Result::Done();
  auto r = client::ResourceClient(connection_.provider(), apis::klutch::kApiServiceNamespaces,
                                  connection_.provider_ns())
               .Delete(ns);
  ctx_.metrics.writes.Increment({{"cluster", "provider"}, {"verb", "delete"}});
  if (!r.ok() && !core::IsNotFound(r.status())) return r.status();
  return Result::Done();
}

}  // namespace klutch::konnector::internal
