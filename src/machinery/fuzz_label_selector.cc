// libFuzzer target for LabelSelector::Parse and LabelSelector::FromJson.
//
// Checks that errors are BadRequest, that the canonical string form of a parsed selector parses
// back to the same requirements, and exercises Matches on labels built from the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

#include "machinery/json.h"
#include "machinery/selector.h"

namespace {

using klutch::machinery::Json;
using klutch::machinery::LabelSelector;

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

  auto parsed = LabelSelector::Parse(input);
  if (!parsed.ok()) {
    Check(parsed.status().reason() == klutch::core::Reason::kBadRequest);
  } else {
    auto again = LabelSelector::Parse(parsed->ToString());
    Check(again.ok());
    Check(again->requirements() == parsed->requirements());
    Check(again->ToString() == parsed->ToString());
    Json labels = Json::object();
    for (const auto& r : parsed->requirements()) {
      labels[r.key] = r.values.empty() ? std::string("1") : r.values.front();
    }
    (void)parsed->Matches(labels);
    (void)parsed->Matches(Json());
    if (parsed->Empty()) Check(parsed->Matches(labels));
  }

  auto json = ParseOrNothing(input);
  if (json) {
    auto from_json = LabelSelector::FromJson(*json);
    if (!from_json.ok()) {
      Check(from_json.status().reason() == klutch::core::Reason::kBadRequest);
    } else {
      (void)from_json->Matches(json->is_object() ? json->value("matchLabels", Json()) : Json());
      // A selector built from an object renders to a string the parser accepts (the
      // requirements may differ only in operator spelling, which ToString preserves).
      auto reparsed = LabelSelector::Parse(from_json->ToString());
      Check(reparsed.ok());
    }
  }
  return 0;
}
