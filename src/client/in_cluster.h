// In-cluster configuration: how a process running in a Pod reaches its API server, from the
// KUBERNETES_SERVICE_HOST/PORT environment and the service account files the kubelet mounts.
//
// The token is not frozen: the RestConfig names the token file, and Credentials::For re-reads
// it as the kubelet rotates it. Thread-safe (a pure function of its options and the files).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <functional>

#include "client/kubeconfig.h"
#include "core/status.h"

namespace klutch::client {

struct InClusterOptions {
  std::filesystem::path token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::filesystem::path ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::filesystem::path namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  std::function<const char*(const char*)> getenv = ::getenv;
};

// server https://<host>:<port> (IPv6 hosts bracketed), bearer_token (initial value) and
// bearer_token_file from the token file, ca_pem from the CA file (when it cannot be read the
// system roots are used and a warning is logged, as client-go does), namespace_ from
// $POD_NAMESPACE, else the namespace file, else "default".
// KUBERNETES_SERVICE_HOST or _PORT unset -> kNotFound ("unable to load in-cluster
// configuration, ..."): the caller is not in a cluster. A port that is not a number, or an
// unreadable token file -> kInvalid.
core::Result<RestConfig> InClusterConfig(const InClusterOptions& options = {});

}  // namespace klutch::client
