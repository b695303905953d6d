#include "apis/klutch/binding_response.h"

#include <fmt/format.h>

#include "apis/klutch/export_request.h"
#include "apis/klutch/register.h"
#include "core/strings.h"
#include "machinery/object.h"

namespace klutch::apis::klutch {

using machinery::Json;

Json EncodeBindingResponse(const BindingResponse& response) {
  Json grant = {{"sid", response.session_id}, {"id", response.id}};
  if (!response.display_name.empty()) grant["displayName"] = response.display_name;
  Json requests = Json::array();
  for (const Json& r : response.requests) requests.push_back(r);
  return Json{{"kind", kBindingResponseKind},
              {"apiVersion", kApiVersion},
              {"authentication", {{"oauth2CodeGrant", std::move(grant)}}},
              {"kubeconfig", core::Base64Encode(response.kubeconfig)},
              {"requests", std::move(requests)}};
}

core::Result<BindingResponse> DecodeBindingResponse(const Json& doc) {
  if (!doc.is_object()) return core::BadRequest("the backend's response is not a JSON object");
  if (machinery::Kind(doc) != kBindingResponseKind || machinery::ApiVersionOf(doc) != kApiVersion) {
    return core::BadRequest(fmt::format("the backend answered {} {} instead of {} BindingResponse",
                                        core::GoQuote(machinery::ApiVersionOf(doc)),
                                        core::GoQuote(machinery::Kind(doc)), kApiVersion));
  }
  const Json* grant = machinery::Find(doc, {"authentication", "oauth2CodeGrant"});
  if (grant == nullptr || !grant->is_object()) {
    return core::BadRequest("the backend's response has no authentication.oauth2CodeGrant");
  }
  BindingResponse r;
  r.session_id = machinery::GetString(*grant, {"sid"});
  r.id = machinery::GetString(*grant, {"id"});
  r.display_name = machinery::GetString(*grant, {"displayName"});
  auto kubeconfig = core::Base64Decode(machinery::GetString(doc, {"kubeconfig"}));
  if (!kubeconfig || kubeconfig->empty()) {
    return core::BadRequest("the backend's response holds no kubeconfig");
  }
  r.kubeconfig = std::move(*kubeconfig);
  const Json* requests = machinery::Find(doc, {"requests"});
  if (requests == nullptr || !requests->is_array() || requests->empty()) {
    return core::BadRequest("the backend's response names no API to bind");
  }
  for (const Json& request : *requests) {
    if (!IsExportRequest(request)) {
      return core::BadRequest(
          fmt::format("the backend's response holds a {} {} instead of an "
                      "APIServiceExportRequest of {}",
                      core::GoQuote(machinery::ApiVersionOf(request)),
                      core::GoQuote(machinery::Kind(request)), kApiVersion));
    }
    r.requests.push_back(request);
  }
  return r;
}

std::string AlphabetSafeJson(const Json& value) {
  // ensure_ascii: every byte of the text is ASCII; the replaced characters can only occur
  // inside strings, where the \u escape means the same.
  const std::string text = value.dump(-1, ' ', true, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 16);
  for (char c : text) {
    switch (c) {
      case '<':
        out += "\\u003c";
        break;
      case '>':
        out += "\\u003e";
        break;
      case '&':
        out += "\\u0026";
        break;
      case '?':
        out += "\\u003f";
        break;
      case '~':
        out += "\\u007e";
        break;
      case '\x7f':
        out += "\\u007f";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string EncodeResponsePayload(const Json& response) {
  std::string b64 = core::Base64Encode(AlphabetSafeJson(response));
  for (char& c : b64) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return b64;
}

std::optional<std::string> DecodeAnyBase64(std::string_view text) {
  std::string s(text);
  for (char& c : s) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  return core::Base64Decode(s);
}

}  // namespace klutch::apis::klutch
