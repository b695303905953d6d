#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "fmt/format.h"
#include "machinery/managed_fields.h"
#include "machinery/managed_fields_internal.h"

// The walks of managed_fields.h over an object and its schema: field sets, comparing two
// versions, merging an applied configuration and pruning what an applier dropped.

namespace klutch::machinery::internal {
namespace {

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

}  // namespace

FieldSet FilterTracked(const FieldSet& set, const ManagedFieldsOptions& options) {
  FieldSet out = set.Difference(UntrackedFields());
  if (!options.ignore_paths.Empty()) out = out.RecursiveDifference(options.ignore_paths);
  return out;
}

namespace {

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

}  // namespace

FieldSet WalkFieldSet(const Json& value, const SchemaCursor& schema, std::string* error) {
  FieldSetWalker walker(/*strict=*/error != nullptr);
  FieldSet out;
  Path path;
  walker.Walk(value, schema, path, out);
  if (error != nullptr) *error = walker.error();
  return out;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Comparing two versions of an object.

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

}  // namespace

Comparison CompareObjects(const Json* l, const Json* r, const SchemaCursor& schema,
                          const ManagedFieldsOptions& options) {
  Comparison raw;
  Path path;
  Compare(l, r, schema, path, raw);
  return {FilterTracked(raw.added, options), FilterTracked(raw.removed, options),
          FilterTracked(raw.modified, options)};
}

namespace {

// ---------------------------------------------------------------------------------------------
// Merging an applied configuration.

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

}  // namespace

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

namespace {

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

}  // namespace

FieldSet WithNamedParents(const FieldSet& set, const SchemaCursor& schema) {
  FieldSet named;
  Path path;
  CollectNamedParents(set, schema, path, named);
  return set.Union(named);
}

namespace {

bool IsIdentityField(const Path& path, const PathElement& pe) {
  if (pe.kind() != PathElement::Kind::kField) return false;
  return UntrackedFields().Has([&] {
    Path p = path;
    p.push_back(pe);
    return p;
  }());
}

}  // namespace

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

}  // namespace klutch::machinery::internal
