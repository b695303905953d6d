// The provider kubeconfig step of kubectl bind (bind-protocol.md §3.2; upstream's secret.go):
// where it points (server, the consumer's cluster namespace), keeping it in a Secret of
// klutch-bind that the APIServiceBindings refer to, and a client for the provider from it.
// Thread-compatible.
#pragma once

#include <memory>
#include <string>

#include "client/rest_client.h"
#include "core/status.h"
#include "kubectl_bind/output.h"

namespace klutch::kubectl_bind {

// The provider kubeconfig's server and the namespace of its current context (the consumer's
// cluster namespace); kBadRequest when either is missing.
struct ProviderTarget {
  std::string server;
  std::string cluster_namespace;
};
core::Result<ProviderTarget> ReadProviderKubeconfig(const std::string& kubeconfig);

// Stores `kubeconfig` in a Secret of klutch-bind: the existing one whose kubeconfig points at
// the same server and namespace is updated, otherwise a new one (generateName kubeconfig-)
// is created. Returns the Secret's name. With `dry_run`, nothing is written and the name is
// that of the Secret that would be updated ("" for a new one).
core::Result<std::string> StoreProviderKubeconfig(client::RestClient& app,
                                                  const std::string& kubeconfig, bool dry_run,
                                                  const BindOutput& out);

// A client for the provider from `kubeconfig`, in namespace `ns_override` when not empty,
// identifying itself as kubectl-bind.
core::Result<std::unique_ptr<client::RestClient>> ProviderClient(const std::string& kubeconfig,
                                                                 const std::string& ns_override);

}  // namespace klutch::kubectl_bind
