// Crossplane field paths: the `fromFieldPath` / `toFieldPath` strings of Composition patches,
// readiness checks and connection details, e.g. `spec.forProvider.manifest.spec.version`,
// `metadata.labels[crossplane.io/claim-name]`, `status.conditions[0].type`.
//
// A path is a list of segments separated by `.`; a bracketed segment is an array index when
// it is a non-negative decimal integer and a field name otherwise (so keys containing dots can
// be named; quotes around it, as in `annotations['a.b/c']`, are dropped as Crossplane does).
// Reading never fails on a missing field: it reports absence. Writing creates the
// objects and arrays on the way (an index past an array's end grows it with nulls) and fails
// only when the path crosses a value of the wrong type. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::compose {

using machinery::Json;

struct PathSegment {
  bool is_index = false;
  std::string field;  // when !is_index
  int64_t index = 0;  // when is_index
  bool operator==(const PathSegment&) const = default;
};

using FieldPath = std::vector<PathSegment>;

// Parses `text`. Errors (BadRequest) name the offset: an empty path or segment, an unclosed
// or empty bracket, a `]` without `[`, text right after `]` that is not `.` or `[`.
core::Result<FieldPath> ParseFieldPath(std::string_view text);
// The canonical text: fields joined with `.`, indices and fields that hold `.`, `[` or `]` in
// brackets.
std::string FieldPathToString(const FieldPath& path);

// The value at `path`, nullptr when any step is missing or of the wrong type.
const Json* GetPath(const Json& root, const FieldPath& path);

// How SetPath combines a new value with the one already there (Crossplane's toFieldPath
// policies): kReplace overwrites; the Merge policies merge objects recursively, keeping
// values already present (kMergeObjects*) or letting the new ones win (kForceMerge*), and
// with *AppendArrays append array elements not yet present instead of replacing arrays.
enum class MergePolicy {
  kReplace,
  kMergeObjects,
  kMergeObjectsAppendArrays,
  kForceMergeObjects,
  kForceMergeObjectsAppendArrays,
};

// Sets the value at `path` in `root`, creating what is missing. Error (BadRequest) naming the
// segment when an existing value on the way is not an object (for a field) or not an array
// (for an index), or an index is larger than 10000 past the end.
core::Status SetPath(Json& root, const FieldPath& path, Json value,
                     MergePolicy policy = MergePolicy::kReplace);

// Removes the value at `path`; false when there was none.
bool DeletePath(Json& root, const FieldPath& path);

}  // namespace klutch::compose
