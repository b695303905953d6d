#include "machinery/managed_fields.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::machinery {

namespace {

constexpr std::string_view kApply = "Apply";
constexpr std::string_view kUpdate = "Update";
constexpr std::string_view kFieldsV1 = "FieldsV1";
constexpr std::string_view kBeforeFirstApply = "before-first-apply";
constexpr size_t kFieldManagerMaxLength = 128;

// ---------------------------------------------------------------------------------------------
// Schema questions.

// ObjectMeta's shape, for schemas (CRDs, unknown kinds) that do not describe metadata: which
// of its fields are declared properties, and how its lists merge.
const Json& ObjectMetaSchema() {
  static const Json* schema = new Json(Json::parse(R"({
    "type": "object",
    "properties": {
      "name": {"type": "string"},
      "generateName": {"type": "string"},
      "namespace": {"type": "string"},
      "selfLink": {"type": "string"},
      "uid": {"type": "string"},
      "resourceVersion": {"type": "string"},
      "generation": {"type": "integer"},
      "creationTimestamp": {"type": "string"},
      "deletionTimestamp": {"type": "string"},
      "deletionGracePeriodSeconds": {"type": "integer"},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}},
      "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
      "finalizers": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"},
      "ownerReferences": {
        "type": "array",
        "items": {"type": "object", "properties": {
          "apiVersion": {"type": "string"}, "kind": {"type": "string"},
          "name": {"type": "string"}, "uid": {"type": "string"},
          "controller": {"type": "boolean"}, "blockOwnerDeletion": {"type": "boolean"}}},
        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["uid"],
        "x-kubernetes-patch-merge-key": "uid", "x-kubernetes-patch-strategy": "merge"},
      "managedFields": {"type": "array", "items": {"type": "object"}}
    }
  })"));
  return *schema;
}

bool HasProperties(const SchemaCursor& c) {
  if (!c.known()) return false;
  auto it = c.node()->find("properties");
  return it != c.node()->end() && it->is_object();
}

// The schema of field `name` of the node at `path` whose schema is `c`.
SchemaCursor ChildCursor(const SchemaCursor& c, const Path& path, std::string_view name) {
  if (path.empty() && name == "metadata") {
    SchemaCursor meta = c.Field(name);
    if (HasProperties(meta)) return meta;
    return SchemaCursor(&ObjectMetaSchema(), nullptr);
  }
  return c.Field(name);
}

// Whether `name` is a declared property (a struct field) rather than a map key.
bool IsDeclared(const SchemaCursor& c, std::string_view name) {
  if (!HasProperties(c)) return false;
  const Json& props = (*c.node())["properties"];
  return props.contains(std::string(name));
}

bool IsAtomicMap(const SchemaCursor& c) { return c.Extension("x-kubernetes-map-type") == "atomic"; }

// metadata.managedFields is never part of the object's fields.
bool IsManagedFieldsPath(const Path& path, std::string_view name) {
  return path.size() == 1 && path[0].kind() == PathElement::Kind::kField &&
         path[0].field_name() == "metadata" && name == "managedFields";
}

struct ListShape {
  enum class Kind { kAtomic, kMap, kSet };
  Kind kind = Kind::kAtomic;
  std::vector<std::string> keys;  // kMap only
};

ListShape ListShapeOf(const SchemaCursor& c) {
  std::string type = c.Extension("x-kubernetes-list-type");
  if (type == "map") return {ListShape::Kind::kMap, c.ListMapKeys()};
  if (type == "set") return {ListShape::Kind::kSet, {}};
  if (!type.empty()) return {};
  // Built-in types older than list-type markers: a merge patch strategy makes the list
  // associative (structured-merge-diff's schema conversion does the same).
  for (std::string_view strategy : core::Split(c.Extension("x-kubernetes-patch-strategy"), ',')) {
    if (strategy != "merge") continue;
    std::string key = c.Extension("x-kubernetes-patch-merge-key");
    if (key.empty()) return {ListShape::Kind::kSet, {}};
    return {ListShape::Kind::kMap, {std::move(key)}};
  }
  return {};
}

