// Kubernetes strategic merge patch (`application/strategic-merge-patch+json`), applied the way
// kube-apiserver applies it to built-in kinds.
//
// A strategic merge patch is a JSON merge patch (objects merge, `null` deletes, other values
// replace) whose list handling comes from the kind's OpenAPI schema:
//   - `x-kubernetes-patch-strategy` containing `merge` with `x-kubernetes-patch-merge-key: K`:
//     the list is merged by K. A patch element replaces nothing: it is merged recursively into
//     the element with the same K, or added when there is none.
//   - `merge` without a merge key (lists of primitives, e.g. metadata.finalizers): set union.
//   - any other list (the default, `replace`) is replaced by the patch list; a map whose strategy
//     is `replace` is replaced instead of merged. `retainKeys` in the strategy only matters to
//     patch generators; the `$retainKeys` directive below works on every map.
// Element order of merged lists follows kube-apiserver: the patch's elements keep the patch's
// relative order, the original's other elements keep theirs, and the two are interleaved using
// the original positions (so an element new to the list lands before the original elements it
// is not known to follow; kubectl apply pins the order with $setElementOrder).
//
// Directives:
//   {"$patch": "replace", ...}  in a map: the map becomes the rest of this map (no merge).
//   {"$patch": "delete"}        in a map: the map is removed from its parent (the top-level
//                               object becomes {}).
//   {"$patch": "merge", ...}    in a map: the default; accepted and ignored. (kube-apiserver
//                               rejects it; accepting the explicit default is harmless.)
//   list element {"$patch": "replace"}   the list becomes the patch's other elements.
//   list element {"K": v, "$patch": "delete"}  removes every element whose merge key K is v.
//   "$retainKeys": [names]      clears every member of the original map not named; every
//                               non-null member of the patch map must be named.
//   "$deleteFromPrimitiveList/<f>": [values]   removes those values from list <f>.
//   "$setElementOrder/<f>": [elements]         orders list <f> (merge lists only): elements are
//                               given by value (primitives) or as {"K": v} (maps); the patch
//                               list's elements must appear in it in the same relative order.
// Values that do not merge with anything (new members, replaced lists' elements) are normalized
// as if merged into nothing: their directives are applied and null members inside maps are
// dropped, so no directive ever reaches the stored object.
//
// Without a schema (an unknown SchemaCursor, or below a field the schema does not describe) every
// list is replaced and every map merges: a JSON merge patch plus the directives.
//
// Pure function; thread-safe.
#pragma once

#include "core/status.h"
#include "machinery/json.h"
#include "machinery/schema_cursor.h"

namespace klutch::machinery {

// Applies `patch` to `original` (both JSON objects) using the list semantics found through
// `schema`, which points at the schema of the kind (e.g. io.k8s.api.core.v1.ServiceAccount).
// Returns the patched object; `original` is not modified.
// Errors (BadRequest, naming the field path): the patch or original is not an object; an
// unknown `$patch` value; a malformed `$retainKeys`, `$setElementOrder/...` or
// `$deleteFromPrimitiveList/...` directive (wrong type, a patch member missing from
// `$retainKeys`, an order list that contradicts the patch list); an element of a list merged
// by key that is not an object or lacks the merge key; nesting deeper than 1000 levels.
core::Result<Json> ApplyStrategicMergePatch(const Json& original, const Json& patch,
                                            const SchemaCursor& schema);

}  // namespace klutch::machinery
