// The data files of src/apis/builtin/, src/apis/klutch/ and src/apis/crossplane/, compiled into
// the binary. The
// definitions are generated at build time by embed_files.cmake; this header is internal to the
// apis module.
//
// The data is immutable and statically initialized; every function here is thread-safe.
#pragma once

#include <span>
#include <string_view>

namespace klutch::apis::internal {

struct EmbeddedFile {
  std::string_view name;                     // file name, such as "core_v1.yaml"
  std::span<const std::string_view> chunks;  // the content, in order; concatenate to read it
};

// Every file of src/apis/builtin/*.yaml, sorted by name. Never empty.
std::span<const EmbeddedFile> BuiltinDataFiles();

// Every file of src/apis/klutch/*.yaml, sorted by name. Never empty.
std::span<const EmbeddedFile> KlutchDataFiles();

// Every file of src/apis/crossplane/*.yaml, sorted by name. Never empty.
std::span<const EmbeddedFile> CrossplaneDataFiles();

// Every file of deploy/konnector/*.yaml, sorted by name. Never empty.
std::span<const EmbeddedFile> KonnectorManifestFiles();

// deploy/provider-anynines/crds, deploy/package/definitions, deploy/package/compositions,
// deploy/package/providerconfigs and deploy/provider-anynines/providerconfigs (*.yaml, sorted by
// name).
std::span<const EmbeddedFile> ProviderAnyninesCrdFiles();
std::span<const EmbeddedFile> PackageDefinitionFiles();
std::span<const EmbeddedFile> PackageCompositionFiles();
std::span<const EmbeddedFile> PackageProviderConfigFiles();
std::span<const EmbeddedFile> ProviderConfigTemplateFiles();

// deploy/operator/crds/*.yaml, sorted by name: the a8s APIs `klutch operator` serves.
std::span<const EmbeddedFile> A8sCrdFiles();

}  // namespace klutch::apis::internal
