// Checks of a CustomResourceDefinition version's openAPIV3Schema as kube-apiserver performs
// them on CRD create and update (apiextensions validation.go and the structural schema
// rules): structurality (types set for specified fields, value validations in
// allOf/anyOf/oneOf/not without type/default/description/nullable/extensions, metadata
// restricted to name and generateName, x-kubernetes-embedded-resource of type object,
// x-kubernetes-int-or-string patterns), forbidden keywords ($ref, uniqueItems: true,
// additionalProperties beside properties, ...), list/map type extensions and
// x-kubernetes-list-map-keys, valid patterns, and defaults that validate and are pruned.
//
// CEL rules (x-kubernetes-validations) are checked elsewhere (validation_rules.h). Pure
// functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::schema {

using machinery::Json;

// Rules kube-apiserver relaxes on update when the stored CRD already breaks them, so that
// existing CRDs stay updatable.
struct CrdSchemaOptions {
  bool require_structural = true;
  bool require_pruned_defaults = true;
  bool require_atomic_set_items = true;
  bool require_map_list_keys_defaults = true;
  bool require_valid_property_type = true;
};

// The options for an update whose stored version had `old_schema` (nullptr on create).
CrdSchemaOptions CrdSchemaOptionsFor(const Json* old_schema);

// Appends one cause per violation of `schema` (a version's openAPIV3Schema), with fields
// under `path` ("spec.versions[0].schema.openAPIV3Schema"), worded as kube-apiserver words
// them, e.g. "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value:
// must not be empty for specified object fields". Structural-schema errors are sorted as
// kube-apiserver sorts them; default values are checked only for structural schemas.
void ValidateCrdSchema(const Json& schema, const std::string& path, const CrdSchemaOptions& options,
                       std::vector<core::Cause>& causes);

}  // namespace klutch::schema
