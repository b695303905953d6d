// Structural schema operations on objects: pruning unknown fields, defaulting and
// validation of an object against an OpenAPI v3 schema, as kube-apiserver does for custom
// resources (and, for unknown-field detection, for built-in kinds).
//
// This is the base the CEL rules of x-kubernetes-validations build on (issue #4). Pure
// functions over caller-owned JSON; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"
#include "machinery/schema_cursor.h"

namespace klutch::schema {

using machinery::Json;
using machinery::SchemaCursor;

// Removes fields the schema does not declare (unless x-kubernetes-preserve-unknown-fields
// or additionalProperties allow them) and appends their paths ("spec.shape",
// "spec.items[0].x") to `pruned`. Top-level apiVersion, kind and metadata are always
// allowed; metadata is checked against `object_meta` when that cursor is known.
void PruneUnknownFields(Json& object, const SchemaCursor& schema, const SchemaCursor& object_meta,
                        std::vector<std::string>& pruned);

// Prunes `value` against the schema node alone (kube-apiserver's pruning of a default
// value); with `is_resource_root`, apiVersion, kind and metadata are kept.
void PruneValue(Json& value, const Json& schema, bool is_resource_root);

// Fills `default` values for absent properties, recursively.
void ApplyDefaults(Json& object, const SchemaCursor& schema);

// Validates a custom resource as kube-apiserver's custom resource strategy does after the
// metadata checks: the OpenAPI value validation of kube-openapi (type, format, nullable,
// enum, bounds, lengths, pattern, items, required, min/maxProperties, additionalProperties,
// allOf/anyOf/oneOf/not, x-kubernetes-int-or-string), then embedded resources
// (x-kubernetes-embedded-resource: apiVersion/kind required, metadata validated), then
// x-kubernetes-list-type set/map uniqueness. Appends one cause per failure with the field
// path, message and CauseType kube-apiserver gives ("spec.size: Invalid value: \"string\":
// spec.size in body must be of type integer: \"string\"", reason FieldValueTypeInvalid).
// Sibling fields are visited in sorted key order (Kubernetes' order is random).
void Validate(const Json& object, const SchemaCursor& schema, std::vector<core::Cause>& causes);

// The kube-openapi part of Validate for any value against a schema node, with the causes
// rooted at `fld_path` as apiextensions' ValidateCustomResource roots them (nullopt: no
// prefix; composite anyOf/oneOf/allOf/not failures are then reported at "<nil>").
void ValidateValue(const Json& value, const Json& schema,
                   const std::optional<std::string>& fld_path, std::vector<core::Cause>& causes);

// Embedded resources under `object` (and `object` itself when `is_resource_root`).
void ValidateEmbeddedResources(const Json& object, const Json& schema, const std::string& fld_path,
                               bool is_resource_root, std::vector<core::Cause>& causes);

// x-kubernetes-list-type set/map uniqueness under `object`: "spec.ports[1]: Duplicate
// value: map[string]interface {}{\"name\":\"http\"}".
void ValidateListSetsAndMaps(const Json& object, const Json& schema, const std::string& fld_path,
                             std::vector<core::Cause>& causes);

// Only the type checks of Validate, over the whole object including metadata: what decoding
// into typed structs enforces for built-in kinds.
void ValidateTypes(const Json& object, const SchemaCursor& schema,
                   std::vector<core::Cause>& causes);

}  // namespace klutch::schema
