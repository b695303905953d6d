#include "machinery/strategic_merge_patch.h"

#include <algorithm>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::machinery {

namespace {

constexpr std::string_view kDirectiveMarker = "$patch";
constexpr std::string_view kRetainKeys = "$retainKeys";
constexpr std::string_view kSetElementOrder = "$setElementOrder";
constexpr std::string_view kDeleteFromPrimitiveList = "$deleteFromPrimitiveList";
// Far beyond any Kubernetes object, well within the stack.
constexpr int kMaxDepth = 1000;

// Where in the object an error is, rendered only when one happens ("spec.containers[2].env").
struct PatchPath {
  PatchPath(const PatchPath* parent, std::string_view field) : parent(parent), field(field) {}
  PatchPath(const PatchPath* parent, size_t index) : parent(parent), index(index), is_index(true) {}
  const PatchPath* parent;
  std::string_view field;
  size_t index = 0;
  bool is_index = false;
};

std::string Render(const PatchPath* path) {
  std::vector<const PatchPath*> chain;
  for (; path != nullptr; path = path->parent) chain.push_back(path);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if ((*it)->is_index) {
      out += fmt::format("[{}]", (*it)->index);
    } else {
      if (!out.empty()) out += '.';
      out += (*it)->field;
    }
  }
  return out;
}

core::Status Error(const PatchPath* path, std::string_view message) {
  std::string where = Render(path);
  if (where.empty()) return core::BadRequest(std::string(message));
  return core::BadRequest(fmt::format("{}: {}", where, message));
}

