// Reconcilers of the API server's namespace controllers, on the src/reconcile framework:
//
// NamespaceReconciler (klutch-apiserver-namespace): a namespace being deleted has its
// content removed (deletecollection of every namespaced resource discovery lists, then
// waiting for objects held by finalizers), and once two passes in a row find it empty, the
// `kubernetes` finalizer is removed through the finalize subresource; the second pass
// covers a create admitted just before the namespace turned Terminating.
//
// NamespaceDefaultsReconciler (klutch-apiserver-namespace-defaults): every active namespace
// has a "default" ServiceAccount and the "kube-root-ca.crt" ConfigMap holding the cluster
// CA; both come back when deleted and the ConfigMap is reset when edited.
//
// Both read from informer caches and write through the REST client. Thread-safe.
#pragma once

#include <map>
#include <string>

#include "client/discovery.h"
#include "client/informer.h"
#include "core/clock.h"
#include "core/sync.h"
#include "reconcile/controller.h"

namespace klutch::controllers {

inline constexpr const char* kRootCaConfigMap = "kube-root-ca.crt";

class NamespaceReconciler final : public reconcile::Reconciler {
 public:
  NamespaceReconciler(client::RestClient& rest, client::Indexer& namespaces,
                      client::RestMapper& mapper, const core::Clock& clock)
      : rest_(rest), namespaces_(namespaces), mapper_(mapper), clock_(clock) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  client::RestClient& rest_;
  client::Indexer& namespaces_;
  client::RestMapper& mapper_;
  const core::Clock& clock_;
  core::Mutex mu_;
  // When each Terminating namespace was first found empty (monotonic).
  std::map<std::string, core::MonoTime> empty_since_ GUARDED_BY(mu_);
};

class NamespaceDefaultsReconciler final : public reconcile::Reconciler {
 public:
  NamespaceDefaultsReconciler(client::RestClient& rest, client::Indexer& namespaces,
                              client::Indexer& service_accounts, client::Indexer& config_maps,
                              std::string ca_pem)
      : rest_(rest),
        namespaces_(namespaces),
        service_accounts_(service_accounts),
        config_maps_(config_maps),
        ca_pem_(std::move(ca_pem)) {}
  core::Result<reconcile::Result> Reconcile(const reconcile::Request& request) override;

 private:
  client::RestClient& rest_;
  client::Indexer& namespaces_;
  client::Indexer& service_accounts_;
  client::Indexer& config_maps_;
  std::string ca_pem_;
};

}  // namespace klutch::controllers
