#include "apis/manifests.h"

#include <algorithm>
#include <span>
#include <string_view>

#include "apis/embedded_files.h"

namespace klutch::apis {
namespace {

// Lower ranks are applied first; files not named here come after the named ones.
int Rank(std::string_view name) {
  static constexpr std::string_view kOrder[] = {"namespace.yaml", "serviceaccount.yaml",
                                                "rbac.yaml", "deployment.yaml"};
  auto it = std::find(std::begin(kOrder), std::end(kOrder), name);
  return static_cast<int>(it - std::begin(kOrder));
}

std::vector<ManifestFile> Files(std::span<const internal::EmbeddedFile> files,
                                const std::string& prefix) {
  std::vector<ManifestFile> out;
  for (const internal::EmbeddedFile& file : files) {
    ManifestFile m{prefix + std::string(file.name), ""};
    for (std::string_view chunk : file.chunks) m.text.append(chunk);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

std::vector<ManifestFile> KonnectorManifests() {
  std::vector<ManifestFile> out;
  for (ManifestFile& m : Files(internal::KonnectorManifestFiles(), "")) {
    if (m.name != "kustomization.yaml") out.push_back(std::move(m));
  }
  std::stable_sort(out.begin(), out.end(), [](const ManifestFile& a, const ManifestFile& b) {
    return Rank(a.name) < Rank(b.name);
  });
  return out;
}

std::vector<ManifestFile> PackageManifests() {
  std::vector<ManifestFile> out = Files(internal::ProviderAnyninesCrdFiles(), "crds/");
  for (ManifestFile& f : Files(internal::PackageDefinitionFiles(), "definitions/")) {
    out.push_back(std::move(f));
  }
  for (ManifestFile& f : Files(internal::PackageCompositionFiles(), "compositions/")) {
    out.push_back(std::move(f));
  }
  for (ManifestFile& f : Files(internal::PackageProviderConfigFiles(), "providerconfigs/")) {
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<ManifestFile> A8sCrds() { return Files(internal::A8sCrdFiles(), "crds/"); }

std::vector<ManifestFile> ProviderConfigTemplates() {
  return Files(internal::ProviderConfigTemplateFiles(), "providerconfigs/");
}

}  // namespace klutch::apis
