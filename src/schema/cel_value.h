// JSON objects as CEL values, typed by their OpenAPI v3 schema the way kube-apiserver types
// them for x-kubernetes-validations rules.
//
// `integer` fields are CEL ints and `number` fields doubles (so `5` in a number field is
// 5.0), strings with format byte/duration/date/date-time are bytes/durations/timestamps,
// x-kubernetes-int-or-string is an int or a string, lists of x-kubernetes-list-type set or
// map compare regardless of order, and properties are reached with Kubernetes' escaping
// (`self.foo__dash__bar` is property "foo-bar", `self.__namespace__` is "namespace").
// Without a schema (inside x-kubernetes-preserve-unknown-fields) values are typed by their
// JSON type. The values point into the JSON and schema they were made from, which must
// outlive them. Thread-compatible.
#pragma once

#include <string>
#include <string_view>

#include "cel/value.h"
#include "machinery/json.h"

namespace klutch::schema {

using machinery::Json;

// `schema` may be nullptr (untyped). `root` marks the object at the top of a custom
// resource, whose metadata exposes only name and generateName, as in Kubernetes.
cel::Value ToCelValue(const Json& value, const Json* schema, bool root = false);

// The property name a CEL field name stands for ("foo__dash__bar" -> "foo-bar"), as
// Kubernetes escapes property names that are not CEL identifiers.
std::string UnescapePropertyName(std::string_view name);

}  // namespace klutch::schema