// The path element of list element `elem`, or nullopt with `*error` set when the element
// cannot be keyed (callers then fall back to its index).
std::optional<PathElement> ElementOf(const Json& elem, const ListShape& shape,
                                     const SchemaCursor& items, std::string* error) {
  if (shape.kind == ListShape::Kind::kMap && !shape.keys.empty()) {
    if (!elem.is_object()) {
      *error = "associative list with keys has an element that is not a map type";
      return std::nullopt;
    }
    PathElement::KeyFields fields;
    for (const std::string& key : shape.keys) {
      auto it = elem.find(key);
      if (it != elem.end() && !it->is_null()) {
        fields.emplace_back(key, *it);
        continue;
      }
      // A key field the schema defaults (e.g. a port's protocol) may be left out.
      SchemaCursor field = items.Field(key);
      if (field.known()) {
        auto def = field.node()->find("default");
        if (def != field.node()->end()) {
          fields.emplace_back(key, *def);
          continue;
        }
      }
      *error = fmt::format(
          "associative list with keys has an element that omits key field {} (and doesn't "
          "have default value)",
          core::GoQuote(key));
      return std::nullopt;
    }
    return PathElement::Key(std::move(fields));
  }
  if (elem.is_object()) {
    *error = "associative list without keys has an element that's a map type";
    return std::nullopt;
  }
  if (elem.is_array()) {
    *error = "associative list without keys has an element that's a list type";
    return std::nullopt;
  }
  return PathElement::Value(elem);
}

// The elements of an associative list in order, first occurrence of each key only.
struct IndexedList {
  std::vector<PathElement> order;
  std::map<PathElement, const Json*> items;
};

