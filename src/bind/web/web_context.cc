#include "bind/web/web_context.h"

namespace klutch::bind {

std::string WebContext::BaseUrl(const http::Request& request) const {
  if (!options.authorize_url.empty()) {
    std::string base = options.authorize_url;
    if (base.ends_with("/authorize")) base.resize(base.size() - std::string("/authorize").size());
    return base;
  }
  std::string host(request.headers.Get("Host"));
  if (host.empty()) host = "localhost";
  return "https://" + host;
}

void WebContext::CountLogin(const std::string& result) const {
  if (logins) logins->Increment({{"result", result}});
}

void WebContext::CountBind(const std::string& result) const {
  if (binds) binds->Increment({{"result", result}});
}

}  // namespace klutch::bind
