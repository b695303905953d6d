// The CustomResourceDefinitions of the Crossplane APIs that `klutch manager` implements, as YAML
// text embedded from src/apis/crossplane/*.yaml: CompositeResourceDefinition, Composition and
// CompositionRevision (apiextensions.crossplane.io), Function (pkg.crossplane.io), and
// provider-kubernetes' Object and ProviderConfig (kubernetes.crossplane.io). The manager creates
// or updates them at start-up; callers parse the text with machinery::ParseYaml (one document
// per file). Field facts are upstream's, descriptions our own (see each file's header).
//
// The data is immutable and statically initialized; every function here is thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace klutch::apis {

// compositeresourcedefinitions.apiextensions.crossplane.io (v1).
inline constexpr std::string_view kCompositeResourceDefinitionsCrdFile =
    "compositeresourcedefinitions.yaml";
// compositions.apiextensions.crossplane.io (v1).
inline constexpr std::string_view kCompositionsCrdFile = "compositions.yaml";
// compositionrevisions.apiextensions.crossplane.io (v1 stored, v1beta1 served).
inline constexpr std::string_view kCompositionRevisionsCrdFile = "compositionrevisions.yaml";
// functions.pkg.crossplane.io (v1 stored, v1beta1 served).
inline constexpr std::string_view kFunctionsCrdFile = "functions.yaml";
// objects.kubernetes.crossplane.io (v1alpha1).
inline constexpr std::string_view kObjectsCrdFile = "objects.yaml";
// providerconfigs.kubernetes.crossplane.io (v1alpha1).
inline constexpr std::string_view kProviderConfigsCrdFile = "providerconfigs.yaml";

// The text of the embedded file `file_name` (a bare name such as kCompositionsCrdFile), or ""
// when no such file is embedded.
std::string CrossplaneCrdYaml(std::string_view file_name);

// The names of every embedded file, sorted; each one is a valid argument of CrossplaneCrdYaml.
std::vector<std::string> CrossplaneCrdFiles();

}  // namespace klutch::apis
