// Which Composition (and CompositionRevision) composes an XR, Crossplane's way, and the
// composed resources that choice implies. Pure functions over cached objects.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/informer.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::compose {

using machinery::Json;

struct Selection {
  std::string composition;    // name
  std::string revision;       // CompositionRevision name; "" when none exists yet
  Json spec;                  // the revision's spec (or the Composition's when no revision)
  std::string update_policy;  // Automatic | Manual
};

// Picks the composition for an XR (or a claim, before its XR exists) of `api_version`/`kind`
// with spec `spec`: the XRD's enforcedCompositionRef, else spec.compositionRef, else the
// first (by name) Composition matching spec.compositionSelector, else the XRD's
// defaultCompositionRef, else the only Composition for the type. Then the revision:
// Automatic (spec.compositionUpdatePolicy, else the XRD's default) takes the newest revision,
// Manual keeps spec.compositionRevisionRef while it exists. Errors (NotFound / BadRequest)
// say what to fix and list the compositions for the type (sorted): `composition "x" not
// found: create it or change spec.compositionRef.name; compositions for T: "a", "b"`.
core::Result<Selection> SelectComposition(const Json& spec, std::string_view api_version,
                                          std::string_view kind, const Json& xrd,
                                          const std::vector<client::ObjectPtr>& compositions,
                                          const std::vector<client::ObjectPtr>& revisions);

// The composed resource of composition resource `resource` for XR `xr_name`.
// A CompositionRevision's spec.revision (0 when unset).
int64_t RevisionNumber(const Json& revision);

std::string ComposedName(std::string_view xr_name, std::string_view resource);

// The step inputs to run for a composition spec: each Pipeline step's input (every step
// must use function-patch-and-transform, by name or through a Function whose package is
// it), or for mode Resources one input made of spec.resources and spec.patchSets.
core::Result<std::vector<Json>> StepInputs(const Json& composition_spec,
                                           const std::vector<client::ObjectPtr>& functions);

// spec.resourceRefs an XR will have once composed: {apiVersion, kind, name} per resource of
// every step, in order.
Json PlannedResourceRefs(const std::vector<Json>& inputs, std::string_view xr_name);

}  // namespace klutch::compose
