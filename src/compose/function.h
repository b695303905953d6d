// function-patch-and-transform, built in: what one Composition step (or a legacy
// `mode: Resources` composition) asks for a composite resource (XR).
//
// Given the step's input (`pt.fn.crossplane.io/v1beta1` Resources: `resources`, `patchSets`),
// the observed XR and the observed composed resources, Run() computes each composed
// resource's desired state (its `base` with FromComposite/Combine patches applied, recomputed
// from scratch every time, so a field the XR no longer supplies is dropped), the XR with
// every ToComposite/CombineToComposite patch applied from the observed resources, each
// resource's readiness (`readinessChecks`, default: condition Ready=True) and the connection
// details it contributes (`connectionDetails`). Patch types: FromCompositeFieldPath,
// ToCompositeFieldPath, CombineFromComposite, CombineToComposite, PatchSet, and the
// environment variants against an empty environment. Policies: fromFieldPath Optional /
// Required, toFieldPath Replace / MergeObjects / MergeObjectsAppendArrays / ForceMergeObjects /
// ForceMergeObjectsAppendArrays, and the legacy mergeOptions.
//
// Errors are fatal for the whole step (nothing gets applied) and name the resource and
// patch: `resources[0] "a8s-postgresql" patches[3] (spec.plan -> spec.volumeSize): transform
// 1 (map): key huge is not found`. Pure; thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::compose {

using machinery::Json;

// What the XR controller knows of one composed resource, keyed by composition resource name.
struct ObservedResource {
  Json object;                                    // as read from the cluster
  std::map<std::string, std::string> connection;  // its connection Secret's data (decoded)
};

struct DesiredResource {
  std::string name;  // the composition's resource name
  Json object;       // base + patches: apiVersion, kind, metadata (labels...), spec
  bool ready = false;
  // Readiness checks that failed, for the XR's message ("" when ready).
  std::string unready_reason;
};

struct StepResult {
  std::vector<DesiredResource> resources;  // in the order of the input
  Json composite;                          // the XR with ToComposite patches applied
  std::map<std::string, std::string> connection_details;
};

// Runs one patch-and-transform step. `input` is the step's input object (or, for
// `mode: Resources`, an object holding the composition's `resources` and `patchSets`).
core::Result<StepResult> RunPatchAndTransform(
    const Json& input, const Json& composite,
    const std::map<std::string, ObservedResource>& observed);

// Readiness of one observed object per the resource's readinessChecks (array; null or empty:
// the Ready=True condition). As in function-patch-and-transform, NonEmpty only needs the field
// to exist, and an absent condition counts as status Unknown. Returns "" when ready, else what is
// missing.
std::string CheckReadiness(const Json& checks, const Json& object);

}  // namespace klutch::compose
