// libFuzzer target for the FieldsV1 parser (FieldSet::FromJson): any JSON document must parse
// to a set or fail with BadRequest, never crash, hang or trip a sanitizer; a parsed set must
// survive serialization unchanged, its paths and elements must round-trip, and the set
// algebra must obey its identities.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/status.h"
#include "machinery/fieldpath.h"

using klutch::machinery::FieldSet;
using klutch::machinery::Json;
using klutch::machinery::Path;
using klutch::machinery::PathElement;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;

  auto set = FieldSet::FromJson(json);
  if (!set.ok()) {
    if (set.status().reason() != klutch::core::Reason::kBadRequest) __builtin_trap();
    return 0;
  }
  // The canonical form reads back as the same set and is a fixed point.
  Json canonical = set->ToJson();
  auto again = FieldSet::FromJson(canonical);
  if (!again.ok() || !(*again == *set) || again->ToJson() != canonical) __builtin_trap();

  // Every element re-parses from its serialized form; every path prints.
  set->Iterate([](const Path& path) {
    for (const PathElement& element : path) {
      auto parsed = PathElement::Parse(element.Serialize());
      if (!parsed.ok() || !(*parsed == element)) __builtin_trap();
    }
    (void)klutch::machinery::PathToString(path);
  });
  if (!(FieldSet::FromPaths(set->Paths()) == *set)) __builtin_trap();

  // Set identities.
  if (!(set->Union(*set) == *set) || !(set->Intersection(*set) == *set)) __builtin_trap();
  if (!set->Difference(*set).Empty() || !set->RecursiveDifference(*set).Empty()) {
    __builtin_trap();
  }
  if (set->Leaves().Size() > set->Size()) __builtin_trap();
  if (set->Empty() != (set->Size() == 0)) __builtin_trap();
  return 0;
}
