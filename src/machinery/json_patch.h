// RFC 6902 JSON Patch (`application/json-patch+json`), applied the way kube-apiserver applies it.
//
// A patch is an array of operations (add, remove, replace, move, copy, test) whose targets are
// RFC 6901 JSON Pointers. Operations apply in order to a private copy of the document; the first
// failing operation aborts the whole patch and the caller's document is never touched. Failures
// that depend on the document (a missing path, a failed `test`) are reported as Invalid (HTTP 422)
// with messages in the style of github.com/evanphx/json-patch, which kube-apiserver uses, e.g.
// `testing value /data/color failed: test failed`. A patch that is malformed in itself (not an
// array, unknown op, missing member, bad pointer syntax) is rejected as BadRequest before any
// operation runs.
//
// Hostile input is bounded: at most JsonPatchOptions::max_operations operations (kube-apiserver's
// limit of 10,000; more -> RequestEntityTooLarge), and the total size that `copy` operations may
// add to the document is capped (JsonPatchOptions::max_copy_bytes, kube-apiserver's 3 MiB default
// for --json-patch-max-copy-bytes; exceeding it -> Invalid), so a chain of copies that doubles the
// document each time cannot exhaust memory. `add`/`replace`/`test` values come from the patch and
// so grow the document by at most the patch size; `move` does not grow it.
//
// Pure functions; thread-safe.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

struct JsonPatchOptions {
  // More operations than this -> RequestEntityTooLarge (kube-apiserver: maxJSONPatchOperations).
  size_t max_operations = 10000;
  // Budget for the document growth caused by `copy`, in bytes of compact JSON (approximate:
  // string escapes are not counted). Exceeding it -> Invalid.
  size_t max_copy_bytes = 3 * 1024 * 1024;
};

// Applies `patch` (a JSON array of RFC 6902 operations) to a copy of `doc` and returns the result.
// Errors:
//   BadRequest            the patch is not an array of well-formed operations (names the
//                         operation index and the problem); nothing is applied.
//   RequestEntityTooLarge more than options.max_operations operations.
//   Invalid               an operation does not apply to the document (missing path, index out
//                         of range, `test` mismatch, move into own child, copy budget exceeded).
// Array indices follow RFC 6901 strictly: decimal without leading zeros, no negative indices;
// "-" names the position after the last element and is only valid as the last token of an
// `add` (or `move`/`copy` destination) path. `test` compares with JSON equality (numbers by
// value, objects regardless of member order).
core::Result<Json> ApplyJsonPatch(const Json& doc, const Json& patch,
                                  const JsonPatchOptions& options = {});

}  // namespace klutch::machinery
