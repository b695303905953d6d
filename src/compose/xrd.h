// The CustomResourceDefinitions Crossplane generates from a CompositeResourceDefinition
// (XRD): the cluster-scoped composite resource (XR) CRD and, when the XRD has claimNames, the
// namespaced claim CRD.
//
// Both take the XRD's group, names and versions; each version's schema is the XRD's with
// keywords apiextensions does not know dropped (Klutch's `supported:` anchor holder), then
// the fields Crossplane adds (spec compositionRef, compositionSelector,
// compositionRevisionRef, compositionRevisionSelector, compositionUpdatePolicy,
// writeConnectionSecretToRef, publishConnectionDetailsTo, and on the XR claimRef and
// resourceRefs, on the claim compositeDeletePolicy and resourceRef; status conditions and
// connectionDetails), each described for kubectl explain. Printer columns: the XRD's, then
// SYNCED, READY, and COMPOSITION (XR) or CONNECTION-SECRET (claim), then AGE. Categories
// `composite` / `claim`. CEL rules and other x-kubernetes-* keywords are kept. Each CRD is
// controller-owned by the XRD. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::compose {

using machinery::Json;

struct GeneratedCrds {
  Json composite;             // the XR CRD
  std::optional<Json> claim;  // the claim CRD, when the XRD offers claims
};

// BadRequest naming the field when the XRD lacks what a CRD needs (spec.group,
// spec.names.kind/plural, versions with schemas, claimNames.kind/plural when claimNames set).
core::Result<GeneratedCrds> CrdsForXrd(const Json& xrd);

// Labels and annotations Crossplane puts on claims, XRs and composed resources.
inline constexpr std::string_view kLabelClaimName = "crossplane.io/claim-name";
inline constexpr std::string_view kLabelClaimNamespace = "crossplane.io/claim-namespace";
inline constexpr std::string_view kLabelComposite = "crossplane.io/composite";
inline constexpr std::string_view kAnnotationResourceName =
    "crossplane.io/composition-resource-name";
inline constexpr std::string_view kAnnotationPaused = "crossplane.io/paused";
inline constexpr std::string_view kLabelCompositionName = "crossplane.io/composition-name";
inline constexpr std::string_view kLabelCompositionHash = "crossplane.io/composition-hash";
inline constexpr std::string_view kLabelXrdName = "crossplane.io/xrd";

}  // namespace klutch::compose
