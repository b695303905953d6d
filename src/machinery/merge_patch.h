// RFC 7386 JSON Merge Patch (`application/merge-patch+json`): applying one, and computing the
// smallest one between two documents.
//
// A merge patch mirrors the shape of the target: objects merge member by member, `null` deletes
// a member, and anything else (arrays included) replaces the target value wholesale. Merge
// patches cannot express "set this member to null" nor edit an array in place; that is the
// format's design, not a limitation of this implementation.
//
// Both functions recurse once per level of object nesting in their inputs; callers decode
// untrusted JSON with a nesting bound first. Pure functions; thread-safe.
#pragma once

#include "machinery/json.h"

namespace klutch::machinery {

// Returns `target` with `patch` merged in, exactly as RFC 7386 §2 defines MergePatch: a
// non-object patch replaces the target; an object patch turns a non-object target into {} and
// then, per member, deletes it (null) or merges recursively. Never fails.
Json ApplyMergePatch(const Json& target, const Json& patch);

// Returns the smallest merge patch P with ApplyMergePatch(original, P) == modified:
//   - both objects: members of `original` missing from `modified` become null, changed members
//     recurse (objects) or are replaced (everything else, arrays wholesale), equal ones are left
//     out; identical objects give {}.
//   - otherwise: `modified` itself (a non-object patch replaces the target).
// Exactness caveat inherited from RFC 7386: null values inside objects of `modified` cannot be
// represented (applying the patch drops them), so the round trip holds for documents whose
// objects have no null members.
Json CreateMergePatch(const Json& original, const Json& modified);

}  // namespace klutch::machinery
