#include "machinery/merge_patch.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace klutch::machinery {

namespace {

// Merges `patch` into `target` in place (RFC 7386 §2).
void MergeInto(Json& target, const Json& patch) {
  if (!patch.is_object()) {
    target = patch;
    return;
  }
  if (!target.is_object()) target = Json::object();
  for (const auto& [name, value] : patch.items()) {
    if (value.is_null()) {
      target.erase(name);
      continue;
    }
    auto it = target.find(name);
    if (it == target.end()) {
      // Merging into nothing still strips nulls from nested objects.
      Json fresh;
      MergeInto(fresh, value);
      target[name] = std::move(fresh);
    } else {
      MergeInto(*it, value);
    }
  }
}

}  // namespace

Json ApplyMergePatch(const Json& target, const Json& patch) {
  if (!patch.is_object()) return patch;
  Json result = target;
  MergeInto(result, patch);
  return result;
}

Json CreateMergePatch(const Json& original, const Json& modified) {
  if (!original.is_object() || !modified.is_object()) return modified;
  Json patch = Json::object();
  for (const auto& [name, value] : original.items()) {
    if (!modified.contains(name)) patch[name] = nullptr;
  }
  for (const auto& [name, value] : modified.items()) {
    auto it = original.find(name);
    if (it == original.end()) {
      patch[name] = value;
    } else if (*it != value) {
      patch[name] = CreateMergePatch(*it, value);
    }
  }
  return patch;
}

}  // namespace klutch::machinery
