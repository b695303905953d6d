// libFuzzer target for ApplyJsonPatch on fuzzer-made (document, patch) pairs.
//
// Input: a JSON document, a newline, a JSON patch. Beyond "no crash, no exception, no leak" it
// checks that failures use the documented reasons and that a successful result tests equal to
// itself through a `test` operation on the root.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "machinery/json.h"
#include "machinery/json_patch.h"

namespace {

using klutch::core::Reason;
using klutch::machinery::Json;

// Not machinery::ParseJson: it aborts on numbers out of double range (its error path rethrows
// out_of_range uncaught), which would hide every other finding.
std::optional<Json> ParseOrNothing(std::string_view text) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  auto doc = ParseOrNothing(input.substr(0, newline));
  auto patch = ParseOrNothing(input.substr(newline + 1));
  if (!doc || !patch) return 0;

  // A small copy budget so that the budget path is reachable with small inputs.
  klutch::machinery::JsonPatchOptions options;
  options.max_copy_bytes = 4096;
  options.max_operations = 64;
  auto result = klutch::machinery::ApplyJsonPatch(*doc, *patch, options);
  if (!result.ok()) {
    Reason reason = result.status().reason();
    Check(reason == Reason::kBadRequest || reason == Reason::kInvalid ||
          reason == Reason::kRequestEntityTooLarge);
    Check(!result.status().message().empty());
    return 0;
  }
  Json self_test = Json::array({{{"op", "test"}, {"path", ""}, {"value", *result}}});
  auto again = klutch::machinery::ApplyJsonPatch(*result, self_test);
  Check(again.ok() && *again == *result);
  return 0;
}
