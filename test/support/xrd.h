// Test helper: the claim CustomResourceDefinition Crossplane generates from a
// CompositeResourceDefinition (XRD), so tests can serve Klutch's upstream XRDs before the
// composition engine (`klutch manager`) exists.
//
// The generated CRD is namespaced, named after claimNames, with one version per XRD
// version; its schema is the XRD's (unknown keywords such as Klutch's `supported:` anchor
// holder dropped, as decoding into JSONSchemaProps drops them) plus the fields Crossplane
// adds to every claim: spec.compositionRef, compositionSelector, compositionRevisionRef,
// compositionUpdatePolicy, compositeDeletePolicy, resourceRef, writeConnectionSecretToRef,
// publishConnectionDetailsTo and status.conditions/connectionDetails.
#pragma once

#include "machinery/json.h"

namespace klutch::testing {

machinery::Json ClaimCrdFromXrd(const machinery::Json& xrd);

}  // namespace klutch::testing
