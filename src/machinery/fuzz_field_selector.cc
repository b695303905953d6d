// libFuzzer target for FieldSelector::Parse.
//
// Checks that errors are BadRequest, that ToString re-parses to the same requirements, and that
// Matches agrees with a direct evaluation of the requirements.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "machinery/selector.h"

namespace {

using klutch::machinery::FieldSelector;

void Check(bool condition) {
  if (!condition) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto parsed = FieldSelector::Parse(input);
  if (!parsed.ok()) {
    Check(parsed.status().reason() == klutch::core::Reason::kBadRequest);
    return 0;
  }
  auto again = FieldSelector::Parse(parsed->ToString());
  Check(again.ok());
  Check(again->requirements() == parsed->requirements());

  // Every field holds its own name: "a=a" matches, "a!=a" does not.
  auto get = [](std::string_view field) -> std::optional<std::string> {
    if (field.empty()) return std::nullopt;
    return std::string(field);
  };
  bool expected = true;
  for (const auto& r : parsed->requirements()) {
    std::string value = get(r.field).value_or("");
    if ((value == r.value) != r.equal) expected = false;
  }
  Check(parsed->Matches(get) == expected);
  return 0;
}