IndexedList IndexList(const Json* list, const ListShape& shape, const SchemaCursor& items) {
  IndexedList out;
  if (list == nullptr || !list->is_array()) return out;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string error;
    std::optional<PathElement> pe = ElementOf((*list)[i], shape, items, &error);
    PathElement key = pe ? *pe : PathElement::Index(static_cast<int64_t>(i));
    if (out.items.emplace(key, &(*list)[i]).second) out.order.push_back(std::move(key));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Field sets of objects.

// Paths Kubernetes never tracks (removed exactly, not recursively).
const FieldSet& UntrackedFields() {
  static const FieldSet* set = [] {
    auto f = [](const char* n) { return PathElement::Field(n); };
    std::vector<Path> paths = {{f("apiVersion")}, {f("kind")}, {f("metadata")}};
    for (const char* name :
         {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
          "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields"}) {
      paths.push_back({f("metadata"), f(name)});
    }
    return new FieldSet(FieldSet::FromPaths(paths));
  }();
  return *set;
}

FieldSet Filter(const FieldSet& set, const ManagedFieldsOptions& options) {
  FieldSet out = set.Difference(UntrackedFields());
  if (!options.ignore_paths.Empty()) out = out.RecursiveDifference(options.ignore_paths);
  return out;
}

// Collects the fields a value sets (see FieldSetOf). In strict mode the first element that
// cannot be keyed, or a duplicate key, is recorded in `error` (with its path).
class FieldSetWalker {
 public:
  explicit FieldSetWalker(bool strict) : strict_(strict) {}

  void Walk(const Json& v, const SchemaCursor& c, Path& path, FieldSet& out) {
    if (v.is_object()) {
      if (!path.empty() && IsAtomicMap(c)) {
        out.Insert(path);
        return;
      }
      for (const auto& [key, child] : v.items()) {
        if (IsManagedFieldsPath(path, key)) continue;
        SchemaCursor cc = ChildCursor(c, path, key);
        bool declared = IsDeclared(c, key);
        path.push_back(PathElement::Field(key));
        Walk(child, cc, path, out);
        if (!declared || child.is_null() || (child.is_object() && child.empty())) {
          out.Insert(path);
        }
        path.pop_back();
      }
      return;
    }
    if (v.is_array()) {
      ListShape shape = ListShapeOf(c);
      if (shape.kind == ListShape::Kind::kAtomic) {
        out.Insert(path);
        return;
      }
      SchemaCursor items = c.Items();
      std::set<PathElement> seen;
      for (size_t i = 0; i < v.size(); ++i) {
        std::string problem;
        std::optional<PathElement> pe = ElementOf(v[i], shape, items, &problem);
        if (!pe) {
          Fail(path, fmt::format("element {}: {}", i, problem));
          pe = PathElement::Index(static_cast<int64_t>(i));
        } else if (!seen.insert(*pe).second) {
          Fail(path, "duplicate entries for key " + pe->ToString());
        }
        path.push_back(*pe);
        Walk(v[i], items, path, out);
        out.Insert(path);
        path.pop_back();
      }
      return;
    }
    out.Insert(path);
  }

  const std::string& error() const { return error_; }

 private:
  void Fail(const Path& path, const std::string& problem) {
    if (!strict_ || !error_.empty()) return;
    error_ = PathToString(path) + ": " + problem;
  }

  bool strict_;
  std::string error_;
};

// ---------------------------------------------------------------------------------------------
// Comparing two versions of an object.

struct Comparison {
  FieldSet added;
  FieldSet removed;
  FieldSet modified;
};

// A map or list node itself appears or disappears (its contents are compared separately).
void ComparePresence(const Json* l, const Json* r, const Path& path, Comparison& out) {
  if (path.empty()) return;
  if (l == nullptr) {
    out.added.Insert(path);
  } else if (r == nullptr) {
    out.removed.Insert(path);
  }
}

void CompareLeaf(const Json* l, const Json* r, const Path& path, Comparison& out) {
  if (path.empty()) return;
  if (l == nullptr) {
    out.added.Insert(path);
  } else if (r == nullptr) {
    out.removed.Insert(path);
  } else if (*l != *r) {
    out.modified.Insert(path);
  }
}

// Records in `out` the paths added, removed and modified from `l` to `r` (either may be
// nullptr for "absent"): leaves by value, and maps and list elements that appear or disappear.
void Compare(const Json* l, const Json* r, const SchemaCursor& c, Path& path, Comparison& out) {
  bool l_obj = l != nullptr && l->is_object(), r_obj = r != nullptr && r->is_object();
  bool l_arr = l != nullptr && l->is_array(), r_arr = r != nullptr && r->is_array();
  bool both_maps = (l == nullptr || l_obj) && (r == nullptr || r_obj);
  bool both_lists = (l == nullptr || l_arr) && (r == nullptr || r_arr);
  bool l_empty = l == nullptr || ((l_obj || l_arr) && l->empty());
  bool r_empty = r == nullptr || ((r_obj || r_arr) && r->empty());

  if (both_maps && (path.empty() || !IsAtomicMap(c))) {
    // Empty and absent maps compare as leaves, which keeps {} apart from absent.
    if (l_empty && r_empty) return CompareLeaf(l, r, path, out);
    if (l != nullptr) {
      for (const auto& [key, lv] : l->items()) {
        if (IsManagedFieldsPath(path, key)) continue;
        const Json* rv = nullptr;
        if (r != nullptr) {
          auto it = r->find(key);
          if (it != r->end()) rv = &*it;
        }
        SchemaCursor cc = ChildCursor(c, path, key);
        path.push_back(PathElement::Field(key));
        Compare(&lv, rv, cc, path, out);
        path.pop_back();
      }
    }
    if (r != nullptr) {
      for (const auto& [key, rv] : r->items()) {
        if (IsManagedFieldsPath(path, key) || (l != nullptr && l->contains(key))) continue;
        SchemaCursor cc = ChildCursor(c, path, key);
        path.push_back(PathElement::Field(key));
        Compare(nullptr, &rv, cc, path, out);
        path.pop_back();
      }
    }
    ComparePresence(l, r, path, out);
    return;
  }
  if (both_lists) {
    ListShape shape = ListShapeOf(c);
    if (shape.kind == ListShape::Kind::kAtomic || path.empty() || (l_empty && r_empty)) {
      return CompareLeaf(l, r, path, out);
    }
    SchemaCursor items = c.Items();
    IndexedList li = IndexList(l, shape, items), ri = IndexList(r, shape, items);
    for (const PathElement& pe : li.order) {
      auto it = ri.items.find(pe);
      path.push_back(pe);
      Compare(li.items[pe], it == ri.items.end() ? nullptr : it->second, items, path, out);
      path.pop_back();
    }
    for (const PathElement& pe : ri.order) {
      if (li.items.contains(pe)) continue;
      path.push_back(pe);
      Compare(nullptr, ri.items[pe], items, path, out);
      path.pop_back();
    }
    ComparePresence(l, r, path, out);
    return;
  }
  bool l_container = l_obj || l_arr, r_container = r_obj || r_arr;
  if (l != nullptr && r != nullptr && (l_container || r_container)) {
    // The value changed shape (e.g. null to an object): what was below it is gone, what is
    // below it now is new, and the node itself is modified.
    Comparison below;
    if (l_container) Compare(l, nullptr, c, path, below);
    if (r_container) Compare(nullptr, r, c, path, below);
    FieldSet self = FieldSet::FromPaths({path});
    out.added = out.added.Union(below.added.Difference(self));
    out.removed = out.removed.Union(below.removed.Difference(self));
    out.modified.Insert(path);
    return;
  }
  CompareLeaf(l, r, path, out);
}

Comparison CompareObjects(const Json* l, const Json* r, const SchemaCursor& schema,
                          const ManagedFieldsOptions& options) {
  Comparison raw;
  Path path;
  Compare(l, r, schema, path, raw);
  return {Filter(raw.added, options), Filter(raw.removed, options), Filter(raw.modified, options)};
}

// ---------------------------------------------------------------------------------------------
// Merging an applied configuration.

Json Merge(const Json& l, const Json& r, const SchemaCursor& c, Path& path);

Json MergeList(const Json& l, const Json& r, const ListShape& shape, const SchemaCursor& items,
               Path& path) {
  IndexedList li = IndexList(&l, shape, items), ri = IndexList(&r, shape, items);
  // Shared elements follow the applied order; elements only in the live list stay next to the
  // shared element they followed; new elements go where the applied list puts them.
  std::vector<PathElement> shared;
  for (const PathElement& pe : ri.order) {
    if (li.items.contains(pe)) shared.push_back(pe);
  }
  Json out = Json::array();
  std::set<PathElement> emitted;
  auto emit = [&](const PathElement& pe) {
    auto lit = li.items.find(pe);
    auto rit = ri.items.find(pe);
    path.push_back(pe);
    if (rit == ri.items.end()) {
      out.push_back(*lit->second);
    } else if (lit == li.items.end()) {
      out.push_back(*rit->second);
    } else {
      out.push_back(Merge(*lit->second, *rit->second, items, path));
    }
    path.pop_back();
    emitted.insert(pe);
  };
  size_t lpos = 0, rpos = 0, next_shared = 0;
  const size_t lsize = li.order.size(), rsize = ri.order.size();
  while (lpos < lsize || rpos < rsize) {
    if (lpos < lsize && emitted.contains(li.order[lpos])) {
      ++lpos;
      continue;
    }
    if (lpos < lsize && rpos < rsize) {
      const PathElement& pe = li.order[lpos];
      if (pe == ri.order[rpos]) {
        emit(pe);
        ++lpos, ++rpos;
        if (next_shared < shared.size()) ++next_shared;
        continue;
      }
      if (ri.items.contains(pe) && next_shared < shared.size() && !(shared[next_shared] == pe)) {
        ++lpos;  // a shared element the applied list places later
        continue;
      }
    }
    if (lpos < lsize && !ri.items.contains(li.order[lpos])) {
      emit(li.order[lpos++]);
      continue;
    }
    if (rpos < rsize) {
      const PathElement pe = ri.order[rpos++];
      if (!emitted.contains(pe)) emit(pe);
      if (next_shared < shared.size() && shared[next_shared] == pe) ++next_shared;
      continue;
    }
    ++lpos;  // only shared elements already placed remain
  }
  return out;
}

Json Merge(const Json& l, const Json& r, const SchemaCursor& c, Path& path) {
  if (l.is_object() && r.is_object() && (path.empty() || !IsAtomicMap(c))) {
    Json out = l;
    for (const auto& [key, rv] : r.items()) {
      auto it = out.find(key);
      if (it == out.end()) {
        out[key] = rv;
        continue;
      }
      SchemaCursor cc = ChildCursor(c, path, key);
      path.push_back(PathElement::Field(key));
      *it = Merge(*it, rv, cc, path);
      path.pop_back();
    }
    return out;
  }
  if (l.is_array() && r.is_array() && !path.empty()) {
    ListShape shape = ListShapeOf(c);
    if (shape.kind != ListShape::Kind::kAtomic) return MergeList(l, r, shape, c.Items(), path);
  }
  return r;
}

// Adds to `out` the declared properties that have owned fields below them in `set`: owning
// `.spec.replicas` means owning the `.spec` struct too (but not a map that holds a key).
void CollectNamedParents(const FieldSet& set, const SchemaCursor& c, Path& path, FieldSet& out) {
  for (const auto& [pe, sub] : set.children()) {
    SchemaCursor cc;
    if (pe.kind() == PathElement::Kind::kField) {
      // Top-level metadata holds the object's identity; it is never removed as a whole.
      bool identity = path.empty() && pe.field_name() == "metadata";
      if (IsDeclared(c, pe.field_name()) && !identity) {
        path.push_back(pe);
        out.Insert(path);
        path.pop_back();
      }
      cc = ChildCursor(c, path, pe.field_name());
    } else {
      cc = c.Items();
    }
    path.push_back(pe);
    CollectNamedParents(*sub, cc, path, out);
    path.pop_back();
  }
}

FieldSet WithNamedParents(const FieldSet& set, const SchemaCursor& schema) {
  FieldSet named;
  Path path;
  CollectNamedParents(set, schema, path, named);
  return set.Union(named);
}

bool IsIdentityField(const Path& path, const PathElement& pe) {
  if (pe.kind() != PathElement::Kind::kField) return false;
  return UntrackedFields().Has([&] {
    Path p = path;
    p.push_back(pe);
    return p;
  }());
}

// Removes from `node` what `last` holds and `owned` does not: a member leaves with everything
// below it; below a kept member only the unowned parts of `last` go.
void Prune(Json& node, const FieldSet& last, const FieldSet* owned, const SchemaCursor& c,
           Path& path) {
  auto is_owned = [&](const PathElement& pe) { return owned != nullptr && owned->HasMember(pe); };
  if (node.is_object()) {
    for (const PathElement& pe : last.members()) {
      if (pe.kind() != PathElement::Kind::kField || is_owned(pe) || IsIdentityField(path, pe)) {
        continue;
      }
      node.erase(pe.field_name());
    }
    for (const auto& [pe, sub] : last.children()) {
      if (pe.kind() != PathElement::Kind::kField) continue;
      auto it = node.find(pe.field_name());
      if (it == node.end()) continue;
      SchemaCursor cc = ChildCursor(c, path, pe.field_name());
      path.push_back(pe);
      Prune(*it, *sub, owned == nullptr ? nullptr : owned->Child(pe), cc, path);
      path.pop_back();
    }
    return;
  }
  if (!node.is_array() || path.empty()) return;
  ListShape shape = ListShapeOf(c);
  if (shape.kind == ListShape::Kind::kAtomic) return;
  SchemaCursor items = c.Items();
  Json kept = Json::array();
  for (size_t i = 0; i < node.size(); ++i) {
    std::string ignored;
    std::optional<PathElement> found = ElementOf(node[i], shape, items, &ignored);
    PathElement pe = found ? *found : PathElement::Index(static_cast<int64_t>(i));
    if (last.HasMember(pe) && !is_owned(pe)) continue;
    if (const FieldSet* sub = last.Child(pe)) {
      path.push_back(pe);
      Prune(node[i], *sub, owned == nullptr ? nullptr : owned->Child(pe), items, path);
      path.pop_back();
    }
    kept.push_back(std::move(node[i]));
  }
  node = std::move(kept);
}

// ---------------------------------------------------------------------------------------------
// managedFields entries.

struct Entry {
  std::string manager;
  std::string operation;
  std::string api_version;
  std::string time;
  std::string fields_type;
  std::string subresource;
  bool has_fields = false;
  FieldSet fields;
};

// kube-apiserver's manager identifier: the entry as Go JSON without time and fields, and
// without apiVersion for appliers (one Apply entry per manager whatever the version).
std::string Identity(const Entry& e) {
  std::string out = "{";
  auto add = [&](std::string_view name, const std::string& value) {
    if (value.empty()) return;
    if (out.size() > 1) out += ",";
    out += fmt::format("\"{}\":{}", name, GoJson(Json(value)));
  };
  add("manager", e.manager);
  add("operation", e.operation);
  if (e.operation != kApply) add("apiVersion", e.api_version);
  add("subresource", e.subresource);
  return out + "}";
}

// How conflict messages name a manager: "m", "m" using v1, "m" with subresource "status" ...
std::string PrintManager(const Entry& e) {
  std::string out = core::GoQuote(e.manager);
  if (!e.subresource.empty()) out += " with subresource " + core::GoQuote(e.subresource);
  if (e.operation == kUpdate) out += " using " + e.api_version;
  return out;
}

Json EncodeEntry(const Entry& e) {
  Json out = Json::object();
  if (!e.manager.empty()) out["manager"] = e.manager;
  if (!e.operation.empty()) out["operation"] = e.operation;
  if (!e.api_version.empty()) out["apiVersion"] = e.api_version;
  if (!e.time.empty()) out["time"] = e.time;
  if (!e.fields_type.empty()) out["fieldsType"] = e.fields_type;
  if (e.has_fields) out["fieldsV1"] = e.fields.ToJson();
  if (!e.subresource.empty()) out["subresource"] = e.subresource;
  return out;
}

Json EncodeEntries(const std::vector<Entry>& entries) {
  Json out = Json::array();
  for (const Entry& e : entries) out.push_back(EncodeEntry(e));
  return out;
}

bool IsDigits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

// RFC 3339 date-time: 2006-01-02T15:04:05[.frac](Z|+07:00).
bool IsRfc3339(std::string_view s) {
  if (s.size() < 20) return false;
  auto num = [&](size_t pos, size_t len, int lo, int hi) {
    std::string_view part = s.substr(pos, len);
    if (!IsDigits(part)) return false;
    int v = std::stoi(std::string(part));
    return v >= lo && v <= hi;
  };
  if (!num(0, 4, 0, 9999) || s[4] != '-' || !num(5, 2, 1, 12) || s[7] != '-' || !num(8, 2, 1, 31) ||
      (s[10] != 'T' && s[10] != 't') || !num(11, 2, 0, 23) || s[13] != ':' || !num(14, 2, 0, 59) ||
      s[16] != ':' || !num(17, 2, 0, 60)) {
    return false;
  }
  size_t pos = 19;
  if (s[pos] == '.') {
    size_t start = ++pos;
    while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
    if (pos == start) return false;
  }
  std::string_view zone = s.substr(pos);
  if (zone == "Z" || zone == "z") return true;
  return zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && num(pos + 1, 2, 0, 23) &&
         zone[3] == ':' && num(pos + 4, 2, 0, 59);
}

// Go's %#U for a rune that is not printable: U+0009.
std::string RuneName(int32_t cp) { return fmt::format("U+{:04X}", cp); }

struct FieldError {
  std::string type;  // CauseType
  std::string field;
  std::string body;  // "Invalid value: \"x\": detail"
};

// Validates and decodes a managedFields array. `*cleared` is set for the `[{}]` form.
core::Result<std::vector<Entry>> DecodeEntries(const Json& managed_fields, bool* cleared) {
  *cleared = false;
  std::vector<Entry> entries;
  if (managed_fields.is_null()) return entries;
  if (!managed_fields.is_array()) {
    return core::BadRequest(fmt::format("metadata.managedFields: expected an array, found {}",
                                        managed_fields.type_name()));
  }
  if (!managed_fields.empty() &&
      std::all_of(managed_fields.begin(), managed_fields.end(),
                  [](const Json& e) { return e.is_object() && e.empty(); })) {
    *cleared = true;
    return entries;
  }
  std::vector<FieldError> errors;
  for (size_t i = 0; i < managed_fields.size(); ++i) {
    const Json& raw = managed_fields[i];
    std::string at = fmt::format("metadata.managedFields[{}]", i);
    if (!raw.is_object()) {
      return core::BadRequest(fmt::format("{}: expected an object, found {}", at, raw.type_name()));
    }
    Entry e;
    for (auto [name, target] : std::initializer_list<std::pair<const char*, std::string*>>{
             {"manager", &e.manager},
             {"operation", &e.operation},
             {"apiVersion", &e.api_version},
             {"time", &e.time},
             {"fieldsType", &e.fields_type},
             {"subresource", &e.subresource}}) {
      auto it = raw.find(name);
      if (it == raw.end() || it->is_null()) continue;
      if (!it->is_string()) {
        return core::BadRequest(
            fmt::format("{}.{}: expected a string, found {}", at, name, it->type_name()));
      }
      *target = it->get<std::string>();
    }
    if (!e.time.empty() && !IsRfc3339(e.time)) {
      return core::BadRequest(
          fmt::format("{}.time: {} is not an RFC 3339 time", at, core::GoQuote(e.time)));
    }
    if (auto it = raw.find("fieldsV1"); it != raw.end() && !it->is_null()) {
      auto fields = FieldSet::FromJson(*it);
      if (!fields.ok()) {
        return core::BadRequest(fmt::format("{}.fieldsV1: {}", at, fields.status().message()));
      }
      e.has_fields = true;
      e.fields = std::move(fields).value();
    }

    if (e.operation != kApply && e.operation != kUpdate) {
      errors.push_back({"FieldValueInvalid", at + ".operation",
                        fmt::format("Invalid value: {}: must be `Apply` or `Update`",
                                    core::GoQuote(e.operation))});
    }
    if (e.api_version.empty()) {
      errors.push_back({"FieldValueRequired", at + ".apiVersion", "Required value"});
    }
    if (e.fields_type.empty()) {
      errors.push_back({"FieldValueRequired", at + ".fieldsType", "Required value"});
    } else if (e.fields_type != kFieldsV1) {
      errors.push_back(
          {"FieldValueInvalid", at + ".fieldsType",
           fmt::format("Invalid value: {}: must be `FieldsV1`", core::GoQuote(e.fields_type))});
    }
    if (e.manager.size() > kFieldManagerMaxLength) {
      errors.push_back(
          {"FieldValueTooLong", at + ".manager",
           fmt::format("Too long: may not be more than {} bytes", kFieldManagerMaxLength)});
    }
    for (size_t pos = 0; pos < e.manager.size();) {
      auto lead = static_cast<unsigned char>(e.manager[pos]);
      size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4;
      len = std::min(len, e.manager.size() - pos);
      std::string_view rune(e.manager.data() + pos, len);
      // A rune Go's %q leaves unescaped is printable (quote and backslash aside).
      if (rune == "\"" || rune == "\\" || core::GoQuote(rune) == "\"" + std::string(rune) + "\"") {
        pos += len;
        continue;
      }
      int32_t cp = lead;
      if (lead >= 0x80) {
        cp = len == 1 ? 0xFFFD : lead & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (rune[k] & 0x3F);
      }
      errors.push_back({"FieldValueInvalid", at + ".manager",
                        fmt::format("Invalid value: {}: invalid character {} (at position {})",
                                    core::GoQuote(e.manager), RuneName(cp), pos)});
      break;
    }
    entries.push_back(std::move(e));
  }
  if (!errors.empty()) {
    core::Details details;
    std::vector<std::string> parts;
    for (const FieldError& err : errors) {
      details.causes.push_back({err.type, err.body, err.field});
      parts.push_back(err.field + ": " + err.body);
    }
    std::string message = parts.size() == 1 ? parts[0] : "[" + core::Join(parts, ", ") + "]";
    return core::Status(core::Reason::kInvalid, std::move(message), std::move(details));
  }
  return entries;
}

int FindEntry(const std::vector<Entry>& entries, const std::string& identity) {
  // A later duplicate wins, as in kube-apiserver's decoder.
  int found = -1;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (Identity(entries[i]) == identity) found = static_cast<int>(i);
  }
  return found;
}

