// Names that belong to the APIServiceExport and the objects of an exported resource
// (bind-protocol.md §1.2, §1.10, §4): the backend's spec hash on an export, and what the
// konnector puts on the objects it syncs between App Cluster and provider. Constants only;
// thread-safe.
#pragma once

#include <string_view>

namespace klutch::apis::klutch {

// On an APIServiceExport: the hash of the CRD snapshot its spec was made from (§2.8).
inline constexpr std::string_view kSourceSpecHashAnnotation =
    "klutch.anynines.com/source-spec-hash";

// Put on every bound object on both sides ("true").
inline constexpr std::string_view kBoundAnnotation = "klutch.anynines.com/bound";
// On provider copies of cluster-scoped objects: the cluster namespace they belong to.
inline constexpr std::string_view kClusterNamespaceAnnotation =
    "klutch.anynines.com/cluster-namespace";
// On claimed Secrets/ConfigMaps: which side owns the object ("Provider" or "Consumer").
inline constexpr std::string_view kResourceOwnerAnnotation = "klutch.anynines.com/resource-owner";
// The finalizer on consumer-side bound objects until their provider copy is deleted.
inline constexpr std::string_view kSyncerFinalizer = "klutch.anynines.com/syncer";
// On provider copies: a hash of what the konnector last applied (spec, labels, annotations),
// so a consumer-side change, including a removed field, is noticed without owning a copy of
// the previous spec. Ours, not upstream's (ADR 0009).
inline constexpr std::string_view kAppliedHashAnnotation = "klutch.anynines.com/applied-hash";
// The condition the konnector sets on consumer objects (ADR 0009). Not "Synced": Crossplane
// claims carry their own Synced, which is copied down from the provider.
inline constexpr std::string_view kControlPlaneSyncedCondition = "ControlPlaneSynced";
// The field manager of the konnector's server-side applies to the provider (upstream's).
inline constexpr std::string_view kKonnectorFieldManager = "klutch.anynines.com";

}  // namespace klutch::apis::klutch
