#include "apis/crossplane_crds.h"

#include <string>
#include <string_view>
#include <vector>

#include "apis/embedded_files.h"

namespace klutch::apis {

std::string CrossplaneCrdYaml(std::string_view file_name) {
  std::string text;
  for (const internal::EmbeddedFile& file : internal::CrossplaneDataFiles()) {
    if (file.name != file_name) continue;
    for (std::string_view chunk : file.chunks) text.append(chunk);
    break;
  }
  return text;
}

std::vector<std::string> CrossplaneCrdFiles() {
  // embed_files.cmake emits the files sorted by name.
  std::vector<std::string> names;
  for (const internal::EmbeddedFile& file : internal::CrossplaneDataFiles()) {
    names.emplace_back(file.name);
  }
  return names;
}

}  // namespace klutch::apis
