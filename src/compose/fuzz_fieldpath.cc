// libFuzzer target for Crossplane field paths (compose/fieldpath.h): any input parses or fails
// with BadRequest, never crashes, hangs or trips a sanitizer; a parsed path prints to text that
// parses back to the same path (and prints the same again); setting a value at a parsed path
// in an empty object and reading it back gives that value, and deleting it makes it absent.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "compose/fieldpath.h"
#include "core/status.h"

using klutch::compose::DeletePath;
using klutch::compose::FieldPath;
using klutch::compose::FieldPathToString;
using klutch::compose::GetPath;
using klutch::compose::Json;
using klutch::compose::MergePolicy;
using klutch::compose::ParseFieldPath;
using klutch::compose::SetPath;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseFieldPath(text);
  if (!parsed.ok()) {
    if (parsed.status().reason() != klutch::core::Reason::kBadRequest) __builtin_trap();
    return 0;
  }
  const FieldPath& path = *parsed;
  if (path.empty()) __builtin_trap();  // the empty path is an error, not an empty list

  // Printing is canonical: it re-parses to the same path and is a fixed point.
  const std::string printed = FieldPathToString(path);
  auto again = ParseFieldPath(printed);
  if (!again.ok() || *again != path) __builtin_trap();
  if (FieldPathToString(*again) != printed) __builtin_trap();

  // Writing into an empty object creates everything on the way, unless the first segment is
  // an index (an object is not an array) or an index lies too far past the end.
  Json root = Json::object();
  const Json value = Json{{"fuzz", text.size()}};
  klutch::core::Status set = SetPath(root, path, value);
  if (!set.ok()) {
    if (set.reason() != klutch::core::Reason::kBadRequest) __builtin_trap();
    bool explained = path.front().is_index;
    for (const auto& segment : path)
      explained = explained || (segment.is_index && segment.index > 10000);
    if (!explained) __builtin_trap();
    return 0;
  }
  const Json* got = GetPath(root, path);
  if (got == nullptr || *got != value) __builtin_trap();

  // Merging the same value again changes nothing, whatever the policy.
  for (MergePolicy policy :
       {MergePolicy::kMergeObjects, MergePolicy::kMergeObjectsAppendArrays,
        MergePolicy::kForceMergeObjects, MergePolicy::kForceMergeObjectsAppendArrays}) {
    Json copy = root;
    if (!SetPath(copy, path, value, policy).ok() || copy != root) __builtin_trap();
  }

  if (!DeletePath(root, path)) __builtin_trap();
  if (GetPath(root, path) != nullptr) __builtin_trap();
  return 0;
}
