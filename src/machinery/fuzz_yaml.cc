// libFuzzer target for ParseYaml and ParseJsonReportingDuplicates: any input either decodes
// or is a BadRequest, never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "machinery/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto y = klutch::machinery::ParseYaml(in);
  if (!y.ok() && y.status().reason() != klutch::core::Reason::kBadRequest) std::abort();
  std::vector<std::string> dups;
  auto j = klutch::machinery::ParseJsonReportingDuplicates(in, dups);
  if (!j.ok() && j.status().reason() != klutch::core::Reason::kBadRequest) std::abort();
  if (j.ok()) {
    auto again = klutch::machinery::ParseJson(klutch::machinery::Dump(*j));
    if (!again.ok()) std::abort();
  }
  return 0;
}
