// BindingResponse (bind-protocol.md §1.9): what the bind backend hands kubectl bind at the end
// of a login, in the `response` query parameter of the CLI's callback (browser login) or as the
// body of a device-grant answer: the session it belongs to, the provider kubeconfig and the
// export requests to create. The backend encodes it (src/bind), kubectl bind decodes it
// (src/kubectl_bind); both through this one encoder and decoder, and the one payload codec.
//
// Everything here reads untrusted input without trusting it (the fuzz target
// fuzz_bind_session covers the payload). Pure functions; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "machinery/json.h"

namespace klutch::apis::klutch {

inline constexpr std::string_view kBindingResponseKind = "BindingResponse";

struct BindingResponse {
  std::string session_id;  // authentication.oauth2CodeGrant.sid: the CLI's session
  std::string id;          // authentication.oauth2CodeGrant.id: "<issuer>/<subject>"
  // authentication.oauth2CodeGrant.displayName (ours, optional): the name a person knows the
  // user by (the ID token's preferred_username, else email, else name).
  std::string display_name;
  std::string kubeconfig;  // the provider kubeconfig (YAML); base64 on the wire
  // APIServiceExportRequests (EncodeExportRequest's shape), kept as the backend sent them.
  std::vector<machinery::Json> requests;

  bool operator==(const BindingResponse&) const = default;
};

// {"kind":"BindingResponse","apiVersion":"klutch.anynines.com/v1alpha1","authentication":
// {"oauth2CodeGrant":{"sid","id","displayName" (when not empty)}},"kubeconfig":<standard
// base64>,"requests":[...]}.
machinery::Json EncodeBindingResponse(const BindingResponse& response);

// Reads a BindingResponse: kBadRequest unless `doc` is a BindingResponse of
// klutch.anynines.com/v1alpha1 with authentication.oauth2CodeGrant, a base64 kubeconfig that
// is not empty, and at least one request, each an APIServiceExportRequest of
// klutch.anynines.com/v1alpha1. Whether the session is the reader's is the reader's check.
core::Result<BindingResponse> DecodeBindingResponse(const machinery::Json& doc);

// JSON text safe for both base64 alphabets (§6 quirk 2): ASCII only, with '<', '>', '&', '?',
// '~' and DEL written as \u escapes (they occur only inside strings), so base64url and
// standard base64 of it are the same text but for the two alphabet-specific characters, which
// then never occur.
std::string AlphabetSafeJson(const machinery::Json& value);
// The callback's `response` query value: base64url with padding of AlphabetSafeJson(response),
// which the Klutch CLI decodes with the standard alphabet and upstream's with the URL one.
std::string EncodeResponsePayload(const machinery::Json& response);
// Decodes base64 in either alphabet, padded or not (what the CLI side accepts).
std::optional<std::string> DecodeAnyBase64(std::string_view text);

}  // namespace klutch::apis::klutch
