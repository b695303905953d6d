// libFuzzer target for ApplyStrategicMergePatch.
//
// Input: one byte choosing the schema (a small built-in-like schema with every list strategy,
// or none), then an `original` JSON object, a newline and a `patch`. Checks that failures are
// BadRequest and that no directive key leaks into a result whose original had none.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "machinery/json.h"
#include "machinery/schema_cursor.h"
#include "machinery/strategic_merge_patch.h"

namespace {

using klutch::machinery::Json;
using klutch::machinery::SchemaCursor;

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

// Keys are kept short so that the fuzzer finds them: merge lists by key ("m", key "k"), a set
// ("s"), an atomic list ("a"), a replace-strategy map ("r"), and recursion through "o".
constexpr std::string_view kSchemas = R"({
  "T":{"type":"object","properties":{
    "m":{"type":"array","items":{"$ref":"#/components/schemas/T"},
         "x-kubernetes-patch-merge-key":"k","x-kubernetes-patch-strategy":"merge"},
    "n":{"type":"array","items":{"allOf":[{"$ref":"#/components/schemas/T"}]},
         "x-kubernetes-patch-merge-key":"k","x-kubernetes-patch-strategy":"merge,retainKeys"},
    "s":{"type":"array","items":{"type":"string"},"x-kubernetes-patch-strategy":"merge"},
    "a":{"type":"array","items":{"$ref":"#/components/schemas/T"}},
    "r":{"type":"object","x-kubernetes-patch-strategy":"replace",
         "additionalProperties":{"type":"string"}},
    "o":{"allOf":[{"$ref":"#/components/schemas/T"}],"x-kubernetes-patch-strategy":"retainKeys"},
    "w":{"type":"object","additionalProperties":{"$ref":"#/components/schemas/T"}}}}})";

bool IsDirectiveKey(std::string_view key) {
  return key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder") ||
         key.starts_with("$deleteFromPrimitiveList");
}

bool HasDirectiveKey(const Json& value) {
  std::vector<const Json*> stack{&value};
  while (!stack.empty()) {
    const Json* node = stack.back();
    stack.pop_back();
    if (node->is_object()) {
      for (const auto& [key, child] : node->items()) {
        if (IsDirectiveKey(key)) return true;
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
  static const Json* schemas = new Json(Json::parse(kSchemas));
  if (size < 1) return 0;
  bool with_schema = (data[0] & 1) == 0;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  auto original = ParseOrNothing(input.substr(0, newline));
  auto patch = ParseOrNothing(input.substr(newline + 1));
  if (!original || !patch) return 0;

  SchemaCursor cursor = with_schema ? SchemaCursor(&schemas->at("T"), schemas) : SchemaCursor();
  auto result = klutch::machinery::ApplyStrategicMergePatch(*original, *patch, cursor);
  if (!result.ok()) {
    Check(result.status().reason() == klutch::core::Reason::kBadRequest);
    return 0;
  }
  Check(result->is_object());
  if (!HasDirectiveKey(*original)) Check(!HasDirectiveKey(*result));
  return 0;
}
