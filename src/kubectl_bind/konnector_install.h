// The konnector step of kubectl bind (bind-protocol.md §3.3; upstream's konnector.go):
// installing or upgrading the konnector from the embedded deploy/konnector manifests, granting
// it the bound resources (never more: see CheckGrantable), and waiting until it serves the
// APIServiceBinding CRD. Thread-compatible.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "client/rest_client.h"
#include "core/status.h"
#include "kubectl_bind/output.h"
#include "machinery/json.h"

namespace klutch::kubectl_bind {

// The konnector's bound-resources role, which the CLI extends per bound API.
inline constexpr char kBoundResourcesRole[] = "klutch-bind-konnector-bound-resources";

// The default konnector image at `version` ("v1.2.3", as --konnector-version takes it);
// kBadRequest when it is not a semantic version with a leading v.
core::Result<std::string> KonnectorImageAt(std::string_view version);

struct KonnectorInstall {
  std::string image;   // "" = the default image at this CLI's version
  bool force = false;  // apply even when a konnector is installed (--konnector-image given)
  bool dry_run = false;
  std::vector<machinery::Json>* printed = nullptr;  // dry run: the objects that would be applied
};
// Installs the konnector from the embedded deploy/konnector manifests, create-or-update in
// file order (objects annotated bootstrap.klutch.anynines.com/create-only are never updated).
// Without `force`, an installed konnector is left alone unless its image is ours and older
// than this CLI (then upgraded); a newer one only draws a warning.
core::Status InstallKonnector(client::RestClient& app, const KonnectorInstall& options,
                              const BindOutput& out);

// OK when kubectl bind may grant the konnector `resource`.`group` and the resources of
// `claims`; otherwise the kForbidden GrantBoundResource answers (nothing is read or written).
core::Status CheckGrantable(const std::string& group, const std::string& resource,
                            const machinery::Json& claims);

// Adds rules for `resource`.`group` and its status subresource (and for each claimed resource
// of `claims` outside core Secrets/ConfigMaps) to ClusterRole kBoundResourcesRole, unless a
// rule already covers them; creates the role and its binding when missing. Never removes
// rules. kForbidden (nothing written) for wildcards, subresources, core resources other than
// Secrets and ConfigMaps, and the built-in Kubernetes groups (RBAC, workloads, admission, ...):
// a provider does not get to hand the konnector rights over the cluster itself.
core::Status GrantBoundResource(client::RestClient& app, const std::string& group,
                                const std::string& resource, const machinery::Json& claims,
                                bool dry_run, const BindOutput& out);

// Waits until the APIServiceBinding CRD is served in the App Cluster (the konnector installs
// it at start), printing a dot a second; kTimeout with what to check after `timeout`.
core::Status WaitForBindingCrd(client::RestClient& app, std::chrono::milliseconds timeout,
                               const BindOutput& out);

}  // namespace klutch::kubectl_bind
