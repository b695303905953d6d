// Field errors worded and typed as k8s.io/apimachinery's field.Error renders them, with bad
// values printed the way Go's fmt prints the decoded JSON (int64, float64, string, bool,
// map[string]interface {}, []interface {}), so causes match kube-apiserver byte for byte.
//
// Every constructor sets core::Cause::reason to the Kubernetes CauseType; callers (e.g. the
// CEL rule evaluation) may rely on it, see IsBlocking. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::schema {

using core::GoQuote;

using machinery::Json;

// strconv.Quote: a string as Go's %q prints it.

// Go's fmt "%v" of a float64 ("10", "1.5", "1e+21", "1e-05").
std::string GoFloat(double d);
// A JSON value as encoding/json marshals it after decoding into interface{} (numbers:
// integers as int64, others as float64 in Go's shortest form, e.g. 1.0 -> "1").
std::string GoJson(const Json& v);
// The bad value as field.Error prints it: strings quoted, numbers and bools plain, null as
// "null" (quoted, as Go does), objects and arrays in Go's %#v form.
std::string GoValue(const Json& v);

// Cause constructors; `field` is the rendered field path.
core::Cause Invalid(std::string field, const Json& value, std::string_view detail);
core::Cause TypeInvalid(std::string field, const Json& value, std::string_view detail);
core::Cause Required(std::string field, std::string_view detail = "");
core::Cause Forbidden(std::string field, std::string_view detail);
core::Cause NotSupported(std::string field, const Json& value,
                         const std::vector<std::string>& supported);
core::Cause TooLong(std::string field, long long max_length);
core::Cause TooMany(std::string field, long long actual, long long max);
core::Cause Duplicate(std::string field, const Json& value);

// True when a cause would make kube-apiserver skip x-kubernetes-validations rules
// (apiextensions' hasBlockingErr): NotSupported, Required, TooLong, TooMany, TypeInvalid.
bool IsBlocking(const core::Cause& cause);

}  // namespace klutch::schema
