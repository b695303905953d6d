// libFuzzer target for ApplyMergePatch and CreateMergePatch.
//
// Input: two JSON documents separated by a newline, `original` and `modified`. Checks the
// RFC 7386 round trip ApplyMergePatch(original, CreateMergePatch(original, modified)) ==
// modified whenever `modified` is expressible (no null members inside its objects), and that
// identical objects give the empty patch.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "machinery/json.h"
#include "machinery/merge_patch.h"

namespace {

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

// Whether some object inside `value` has a null member (which merge patches cannot express).
bool HasNullMember(const Json& value) {
  std::vector<const Json*> stack{&value};
  while (!stack.empty()) {
    const Json* node = stack.back();
    stack.pop_back();
    if (node->is_object()) {
      for (const auto& [key, child] : node->items()) {
        if (child.is_null()) return true;
        stack.push_back(&child);
      }
    } else if (node->is_array()) {
      for (const Json& child : *node) stack.push_back(&child);
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  auto original = ParseOrNothing(input.substr(0, newline));
  auto modified = ParseOrNothing(input.substr(newline + 1));
  if (!original || !modified) return 0;

  // Applying `modified` as a patch must work for any pair.
  Json applied = klutch::machinery::ApplyMergePatch(*original, *modified);
  Check(!(modified->is_object() && !applied.is_object()));

  Json patch = klutch::machinery::CreateMergePatch(*original, *modified);
  if (!HasNullMember(*modified)) {
    Check(klutch::machinery::ApplyMergePatch(*original, patch) == *modified);
  }
  if (original->is_object()) {
    Check(klutch::machinery::CreateMergePatch(*original, *original) == Json::object());
  }
  return 0;
}
