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

}  // namespace klutch::apis
