// The one way a server of this project answers with a JSON document (the API server, the
// broker's OSB and backup-manager APIs, the bind backend's protocol documents). Callers add
// what their protocol wants on top (the API server's Cache-Control, the backend's security
// headers). Thread-safe (pure).
#pragma once

#include <string>

#include "http/message.h"
#include "machinery/json.h"

namespace klutch::serving {

// `status` with Content-Type application/json and `body` as machinery::Dump writes it: invalid
// UTF-8 (from a client's path or body) is replaced, never thrown on.
http::Response JsonResponse(int status, const machinery::Json& body);

// The same for a document already serialized (a name of its own: a braced list such as
// `{{"a", "b"}}` would otherwise also fit std::string's iterator-pair constructor).
http::Response SerializedJsonResponse(int status, std::string body);

}  // namespace klutch::serving
