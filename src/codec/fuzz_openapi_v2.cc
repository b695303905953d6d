// libFuzzer target for EncodeOpenApiV2Protobuf: any JSON value must yield protobuf bytes or a
// BadRequest Status, never a crash, hang or sanitizer report. The parsed value is encoded as the
// document itself and also planted where each message table is reached (a definition, a path
// item, an operation, a parameter, a response, a security definition), so that short inputs
// exercise deep tables.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "codec/openapi_v2.h"
#include "core/status.h"
#include "machinery/json.h"

namespace {

void Check(const klutch::machinery::Json& doc) {
  auto result = klutch::codec::EncodeOpenApiV2Protobuf(doc);
  if (!result.ok() && result.status().reason() != klutch::core::Reason::kBadRequest) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using klutch::machinery::Json;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = klutch::machinery::ParseJson(text);
  if (!parsed.ok()) return 0;
  const Json& v = *parsed;
  Check(v);
  Check(Json{{"definitions", {{"D", v}}}});
  Check(Json{{"paths", {{"/p", v}}}});
  Check(Json{{"paths", {{"/p", {{"get", v}}}}}});
  Check(Json{{"paths", {{"/p", {{"parameters", Json::array({v})}}}}}});
  Check(Json{{"responses", {{"r", v}}}, {"parameters", {{"p", v}}}});
  Check(Json{{"securityDefinitions", {{"s", v}}}, {"security", Json::array({v})}});
  return 0;
}
