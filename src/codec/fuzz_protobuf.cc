// libFuzzer target for DecodeKubernetesProtobuf: any byte string must yield a JSON object or a
// BadRequest / UnsupportedMediaType Status, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "codec/protobuf.h"
#include "core/status.h"
#include "machinery/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  auto result = klutch::codec::DecodeKubernetesProtobuf(body);
  if (result.ok()) {
    // A decoded object always names its kind and serializes.
    if (!result->is_object() || !result->contains("kind")) __builtin_trap();
    (void)klutch::machinery::Dump(*result);
  } else if (result.status().reason() != klutch::core::Reason::kBadRequest &&
             result.status().reason() != klutch::core::Reason::kUnsupportedMediaType) {
    __builtin_trap();
  }
  return 0;
}
