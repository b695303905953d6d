#include "apis/klutch_crds.h"

#include <string>
#include <string_view>

#include "apis/embedded_files.h"

namespace klutch::apis {

std::string KlutchCrdYaml(std::string_view file_name) {
  std::string text;
  for (const internal::EmbeddedFile& file : internal::KlutchDataFiles()) {
    if (file.name != file_name) continue;
    for (std::string_view chunk : file.chunks) text.append(chunk);
    break;
  }
  return text;
}

std::vector<std::string_view> ProviderCrdFiles(bool control_plane_mode) {
  std::vector<std::string_view> files = {
      kApiServiceExportRequestsCrdFile, kApiServiceExportsCrdFile, kApiServiceNamespacesCrdFile,
      kClusterBindingsCrdFile, kApiServiceExportTemplatesCrdFile};
  if (control_plane_mode) {
    files.push_back(kApiServiceBindingsCrdFile);
    files.push_back(kAppClusterBindingsCrdFile);
  }
  return files;
}

}  // namespace klutch::apis