void DropEmpty(std::vector<Entry>& entries) {
  std::erase_if(entries, [](const Entry& e) { return e.fields.Empty(); });
}

Entry EntryFor(const ManagerInfo& who, std::string_view operation) {
  Entry e;
  e.manager = who.manager;
  e.operation = std::string(operation);
  e.api_version = who.api_version;
  e.subresource = who.subresource;
  e.fields_type = std::string(kFieldsV1);
  e.has_fields = true;
  return e;
}

std::string StringAt(const Json& object, std::string_view a, std::string_view b = {}) {
  if (!object.is_object()) return "";
  auto it = object.find(std::string(a));
  if (it == object.end()) return "";
  if (!b.empty()) {
    if (!it->is_object()) return "";
    auto jt = it->find(std::string(b));
    if (jt == it->end() || !jt->is_string()) return "";
    return jt->get<std::string>();
  }
  return it->is_string() ? it->get<std::string>() : "";
}

// "/v1, Kind=ConfigMap" as Go prints a GroupVersionKind.
std::string GvkString(const Json& object) {
  std::string api_version = StringAt(object, "apiVersion");
  std::string group, version = api_version;
  if (size_t slash = api_version.find('/'); slash != std::string::npos) {
    group = api_version.substr(0, slash);
    version = api_version.substr(slash + 1);
  }
  return fmt::format("{}/{}, Kind={}", group, version, StringAt(object, "kind"));
}