// Compact JSON for messages, cut so that a hostile patch cannot make a huge error.
std::string Excerpt(const Json& value) {
  std::string text = Dump(value);
  constexpr size_t kMax = 200;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::string_view DirectiveValue(const Json& marker) {
  return marker.is_string() ? std::string_view(marker.get_ref<const std::string&>())
                            : std::string_view();
}

std::string UnknownPatchType(const Json& marker, const Json& map) {
  return fmt::format("unknown patch type: {} in map: {}",
                     marker.is_string() ? marker.get<std::string>() : Excerpt(marker),
                     Excerpt(map));
}

std::string NoMergeKey(const Json& map, std::string_view key) {
  return fmt::format("map: {} does not contain declared merge key: {}", Excerpt(map), key);
}

bool IsDirectiveKey(std::string_view name) {
  return name == kDirectiveMarker || name == kRetainKeys || name.starts_with(kSetElementOrder) ||
         name.starts_with(kDeleteFromPrimitiveList);
}

std::string StringMember(const Json& node, const char* name) {
  auto it = node.find(name);
  return it != node.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Patch metadata of one field of an object schema.
struct FieldMeta {
  SchemaCursor schema;
  bool merge = false;    // strategy contains "merge"
  bool replace = false;  // strategy contains "replace"
  std::string merge_key;
};

FieldMeta LookupField(const SchemaCursor& parent, const std::string& name) {
  FieldMeta meta;
  meta.schema = parent.Field(name);
  std::string strategy;
  // Kubernetes puts the extensions beside the $ref (often inside an allOf wrapper that
  // SchemaCursor resolves away), so read the property node as written first.
  if (const Json* node = parent.node(); node != nullptr && node->is_object()) {
    auto props = node->find("properties");
    if (props != node->end() && props->is_object()) {
      auto raw = props->find(name);
      if (raw != props->end() && raw->is_object()) {
        strategy = StringMember(*raw, "x-kubernetes-patch-strategy");
        meta.merge_key = StringMember(*raw, "x-kubernetes-patch-merge-key");
      }
    }
  }
  if (strategy.empty()) strategy = meta.schema.Extension("x-kubernetes-patch-strategy");
  if (meta.merge_key.empty())
    meta.merge_key = meta.schema.Extension("x-kubernetes-patch-merge-key");
  for (std::string_view part : core::Split(strategy, ',')) {
    part = core::Trim(part);
    if (part == "merge") meta.merge = true;
    if (part == "replace") meta.replace = true;
  }
  return meta;
}

// What identifies a list element: its merge key's value, or the element itself for lists of
// primitives (empty key). nullptr when an element has no identity.
const Json* IdentityOf(const Json& element, const std::string& key) {
  if (key.empty()) return &element;
  if (!element.is_object()) return nullptr;
  auto it = element.find(key);
  return it == element.end() ? nullptr : &*it;
}

using Positions = std::map<Json, size_t>;  // identity -> first position

// Orders a merged list as kube-apiserver does. Elements whose identity has a rank (the patch's
// elements, or those named by $setElementOrder) are sorted by rank; the others keep their
// order. The two sequences are then interleaved: the next unranked element goes first only if
// both it and the next ranked element were in the original list and it came first there.
Json Arrange(Json&& merged, const Positions& rank, const Positions& original,
             const std::string& key) {
  std::vector<std::pair<size_t, Json>> ranked;
  std::vector<Json> others;
  for (Json& element : merged) {
    const Json* id = IdentityOf(element, key);
    auto it = id != nullptr ? rank.find(*id) : rank.end();
    if (it != rank.end()) {
      ranked.emplace_back(it->second, std::move(element));
    } else {
      others.push_back(std::move(element));
    }
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  auto original_position = [&](const Json& element) -> std::optional<size_t> {
    const Json* id = IdentityOf(element, key);
    if (id == nullptr) return std::nullopt;
    auto it = original.find(*id);
    if (it == original.end()) return std::nullopt;
    return it->second;
  };
  Json out = Json::array();
  size_t i = 0;
  size_t j = 0;
  while (i < others.size() && j < ranked.size()) {
    std::optional<size_t> left = original_position(others[i]);
    std::optional<size_t> right = original_position(ranked[j].second);
    if (left && right && *left < *right) {
      out.push_back(std::move(others[i++]));
    } else {
      out.push_back(std::move(ranked[j++].second));
    }
  }
  for (; i < others.size(); ++i) out.push_back(std::move(others[i]));
  for (; j < ranked.size(); ++j) out.push_back(std::move(ranked[j].second));
  return out;
}

Positions OriginalPositions(const Json* list, const std::string& key) {
  Positions positions;
  if (list == nullptr || !list->is_array()) return positions;
  for (size_t i = 0; i < list->size(); ++i) {
    if (const Json* id = IdentityOf((*list)[i], key)) positions.emplace(*id, i);
  }
  return positions;
}

enum class Outcome { kKeep, kDelete };

core::Result<Outcome> MergeMapInto(Json& target, const Json& patch, const SchemaCursor& schema,
                                   const PatchPath* path, int depth);

core::Status TooDeep(const PatchPath* path) {
  return Error(path, fmt::format("patch is nested more than {} levels deep", kMaxDepth));
}

// The value a list takes when it is replaced by `patch`: each element normalized as if merged
// into nothing. Elements that are bare directives carry no data and are dropped.
core::Result<Json> NormalizeList(const Json& patch, const SchemaCursor& items,
                                 const PatchPath* path, int depth) {
  if (depth > kMaxDepth) return TooDeep(path);
  Json out = Json::array();
  for (size_t i = 0; i < patch.size(); ++i) {
    const Json& element = patch[i];
    PatchPath child(path, i);
    if (element.is_object()) {
      if (auto marker = element.find(kDirectiveMarker); marker != element.end()) {
        std::string_view directive = DirectiveValue(*marker);
        if (directive != "replace" && directive != "delete" && directive != "merge") {
          return Error(&child, UnknownPatchType(*marker, element));
        }
        continue;
      }
      Json fresh = Json::object();
      KLUTCH_ASSIGN_OR_RETURN(Outcome outcome,
                              MergeMapInto(fresh, element, items, &child, depth + 1));
      if (outcome == Outcome::kKeep) out.push_back(std::move(fresh));
    } else if (element.is_array()) {
      KLUTCH_ASSIGN_OR_RETURN(Json nested,
                              NormalizeList(element, items.Items(), &child, depth + 1));
      out.push_back(std::move(nested));
    } else {
      out.push_back(element);
    }
  }
  return out;
}

// A list merged by `key`. `original` (may be null) is consumed.
core::Result<Json> MergeKeyedList(Json* original, const Json& patch, const std::string& key,
                                  const SchemaCursor& items, const PatchPath* path, int depth) {
  std::vector<size_t> regular;  // indices of the patch's data elements
  std::set<Json> deleted;
  bool replace = false;
  for (size_t i = 0; i < patch.size(); ++i) {
    const Json& element = patch[i];
    PatchPath child(path, i);
    if (!element.is_object()) {
      return Error(&child, fmt::format("expected an object in a list merged by key \"{}\", got {}",
                                       key, element.type_name()));
    }
    if (auto marker = element.find(kDirectiveMarker); marker != element.end()) {
      std::string_view directive = DirectiveValue(*marker);
      if (directive == "delete") {
        auto value = element.find(key);
        if (value == element.end()) return Error(&child, NoMergeKey(element, key));
        deleted.insert(*value);
        continue;
      }
      if (directive == "replace") {
        replace = true;
        continue;
      }
      if (directive != "merge") return Error(&child, UnknownPatchType(*marker, element));
      if (element.size() == 1) continue;  // a bare {"$patch": "merge"}: the list merges anyway
    }
    if (!element.contains(key)) return Error(&child, NoMergeKey(element, key));
    regular.push_back(i);
  }

  if (replace) {
    Json out = Json::array();
    for (size_t i : regular) {
      PatchPath child(path, i);
      Json fresh = Json::object();
      KLUTCH_ASSIGN_OR_RETURN(Outcome outcome,
                              MergeMapInto(fresh, patch[i], items, &child, depth + 1));
      if (outcome == Outcome::kKeep) out.push_back(std::move(fresh));
    }
    return out;
  }

  Positions original_positions = OriginalPositions(original, key);
  Json working = Json::array();
  if (original != nullptr && original->is_array()) {
    for (Json& element : *original) {
      const Json* id = IdentityOf(element, key);
      if (id != nullptr && deleted.count(*id) != 0) continue;
      working.push_back(std::move(element));
    }
  }
  Positions index = OriginalPositions(&working, key);
  Positions rank;
  for (size_t n = 0; n < regular.size(); ++n) {
    const Json& element = patch[regular[n]];
    PatchPath child(path, regular[n]);
    const Json& id = *element.find(key);
    rank.emplace(id, n);
    if (auto it = index.find(id); it != index.end()) {
      KLUTCH_ASSIGN_OR_RETURN(Outcome outcome,
                              MergeMapInto(working[it->second], element, items, &child, depth + 1));
      (void)outcome;  // only a "$patch: delete" element deletes, and those were taken out above
    } else {
      Json fresh = Json::object();
      KLUTCH_ASSIGN_OR_RETURN(Outcome outcome,
                              MergeMapInto(fresh, element, items, &child, depth + 1));
      if (outcome == Outcome::kKeep) {
        index.emplace(id, working.size());
        working.push_back(std::move(fresh));
      }
    }
  }
  return Arrange(std::move(working), rank, original_positions, key);
}

// A list of primitives merged as a set. `original` (may be null) is consumed. Falls back to
// replacement when either side holds objects or lists, which only a schema mismatch produces.
core::Result<Json> MergePrimitiveList(Json* original, const Json& patch, const SchemaCursor& items,
                                      const PatchPath* path, int depth) {
  auto is_directive = [](const Json& e) { return e.is_object() && e.contains(kDirectiveMarker); };
  bool primitives = std::none_of(patch.begin(), patch.end(), [&](const Json& e) {
    return e.is_structured() && !is_directive(e);
  });
  if (original != nullptr && original->is_array()) {
    primitives = primitives && std::none_of(original->begin(), original->end(),
                                            [](const Json& e) { return e.is_structured(); });
  }
  if (!primitives) return NormalizeList(patch, items, path, depth);

  bool replace = false;
  std::vector<const Json*> values;
  for (size_t i = 0; i < patch.size(); ++i) {
    const Json& element = patch[i];
    if (!is_directive(element)) {
      values.push_back(&element);
      continue;
    }
    PatchPath child(path, i);
    const Json& marker = *element.find(kDirectiveMarker);
    std::string_view directive = DirectiveValue(marker);
    if (directive == "replace") {
      replace = true;
    } else if (directive == "delete") {
      return Error(&child,
                   "$patch: delete needs a merge key; remove values from a list of primitives "
                   "with $deleteFromPrimitiveList/<field>");
    } else if (directive != "merge") {
      return Error(&child, UnknownPatchType(marker, element));
    }
  }

  std::set<Json> present;
  Json working = Json::array();
  Positions original_positions;
  if (!replace && original != nullptr && original->is_array()) {
    for (size_t i = 0; i < original->size(); ++i) {
      Json& element = (*original)[i];
      if (!present.insert(element).second) continue;  // a set: duplicates collapse
      original_positions.emplace(element, i);
      working.push_back(std::move(element));
    }
  }
  Positions rank;
  for (size_t n = 0; n < values.size(); ++n) {
    rank.emplace(*values[n], n);
    if (present.insert(*values[n]).second) working.push_back(*values[n]);
  }
  if (replace) return working;
  return Arrange(std::move(working), rank, original_positions, "");
}

// The new value of a list field: merged with `original` (may be null; consumed) when the schema
// says so, else `patch` normalized.
core::Result<Json> MergeList(Json* original, const Json& patch, const FieldMeta& meta,
                             const PatchPath* path, int depth) {
  if (depth > kMaxDepth) return TooDeep(path);
  if (meta.merge && !meta.merge_key.empty()) {
    return MergeKeyedList(original, patch, meta.merge_key, meta.schema.Items(), path, depth);
  }
  if (meta.merge) return MergePrimitiveList(original, patch, meta.schema.Items(), path, depth);
  return NormalizeList(patch, meta.schema.Items(), path, depth);
}

core::Status ApplyRetainKeys(Json& target, const Json& patch, const PatchPath* path) {
  auto directive = patch.find(kRetainKeys);
  if (directive == patch.end()) return core::Status::Ok();
  std::set<std::string, std::less<>> keep;
  bool well_formed = directive->is_array();
  if (well_formed) {
    for (const Json& name : *directive) {
      if (!name.is_string()) {
        well_formed = false;
        break;
      }
      keep.insert(name.get<std::string>());
    }
  }
  if (!well_formed) {
    return Error(path,
                 "invalid patch format of retainKeys: $retainKeys must be a list of field "
                 "names");
  }
  for (const auto& [name, value] : patch.items()) {
    if (IsDirectiveKey(name) || value.is_null()) continue;
    if (keep.count(name) == 0) {
      return Error(path, fmt::format("invalid patch format of retainKeys: field \"{}\" is in the "
                                     "patch but not in $retainKeys",
                                     name));
    }
  }
  for (auto it = target.begin(); it != target.end();) {
    if (keep.count(it.key()) == 0) {
      it = target.erase(it);
    } else {
      ++it;
    }
  }
  return core::Status::Ok();
}

// The field a "$setElementOrder/<f>" or "$deleteFromPrimitiveList/<f>" key is about.
core::Result<std::string_view> DirectiveField(std::string_view name, std::string_view prefix,
                                              std::string_view what, const PatchPath* path) {
  if (name.size() < prefix.size() + 2 || name[prefix.size()] != '/') {
    return Error(path, fmt::format("invalid patch format of {}: \"{}\" must be \"{}/<field>\"",
                                   what, name, prefix));
  }
  return name.substr(prefix.size() + 1);
}

// Checks that the patch list's elements appear in `order` in the same relative order.
core::Status CheckElementOrder(const Json* patch_list, const Json& order, const std::string& key,
                               std::string_view directive, const PatchPath* path) {
  std::vector<const Json*> ids;
  for (size_t i = 0; i < order.size(); ++i) {
    const Json* id = IdentityOf(order[i], key);
    if (id == nullptr) {
      return Error(path, fmt::format("invalid patch format of setElementOrder list: element {} of "
                                     "{} has no merge key \"{}\"",
                                     i, directive, key));
    }
    ids.push_back(id);
  }
  if (patch_list == nullptr) return core::Status::Ok();
  size_t j = 0;
  for (const Json& element : *patch_list) {
    if (element.is_object() && element.contains(kDirectiveMarker)) continue;
    const Json* id = IdentityOf(element, key);
    if (id == nullptr) continue;  // the merge reports it
    while (j < ids.size() && *ids[j] != *id) ++j;
    if (j == ids.size()) {
      return Error(path, fmt::format("invalid patch format of setElementOrder list: the patch "
                                     "list's elements are missing from {} or in another order",
                                     directive));
    }
    ++j;
  }
  return core::Status::Ok();
}

core::Result<Outcome> MergeMapInto(Json& target, const Json& patch, const SchemaCursor& schema,
                                   const PatchPath* path, int depth) {
  if (depth > kMaxDepth) return TooDeep(path);
  if (auto marker = patch.find(kDirectiveMarker); marker != patch.end()) {
    std::string_view directive = DirectiveValue(*marker);
    if (directive == "delete") return Outcome::kDelete;
    if (directive == "replace") {
      target = Json::object();
    } else if (directive != "merge") {
      return Error(path, UnknownPatchType(*marker, patch));
    }
  }
  if (!target.is_object()) target = Json::object();

  KLUTCH_RETURN_IF_ERROR(ApplyRetainKeys(target, patch, path));

  // $setElementOrder/<f> first: it merges list <f> itself, then orders it.
  std::set<std::string, std::less<>> ordered;
  for (const auto& [name, order] : patch.items()) {
    if (!std::string_view(name).starts_with(kSetElementOrder)) continue;
    KLUTCH_ASSIGN_OR_RETURN(std::string_view field,
                            DirectiveField(name, kSetElementOrder, "setElementOrder list", path));
    PatchPath child(path, field);
    if (!order.is_array()) {
      return Error(path, fmt::format("invalid patch format of setElementOrder list: {} must be a "
                                     "list",
                                     name));
    }
    std::string field_name(field);
    FieldMeta meta = LookupField(schema, field_name);
    if (!meta.merge) continue;  // a replaced list takes the patch's order
    auto patch_value = patch.find(field_name);
    const Json* patch_list =
        patch_value != patch.end() && patch_value->is_array() ? &*patch_value : nullptr;
    if (patch_value != patch.end() && patch_list == nullptr) continue;  // null or replaced
    auto existing = target.find(field_name);
    Json* original = existing != target.end() && existing->is_array() ? &*existing : nullptr;
    if (patch_list == nullptr && original == nullptr) continue;
    KLUTCH_RETURN_IF_ERROR(CheckElementOrder(patch_list, order, meta.merge_key, name, &child));
    Positions original_positions = OriginalPositions(original, meta.merge_key);
    Json merged;
    if (patch_list != nullptr) {
      KLUTCH_ASSIGN_OR_RETURN(merged, MergeList(original, *patch_list, meta, &child, depth + 1));
    } else {
      merged = std::move(*original);
    }
    Positions rank;
    for (size_t i = 0; i < order.size(); ++i) {
      rank.emplace(*IdentityOf(order[i], meta.merge_key), i);
    }
    target[field_name] = Arrange(std::move(merged), rank, original_positions, meta.merge_key);
    ordered.insert(std::move(field_name));
  }

  for (const auto& [name, value] : patch.items()) {
    if (IsDirectiveKey(name) || ordered.count(name) != 0) continue;
    if (value.is_null()) {
      target.erase(name);
      continue;
    }
    PatchPath child(path, name);
    if (value.is_object()) {
      FieldMeta meta = LookupField(schema, name);
      auto existing = target.find(name);
      if (existing != target.end() && existing->is_object() && !meta.replace) {
        KLUTCH_ASSIGN_OR_RETURN(Outcome outcome,
                                MergeMapInto(*existing, value, meta.schema, &child, depth + 1));
        if (outcome == Outcome::kDelete) target.erase(name);
      } else {
        Json fresh = Json::object();
        KLUTCH_ASSIGN_OR_RETURN(Outcome outcome,
                                MergeMapInto(fresh, value, meta.schema, &child, depth + 1));
        if (outcome == Outcome::kKeep) {
          target[name] = std::move(fresh);
        } else {
          target.erase(name);
        }
      }
    } else if (value.is_array()) {
      FieldMeta meta = LookupField(schema, name);
      auto existing = target.find(name);
      Json* original = existing != target.end() && existing->is_array() ? &*existing : nullptr;
      KLUTCH_ASSIGN_OR_RETURN(Json merged, MergeList(original, value, meta, &child, depth + 1));
      target[name] = std::move(merged);
    } else {
      target[name] = value;
    }
  }

  for (const auto& [name, values] : patch.items()) {
    if (!std::string_view(name).starts_with(kDeleteFromPrimitiveList)) continue;
    KLUTCH_ASSIGN_OR_RETURN(std::string_view field,
                            DirectiveField(name, kDeleteFromPrimitiveList, "primitive list", path));
    if (!values.is_array()) {
      return Error(path,
                   fmt::format("invalid patch format of primitive list: {} must be a list", name));
    }
    auto existing = target.find(std::string(field));
    if (existing == target.end() || !existing->is_array()) continue;
    std::set<Json> drop(values.begin(), values.end());
    Json kept = Json::array();
    for (Json& element : *existing) {
      if (drop.count(element) == 0) kept.push_back(std::move(element));
    }
    *existing = std::move(kept);
  }
  return Outcome::kKeep;
}

}  // namespace

core::Result<Json> ApplyStrategicMergePatch(const Json& original, const Json& patch,
                                            const SchemaCursor& schema) {
  if (!patch.is_object()) {
    return core::BadRequest(
        fmt::format("strategic merge patch must be a JSON object, not {}", patch.type_name()));
  }
  if (!original.is_object()) {
    return core::BadRequest(
        fmt::format("invalid JSON document: the object to patch must be a "
                    "JSON object, not {}",
                    original.type_name()));
  }
  Json result = original;
  KLUTCH_ASSIGN_OR_RETURN(Outcome outcome, MergeMapInto(result, patch, schema, nullptr, 0));
  if (outcome == Outcome::kDelete) return Json::object();
  return result;
}

}  // namespace klutch::machinery
