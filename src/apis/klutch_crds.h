// The CustomResourceDefinitions of Klutch's own API group (klutch.anynines.com) that our
// binaries install into clusters, as YAML text embedded from src/apis/klutch/*.yaml. Today that
// is the APIServiceBinding CRD, which the konnector creates or updates in an App Cluster at
// start-up. Callers parse the text with machinery::ParseYaml.
//
// The data is immutable and statically initialized; every function here is thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::apis {

// The file holding the apiservicebindings.klutch.anynines.com CRD (one YAML document).
inline constexpr std::string_view kApiServiceBindingsCrdFile = "apiservicebindings.yaml";

// The text of the embedded file `file_name` (a bare name such as kApiServiceBindingsCrdFile),
// or "" when no such file is embedded.
std::string KlutchCrdYaml(std::string_view file_name);

}  // namespace klutch::apis