struct Conflict {
  std::string identity;
  std::string printed;
  Path path;
};

core::Status ConflictError(std::vector<Conflict> conflicts) {
  std::stable_sort(conflicts.begin(), conflicts.end(),
                   [](const Conflict& a, const Conflict& b) { return a.identity < b.identity; });
  core::Details details;
  for (const Conflict& c : conflicts) {
    details.causes.push_back(
        {"FieldManagerConflict", "conflict with " + c.printed, PathToString(c.path)});
  }
  std::string message;
  if (conflicts.size() == 1) {
    message = fmt::format("Apply failed with 1 conflict: conflict with {}: {}",
                          conflicts[0].printed, PathToString(conflicts[0].path));
  } else {
    std::vector<std::string> lines;
    for (size_t i = 0; i < conflicts.size(); ++i) {
      if (i == 0 || conflicts[i].identity != conflicts[i - 1].identity) {
        lines.push_back(fmt::format("conflicts with {}:", conflicts[i].printed));
      }
      lines.push_back("- " + PathToString(conflicts[i].path));
    }
    message = fmt::format("Apply failed with {} conflicts: {}", conflicts.size(),
                          core::Join(lines, "\n"));
  }
  return core::Status(core::Reason::kConflict, std::move(message), std::move(details));
}

void SetManagedFields(Json& object, const Json& managed_fields) {
  if (!object.is_object()) return;
  auto meta = object.find("metadata");
  if (managed_fields.empty()) {
    if (meta != object.end() && meta->is_object()) meta->erase("managedFields");
    return;
  }
  if (meta == object.end() || !meta->is_object()) {
    object["metadata"] = Json::object();
    meta = object.find("metadata");
  }
  (*meta)["managedFields"] = managed_fields;
}

}  // namespace

