// Field paths and sets of them: the vocabulary of field ownership (managedFields) and
// server-side apply.
//
// A `PathElement` is one step into an object: a field name (`f:name`), the element of an
// associative list picked by its key fields (`k:{"name":"c"}`), the element of a set list
// picked by its value (`v:"x"`), or a list index (`i:0`). A `FieldSet` is a set of paths stored
// as a tree: at each node, `members` are the elements that are themselves in the set and
// `children` hold the sets below elements that have members further down. A node can be both
// (a map entry owned as a whole that also has owned fields): FieldsV1 writes that as `".":{}`
// inside the child.
//
// FieldsV1 is the JSON form Kubernetes stores in metadata.managedFields[].fieldsV1, e.g.
// `{"f:data":{".":{},"f:a":{}},"f:spec":{"f:ports":{"k:{\"port\":80,\"protocol\":\"TCP\"}":{}}}}`.
// Key objects (`k:`) and values (`v:`) are compact JSON with fields sorted by name, strings
// escaped the way Go's encoding/json escapes them. Object members come out in byte order of
// their keys (the order Kubernetes shows for custom resources, whose managedFields are stored
// as generic JSON), so "." sorts first.
//
// Paths print the way kube-apiserver prints them in apply conflicts: `.data.a`,
// `.spec.ports[port=80,protocol="TCP"]`, `.metadata.finalizers[="x"]`, `.spec.items[0]`.
//
// Values of these types are immutable once built except through the documented mutators;
// thread-compatible (const use from many threads is safe).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>  // PathElement holds JSON values
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::machinery {

// A total order on JSON values: null < booleans < numbers < strings < arrays < objects;
// numbers compare numerically (1 == 1.0), strings by bytes, arrays and objects (by sorted
// key) lexicographically. Returns <0, 0 or >0.
int CompareJsonValues(const Json& a, const Json& b);

// `value` as compact JSON the way Go's encoding/json writes it: object members sorted by key,
// `<`, `>`, `&`, U+2028 and U+2029 escaped as \u00xx / \u20xx, integral numbers without a
// fraction. Never fails; invalid UTF-8 bytes become U+FFFD as in Go.
std::string GoJson(const Json& value);

class PathElement {
 public:
  enum class Kind { kField, kKey, kValue, kIndex };
  // Key fields of an associative-list element, sorted by name, names unique.
  using KeyFields = std::vector<std::pair<std::string, Json>>;

  static PathElement Field(std::string name);
  // Sorts `fields` by name; a later duplicate name replaces an earlier one.
  static PathElement Key(KeyFields fields);
  static PathElement Value(Json value);
  static PathElement Index(int64_t index);

  // Parses one serialized element ("f:name", "k:{...}", "v:<json>", "i:<int>"). Errors are
  // BadRequest: shorter than two bytes, no ':' second, malformed JSON (or nested deeper than
  // 32 levels), a `k:` that is not a JSON object, an `i:` that is not a decimal integer. A
  // well-formed element of a type this version does not know (e.g. "x:...") is NotFound, which
  // FieldSet::FromJson skips the way Kubernetes does.
  static core::Result<PathElement> Parse(std::string_view text);

  Kind kind() const { return kind_; }
  // Only meaningful for the matching kind.
  const std::string& field_name() const { return name_; }
  const KeyFields& key() const { return key_; }
  const Json& value() const { return value_; }
  int64_t index() const { return index_; }

  // The FieldsV1 form: "f:name", "k:{\"name\":\"c\"}", "v:\"x\"", "i:3".
  std::string Serialize() const;
  // The human form used in conflicts: ".name", "[name=\"c\"]", "[=\"x\"]", "[3]".
  std::string ToString() const;

  // Order: fields < keys < values < indices, then by content (names by bytes, keys field by
  // field, values by CompareJsonValues).
  int Compare(const PathElement& other) const;
  bool operator<(const PathElement& other) const { return Compare(other) < 0; }
  bool operator==(const PathElement& other) const { return Compare(other) == 0; }

 private:
  Kind kind_ = Kind::kField;
  std::string name_;
  KeyFields key_;
  Json value_;
  int64_t index_ = 0;
};

using Path = std::vector<PathElement>;

// ".spec.containers[name=\"c\"].image"; "" for the empty path.
std::string PathToString(const Path& path);

class FieldSet {
 public:
  FieldSet() = default;
  // Builds a set holding `paths`.
  static FieldSet FromPaths(const std::vector<Path>& paths);

  // Parses FieldsV1 JSON (an object). Each entry's value is an object: `{}` marks a member,
  // an object with entries holds children, `".":{}` among them marks the node itself as a
  // member too. As in Kubernetes' reader, null counts as {}, "." counts whatever its value,
  // unknown element types are skipped, and a child with no known entries is a member.
  // Errors (BadRequest): any other non-object value, a malformed element (see
  // PathElement::Parse), nesting deeper than 128 levels.
  static core::Result<FieldSet> FromJson(const Json& fields_v1);
  // FieldsV1 JSON; an empty set is {}.
  Json ToJson() const;

  // Adds `path` (its parents are not added). The empty path is ignored: nobody owns the
  // whole object.
  void Insert(const Path& path);
  // Whether `path` itself is a member.
  bool Has(const Path& path) const;
  bool Empty() const;
  // Number of member paths.
  size_t Size() const;

  // Whether `element` is a member at this level.
  bool HasMember(const PathElement& element) const;
  // The subset below `element` (paths relative to it), nullptr when there is none.
  const FieldSet* Child(const PathElement& element) const;
  // Elements that are members at this level, sorted.
  const std::vector<PathElement>& members() const { return members_; }
  // Elements with a non-empty subset below, sorted, with that subset.
  std::vector<std::pair<PathElement, const FieldSet*>> children() const;

  FieldSet Union(const FieldSet& other) const;
  FieldSet Intersection(const FieldSet& other) const;
  // Members of this set that are not members of `other`. Parents and children are distinct
  // paths: removing `.a` leaves `.a.b`.
  FieldSet Difference(const FieldSet& other) const;
  // Like Difference, but a member of `other` also removes every path below it.
  FieldSet RecursiveDifference(const FieldSet& other) const;
  // Only the members that have no member below them.
  FieldSet Leaves() const;

  // Every member path, depth first: at each node its members (sorted), then its children's
  // paths (sorted by element). This is the order kube-apiserver lists conflicts in.
  std::vector<Path> Paths() const;
  void Iterate(const std::function<void(const Path&)>& visit) const;
  // One PathToString per line, in Paths() order.
  std::string ToString() const;

  bool operator==(const FieldSet& other) const;

 private:
  struct Node;
  void IterateFrom(Path& prefix, const std::function<void(const Path&)>& visit) const;
  FieldSet* Descend(const PathElement& element);
  void Normalize();  // drops empty children, recursively
  static core::Status ReadFieldsV1(const Json& json, int depth, FieldSet& into, bool* is_member);

  std::vector<PathElement> members_;  // sorted, unique
  std::vector<Node> children_;        // sorted by element, each subset non-empty
};

struct FieldSet::Node {
  PathElement element;
  FieldSet set;
};

}  // namespace klutch::machinery
