// The value transforms of function-patch-and-transform (and of legacy Resources-mode
// compositions): `map`, `match`, `math`, `string` and `convert`, applied in order to the
// value a patch carries. Each takes the transform's JSON as written in the Composition.
//
// Semantics follow function-patch-and-transform v0.9:
//  * map: the input must be a string; its key must exist (else an error naming the key).
//  * match: patterns of type `literal` (string equality) or `regexp` (a search with
//    RE2, Go's regexp syntax and linear time) tried in order; the first match gives its `result`.
//    No match gives `fallbackValue`, or the input itself with `fallbackTo: Input`.
//  * math: Multiply (by an integer), ClampMin, ClampMax on an integer or float input; integer
//    inputs stay integers.
//  * string: Format (Go fmt verbs %s %v %d %f %t %q %x and widths), Convert (ToUpper,
//    ToLower, ToBase64, FromBase64, ToJson, ToSha1, ToSha256, ToSha512, ToAdler32),
//    TrimPrefix, TrimSuffix, Regexp (the whole match, or `group`), Join (of an array, by
//    `separator`), Replace (`search` -> `replace`). Go's fmt is machinery/gofmt.h.
//  * convert: to string, int, int64, float64, bool, object or array; `format: quantity`
//    parses Kubernetes quantities into numbers, `format: json` parses JSON text.
// Errors are BadRequest with a message a user can act on ("transform 1 (string): regexp
// \"x\" had no matches"). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::compose {

using machinery::Json;

core::Result<Json> ApplyTransform(const Json& transform, const Json& input);

// Applies each transform of `transforms` (an array; null = none) in order. An error names the
// transform's index and type.
core::Result<Json> ApplyTransforms(const Json& transforms, Json input);

}  // namespace klutch::compose
