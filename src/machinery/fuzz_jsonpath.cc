// libFuzzer target for JsonPath::Compile and Evaluate: the first line is the expression, the
// rest a JSON document. Malformed expressions must be BadRequest; evaluation must not crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "machinery/json.h"
#include "machinery/jsonpath.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto nl = in.find('\n');
  std::string_view expr = in.substr(0, nl);
  auto path = klutch::machinery::JsonPath::Compile(expr);
  if (!path.ok()) {
    if (path.status().reason() != klutch::core::Reason::kBadRequest) std::abort();
    return 0;
  }
  if (nl == std::string_view::npos) return 0;
  auto doc = klutch::machinery::ParseJson(in.substr(nl + 1));
  if (!doc.ok()) return 0;
  for (const auto* v : path->Evaluate(*doc)) {
    if (v == nullptr) std::abort();
  }
  return 0;
}
