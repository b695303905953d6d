// SchemaCursor: a read-only position inside an OpenAPI v3 schema, used by the patch and
// field-management code to ask "what kind of list is this?" while walking an object.
//
// It resolves `$ref: #/components/schemas/X` and the `allOf: [{$ref}]` wrapping Kubernetes
// uses, against the `components.schemas` map it was given. An unknown cursor (no schema)
// answers every question with the defaults: granular maps, atomic lists, no patch strategy.
// Cursors are cheap values pointing into JSON owned by the caller, which must outlive them.
// Thread-compatible (const use from many threads is safe).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "machinery/json.h"

namespace klutch::machinery {

class SchemaCursor {
 public:
  SchemaCursor() = default;
  // `schema`: the node to start at (may itself be a $ref); `schemas`: components.schemas.
  SchemaCursor(const Json* schema, const Json* schemas);

  bool known() const { return node_ != nullptr; }
  // The resolved schema node, or nullptr when unknown.
  const Json* node() const { return node_; }

  // The schema of object property `name`; falls back to additionalProperties (maps).
  SchemaCursor Field(std::string_view name) const;
  // The schema of list elements (`items`).
  SchemaCursor Items() const;
  // The schema of map values (`additionalProperties` when it is a schema).
  SchemaCursor Values() const;

  // The string value of an extension or keyword on the resolved node ("" when absent), e.g.
  // Extension("x-kubernetes-list-type") == "map".
  std::string Extension(std::string_view key) const;
  // x-kubernetes-list-map-keys.
  std::vector<std::string> ListMapKeys() const;
  // The declared "type" ("object", "array", ...), "" when absent.
  std::string Type() const { return Extension("type"); }
  bool PreservesUnknownFields() const;

 private:
  static const Json* Resolve(const Json* node, const Json* schemas);
  // The node as written before resolving $ref/allOf: Kubernetes puts extensions such as
  // x-kubernetes-patch-strategy beside the allOf wrapper, so they are looked up here first.
  const Json* outer_ = nullptr;
  const Json* node_ = nullptr;
  const Json* schemas_ = nullptr;
};

}  // namespace klutch::machinery
