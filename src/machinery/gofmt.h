// Go's fmt formatting of decoded JSON values, for the places where Kubernetes-ecosystem
// tools print values with fmt and users depend on the exact text: Crossplane's string
// Format transform and Combine patches (fmt.Sprintf), and provider-anynines' flattened
// binding credentials (fmt.Sprint).
//
// Values are as Go sees unstructured JSON: integers are int64, other numbers float64, arrays
// []interface{}, objects map[string]interface{} (printed with sorted keys). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "machinery/json.h"

namespace klutch::machinery {

// fmt.Sprint(value): strings as-is, integers in decimal, floats in %g's shortest form
// (5432, 0.5, 1e+06), true/false, null as <nil>, arrays as [a b], objects as map[k:v].
std::string GoSprint(const Json& value);

// fmt.Sprintf(format, args...) for the verbs %v %s %d %f %F %e %E %g %G %t %q %x %X %o %b %c
// %% with flags (- + # 0 space), width and precision (also `*`). A verb that does not fit its
// argument prints Go's %!d(string=x); missing arguments %!v(MISSING); unused ones
// %!(EXTRA string=x).
std::string GoSprintf(std::string_view format, const std::vector<Json>& args);

}  // namespace klutch::machinery