FieldSet FieldSetOf(const Json& object, const SchemaCursor& schema,
                    const ManagedFieldsOptions& options) {
  FieldSet out;
  Path path;
  FieldSetWalker(/*strict=*/false).Walk(object, schema, path, out);
  return Filter(out, options);
}

core::Result<Json> UpdateManagedFields(const Json& old_object, const Json& new_object,
                                       const Json& managed_fields, const ManagerInfo& who,
                                       const SchemaCursor& schema,
                                       const ManagedFieldsOptions& options) {
  if (!who.operation.empty() && who.operation != kUpdate) {
    return core::BadRequest(
        fmt::format("managed fields update: operation must be \"Update\", "
                    "not {}",
                    core::GoQuote(who.operation)));
  }
  bool cleared = false;
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Entry> entries, DecodeEntries(managed_fields, &cleared));

  Comparison cmp =
      CompareObjects(old_object.is_null() ? nullptr : &old_object, &new_object, schema, options);
  FieldSet changed = cmp.modified.Union(cmp.added);
  FieldSet taken = changed.Difference(cmp.removed);

  Entry self = EntryFor(who, kUpdate);
  int self_index = FindEntry(entries, Identity(self));
  for (size_t i = 0; i < entries.size(); ++i) {
    Entry& e = entries[i];
    FieldSet kept = e.fields.Difference(changed).Difference(cmp.removed);
    if (static_cast<int>(i) == self_index) kept = kept.Union(taken);
    e.fields = std::move(kept);
  }
  if (!taken.Empty()) {
    if (self_index < 0) {
      self.fields = taken;
      entries.push_back(std::move(self));
      self_index = static_cast<int>(entries.size()) - 1;
    }
    entries[self_index].time = who.time;
    entries[self_index].fields_type = std::string(kFieldsV1);
    entries[self_index].has_fields = true;
  }
  DropEmpty(entries);
  return EncodeEntries(entries);
}

