// CRD -> APIServiceExport spec snapshot and its hash (bind-protocol.md §2.8). The snapshot is
// the part of an export's spec that mirrors the provider's CustomResourceDefinition (group,
// names, scope, versions); the hash, kept in the export's source-spec-hash annotation, tells
// the export controller when the CRD changed. Only the backend computes and compares hashes,
// so they need only be stable across our own releases (a hash written by another
// implementation just causes one rewrite of the export's spec). Pure functions; thread-safe.
#pragma once

#include <string>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::bind {

using machinery::Json;

// The snapshot of an apiextensions.k8s.io/v1 CustomResourceDefinition: group; names (plural,
// singular, shortNames, kind, listKind, categories as present); scope; one entry per served
// version (name, served, storage, deprecated when true, deprecationWarning,
// additionalPrinterColumns, subresources (always, maybe {}), schema.openAPIV3Schema). Under
// webhook conversion only the storage version is kept, marked storage. kInvalid naming the
// CRD and the field when group, names.plural, names.kind, scope, a served version, or a
// served version's schema is missing.
core::Result<Json> CrdSnapshot(const Json& crd);
// The hash of a snapshot: Sha224Base62 of its compact JSON (keys sorted).
std::string SnapshotHash(const Json& snapshot);
// `export_spec` with its CRD part (group, names, scope, versions) replaced by `snapshot`;
// permissionClaims, informerScope and clusterScopedIsolation are kept.
Json WithSnapshot(Json export_spec, const Json& snapshot);

}  // namespace klutch::bind
