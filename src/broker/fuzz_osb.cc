// libFuzzer target for the broker's request checks (broker/osb.h): any body, header or ID is
// accepted or refused with a 4xx OsbError that has a description, never crashes, hangs or
// trips a sanitizer. Accepted bodies hold what the OSB spec requires (non-empty service_id and
// plan_id, a provision's non-empty organization_guid and space_guid; parameters and context
// objects); an accepted ID is never "." or "..".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "broker/osb.h"

namespace b = klutch::broker;

namespace {

void CheckError(const std::optional<b::OsbError>& e) {
  if (!e) return;
  if (e->status < 400 || e->status > 499 || e->description.empty()) __builtin_trap();
  b::Json body = b::ErrorBody(*e);
  if (!body.contains("error") || !body.contains("description")) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  b::ProvisionRequest provision;
  auto e = b::ParseProvision(text, &provision);
  CheckError(e);
  if (!e && (provision.service_id.empty() || provision.plan_id.empty() ||
             provision.organization_guid.empty() || provision.space_guid.empty() ||
             !provision.parameters.is_object() || !provision.context.is_object())) {
    __builtin_trap();
  }
  b::UpdateRequest update;
  e = b::ParseUpdate(text, &update);
  CheckError(e);
  if (!e && (update.service_id.empty() || (update.plan_id && update.plan_id->empty()) ||
             (update.parameters && !update.parameters->is_object()))) {
    __builtin_trap();
  }
  b::BindRequest bind;
  e = b::ParseBind(text, &bind);
  CheckError(e);
  if (!e && (bind.service_id.empty() || bind.plan_id.empty())) __builtin_trap();
  CheckError(b::CheckApiVersion(text));
  auto id = b::CheckId("instance_id", text);
  CheckError(id);
  if (!id && (text.empty() || text == "." || text == "..")) __builtin_trap();
  auto async = b::RequireAsync(text);
  if (async && async->status != 422) __builtin_trap();
  return 0;
}
