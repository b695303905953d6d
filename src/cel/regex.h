// Regular expressions as Go's regexp package (and so kube-apiserver) reports them: RE2
// accepts the same syntax; this gives RE2's rejections Go's wording.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::cel {

// Go's regexp.Compile error for `pattern`, e.g. "error parsing regexp: missing closing ):
// `(a`"; empty when the pattern compiles.
std::string GoRegexpError(std::string_view pattern);

}  // namespace klutch::cel
