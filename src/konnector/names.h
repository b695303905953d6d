// The wire names of the binding protocol the konnector speaks (bind-protocol.md §1.10): the
// group, resources, annotations, labels, finalizer and field manager that upstream Klutch uses,
// so that a Control Plane or App Cluster set up by either implementation works with the other.
#pragma once

#include <string_view>

#include "machinery/object.h"

namespace klutch::konnector {

inline constexpr std::string_view kGroup = "klutch.anynines.com";
inline constexpr std::string_view kVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion = "klutch.anynines.com/v1alpha1";

inline const machinery::GroupVersionResource kApiServiceBindings{"klutch.anynines.com", "v1alpha1",
                                                                 "apiservicebindings"};
inline const machinery::GroupVersionResource kApiServiceExports{"klutch.anynines.com", "v1alpha1",
                                                                "apiserviceexports"};
inline const machinery::GroupVersionResource kApiServiceNamespaces{
    "klutch.anynines.com", "v1alpha1", "apiservicenamespaces"};
inline const machinery::GroupVersionResource kClusterBindings{"klutch.anynines.com", "v1alpha1",
                                                              "clusterbindings"};

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
// The field manager of server-side applies to the provider.
inline constexpr std::string_view kFieldManager = "klutch.anynines.com";
// The ClusterBinding in every cluster namespace is called this.
inline constexpr std::string_view kClusterBindingName = "cluster";

}  // namespace klutch::konnector
