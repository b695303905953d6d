// Manifests our binaries apply to clusters, embedded from deploy/ at build time, so a binary
// installed anywhere carries the same files a platform operator applies with kubectl. Today:
// the konnector (deploy/konnector/*.yaml), which `kubectl bind` installs into an App Cluster;
// Klutch's package and provider-anynines (deploy/package, deploy/provider-anynines), which
// `klutch up` applies to its Control Plane; the a8s CRDs `klutch operator` installs.
//
// The data is immutable and statically initialized; every function here is thread-safe.
#pragma once

#include <string>
#include <vector>

namespace klutch::apis {

struct ManifestFile {
  std::string name;  // the file name, such as "deployment.yaml"
  std::string text;  // its YAML (possibly several documents)
};

// deploy/konnector/*.yaml except kustomization.yaml, in the order they must be applied:
// namespace, service account, RBAC, then the Deployment.
std::vector<ManifestFile> KonnectorManifests();

// provider-anynines' CRDs, then the package's XRDs, its Compositions and the provider-kubernetes
// ProviderConfig its a8s Compositions name: the order a Control Plane needs them in (names
// prefixed "crds/", "definitions/", "compositions/", "providerconfigs/").
std::vector<ManifestFile> PackageManifests();

// The ProviderConfigs for an OSB broker and a9s backup manager per data service, with
// `${KLUTCH_BROKER_URL}` standing for the broker's base URL (no trailing slash).
std::vector<ManifestFile> ProviderConfigTemplates();

// The a8s CRDs (deploy/operator/crds: Postgresql, ServiceBinding, Backup, Restore) that
// `klutch operator` installs and serves (names prefixed "crds/").
std::vector<ManifestFile> A8sCrds();

}  // namespace klutch::apis