core::Result<ApplyResult> ServerSideApply(const Json& live, const Json& applied,
                                          const Json& managed_fields, const ManagerInfo& who,
                                          bool force, const SchemaCursor& schema,
                                          const ManagedFieldsOptions& options) {
  if (who.manager.empty()) {
    core::Details details;
    details.causes.push_back(
        {"FieldValueRequired", "Required value: is required for apply patch", "fieldManager"});
    return core::Status(core::Reason::kInvalid,
                        "fieldManager: Required value: is required for apply patch",
                        std::move(details));
  }
  if (!applied.is_object()) {
    return core::BadRequest(
        fmt::format("apply patch must be a JSON object, found {}", applied.type_name()));
  }
  if (auto meta = applied.find("metadata"); meta != applied.end() && meta->is_object()) {
    if (auto mf = meta->find("managedFields"); mf != meta->end() && !mf->is_null()) {
      return core::BadRequest("metadata.managedFields must be nil");
    }
  }
  bool cleared = false;
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Entry> entries, DecodeEntries(managed_fields, &cleared));

  Json base = live.is_null() ? Json::object() : live;
  SetManagedFields(base, Json::array());
  if (!live.is_null() && entries.empty()) {
    // An object nobody has tracked yet: everything in it belongs to a placeholder manager, so
    // the first apply cannot silently take over fields someone else set.
    Entry before;
    before.manager = std::string(kBeforeFirstApply);
    before.operation = std::string(kUpdate);
    before.api_version = StringAt(live, "apiVersion");
    before.fields_type = std::string(kFieldsV1);
    before.has_fields = true;
    before.fields = FieldSetOf(base, schema, options);
    if (!before.fields.Empty()) entries.push_back(std::move(before));
  }

  FieldSet applied_set;
  {
    FieldSetWalker strict(/*strict=*/true);
    Path path;
    strict.Walk(applied, schema, path, applied_set);
    if (!strict.error().empty()) {
      return core::Status(
          core::Reason::kUnknown,
          fmt::format("failed to create typed patch object ({}/{}; {}): {}",
                      StringAt(applied, "metadata", "namespace"),
                      StringAt(applied, "metadata", "name"), GvkString(applied), strict.error()));
    }
    applied_set = Filter(applied_set, options);
  }

  Path path;
  Json merged = Merge(base, applied, schema, path);

  Entry self = EntryFor(who, kApply);
  int self_index = FindEntry(entries, Identity(self));
  FieldSet owned = applied_set;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) != self_index) owned = owned.Union(entries[i].fields);
  }
  if (self_index >= 0 && !entries[self_index].fields.Empty()) {
    FieldSet last = WithNamedParents(entries[self_index].fields, schema);
    FieldSet owned_named = WithNamedParents(owned, schema);
    Prune(merged, last, &owned_named, schema, path);
  }

  Comparison cmp = CompareObjects(&base, &merged, schema, options);
  FieldSet changed = cmp.modified.Union(cmp.added);
  std::vector<Conflict> conflicts;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) == self_index) continue;
    FieldSet overlap = entries[i].fields.Intersection(changed);
    if (overlap.Empty()) continue;
    std::string identity = Identity(entries[i]);
    std::string printed = PrintManager(entries[i]);
    overlap.Iterate([&](const Path& p) { conflicts.push_back({identity, printed, p}); });
  }
  if (!conflicts.empty() && !force) return ConflictError(std::move(conflicts));

  bool object_changed = merged != base;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (static_cast<int>(i) == self_index) continue;
    entries[i].fields = entries[i].fields.Difference(changed).Difference(cmp.removed);
  }
  if (self_index < 0) {
    entries.push_back(std::move(self));
    self_index = static_cast<int>(entries.size()) - 1;
    object_changed = true;  // a new entry always gets a time
  }
  Entry& mine = entries[self_index];
  mine.fields = std::move(applied_set);
  mine.api_version = who.api_version;
  mine.fields_type = std::string(kFieldsV1);
  mine.has_fields = true;
  if (object_changed) mine.time = who.time;
  DropEmpty(entries);

  ApplyResult result;
  result.managed_fields = EncodeEntries(entries);
  SetManagedFields(merged, result.managed_fields);
  result.object = std::move(merged);
  return result;
}

core::Result<Json> ValidateManagedFields(const Json& managed_fields) {
  bool cleared = false;
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Entry> entries, DecodeEntries(managed_fields, &cleared));
  return EncodeEntries(entries);
}

}  // namespace klutch::machinery
