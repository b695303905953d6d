// Names the composition engine gives and the constants it shares with Crossplane.
#pragma once

#include <string>
#include <string_view>

#include "machinery/object.h"

namespace klutch::compose {

inline constexpr std::string_view kFieldManager = "klutch-manager";
inline constexpr std::string_view kClaimFinalizer = "finalizer.apiextensions.crossplane.io";
inline constexpr std::string_view kXrdFinalizer = "defined.apiextensions.crossplane.io";
inline constexpr std::string_view kConnectionSecretType = "connection.crossplane.io/v1alpha1";
inline constexpr std::string_view kPatchAndTransform = "function-patch-and-transform";
// Hash of the desired state last applied to a composed resource (skips unchanged applies).
inline constexpr std::string_view kDesiredHashAnnotation =
    "compose.klutch.anynines.com/desired-hash";
// On an XR: the keys of the claim's annotations it carries (comma-separated), so that one the
// claim drops is dropped from the XR too.
inline constexpr std::string_view kClaimAnnotationsAnnotation =
    "compose.klutch.anynines.com/claim-annotations";

inline const machinery::GroupVersionResource kXrds{"apiextensions.crossplane.io", "v1",
                                                   "compositeresourcedefinitions"};
inline const machinery::GroupVersionResource kCompositions{"apiextensions.crossplane.io", "v1",
                                                           "compositions"};
inline const machinery::GroupVersionResource kCompositionRevisions{"apiextensions.crossplane.io",
                                                                   "v1", "compositionrevisions"};
inline const machinery::GroupVersionResource kFunctions{"pkg.crossplane.io", "v1", "functions"};

// `prefix` + "-" + five characters derived from `seed` (the alphabet of generateName), with
// the prefix cut so the result fits `max_len`: stable names that look generated, so a
// reconcile that crashed half-way finds what it created.
std::string DerivedName(std::string_view prefix, std::string_view seed, size_t max_len = 63);

}  // namespace klutch::compose
