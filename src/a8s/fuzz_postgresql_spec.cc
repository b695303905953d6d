// libFuzzer target for the operator's reading of Postgresql specs (a8s/postgresql_spec.h): any
// JSON or YAML document is read into engine limits or refused with kInvalid naming a field under
// `spec`, never crashes, hangs or trips a sanitizer. An accepted spec has 1 or 3 replicas, a
// version from 13 to 16, a positive volume and shared buffers, and changing a spec to itself is
// always allowed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "a8s/postgresql_spec.h"
#include "machinery/json.h"

namespace a = klutch::a8s;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = klutch::machinery::ParseJson(text);
  if (!json.ok()) json = klutch::machinery::ParseYaml(text);
  if (!json.ok()) return 0;
  auto spec = a::ParsePostgresqlSpec(*json);
  if (!spec.ok()) {
    if (!klutch::core::IsInvalid(spec.status())) __builtin_trap();
    if (!spec.status().message().starts_with("spec")) __builtin_trap();
    (void)a::InSpecTerms(spec.status().message());
    return 0;
  }
  if (spec->replicas != 1 && spec->replicas != 3) __builtin_trap();
  if (spec->limits.nodes != spec->replicas) __builtin_trap();
  if (spec->requested_version < 13 || spec->requested_version > 16) __builtin_trap();
  if (spec->volume_bytes <= 0 || spec->limits.shared_buffers_mb < 1) __builtin_trap();
  if (!spec->parameters.is_object()) __builtin_trap();
  for (const auto& [key, value] : spec->parameters.items()) {
    if (key.empty()) __builtin_trap();
  }
  if (!a::CheckSpecChange(*spec, *spec).ok()) __builtin_trap();
  return 0;
}
