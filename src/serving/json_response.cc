#include "serving/json_response.h"

#include <utility>

namespace klutch::serving {

http::Response JsonResponse(int status, const machinery::Json& body) {
  return SerializedJsonResponse(status, machinery::Dump(body));
}

http::Response SerializedJsonResponse(int status, std::string body) {
  http::Response r;
  r.status = status;
  r.headers.Set("Content-Type", "application/json");
  r.body = std::move(body);
  return r;
}

}  // namespace klutch::serving
