// Structural schema operations on objects: pruning unknown fields, defaulting and
// validation of an object against an OpenAPI v3 schema, as kube-apiserver does for custom
// resources (and, for unknown-field detection, for built-in kinds).
//
// This is the base the CEL rules of x-kubernetes-validations build on (issue #4). Pure
// functions over caller-owned JSON; thread-safe.
#pragma once

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

// Fills `default` values for absent properties, recursively.
void ApplyDefaults(Json& object, const SchemaCursor& schema);

// Checks type, format (int32/int64), nullable, enum, required, minimum/maximum (with
// exclusive forms), multipleOf, minLength/maxLength, pattern, minItems/maxItems,
// uniqueItems, minProperties/maxProperties, x-kubernetes-int-or-string and
// x-kubernetes-list-type uniqueness, appending one cause per failure with kube-apiserver's
// field paths and wording ("spec.size: Invalid value: \"string\": spec.size in body must be
// of type integer: \"string\""). metadata and apiVersion/kind are skipped at the top.
void Validate(const Json& object, const SchemaCursor& schema, std::vector<core::Cause>& causes);

// Only the type checks of Validate, over the whole object including metadata: what decoding
// into typed structs enforces for built-in kinds.
void ValidateTypes(const Json& object, const SchemaCursor& schema,
                   std::vector<core::Cause>& causes);

}  // namespace klutch::schema
