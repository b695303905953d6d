// libFuzzer target for ParseYaml, ParseYamlDocuments and ParseJsonReportingDuplicates: any
// input either decodes or is a BadRequest, never a crash or an exception; and ToYaml of what
// decoded reads back as the same value (when the value survives JSON, i.e. has valid UTF-8
// and finite numbers).
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
  if (y.ok()) {
    auto exact = klutch::machinery::ParseJson(klutch::machinery::Dump(*y));
    if (exact.ok() && *exact == *y) {
      auto back = klutch::machinery::ParseYaml(klutch::machinery::ToYaml(*y));
      if (!back.ok() || *back != *y) std::abort();
    }
  }
  auto docs = klutch::machinery::ParseYamlDocuments(in);
  if (!docs.ok() && docs.status().reason() != klutch::core::Reason::kBadRequest) std::abort();
  std::vector<std::string> dups;
  auto j = klutch::machinery::ParseJsonReportingDuplicates(in, dups);
  if (!j.ok() && j.status().reason() != klutch::core::Reason::kBadRequest) std::abort();
  if (j.ok()) {
    auto again = klutch::machinery::ParseJson(klutch::machinery::Dump(*j));
    if (!again.ok()) std::abort();
  }
  return 0;
}
