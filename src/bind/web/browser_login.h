// BrowserLogin: the OIDC browser login (bind-protocol.md §2.2-2.3): GET /authorize (from
// kubectl bind) and GET /login (from this backend's pages) send the browser to the issuer with
// a sealed state, PKCE and a nonce, and a pre-login cookie binding the state to this browser;
// GET /callback checks both, redeems the code and sets the session cookie (SessionCookies).
// The handlers translate: the checks are the Sealer's and the issuer's. Thread-safe.
#pragma once

#include <string>
#include <variant>

#include "bind/web/session_cookies.h"
#include "bind/web/web_context.h"
#include "http/message.h"

namespace klutch::bind {

class BrowserLogin {
 public:
  // `ctx` and `cookies` must outlive this object.
  BrowserLogin(const WebContext& ctx, const SessionCookies& cookies)
      : ctx_(ctx), cookies_(cookies) {}

  http::Response Authorize(const http::Request& request);  // GET /authorize
  http::Response Login(const http::Request& request);      // GET /login
  http::Response Callback(const http::Request& request);   // GET /callback

 private:
  // A login /callback may finish: the issuer's code, the opened state and pre-login cookie.
  struct PendingLogin {
    std::string code;
    machinery::Json state;  // s (CLI session), i (state ID), c, r, cn or next
    machinery::Json login;  // i (the state ID again), v (PKCE verifier), n (nonce)
    std::string sid;
    std::string login_cookie;  // its name
  };

  // To the issuer with a sealed state holding `sid` and `fields`.
  http::Response StartLogin(const std::string& sid, machinery::Json fields);
  // The steps of /callback.
  std::variant<PendingLogin, http::Response> ReadCallback(const http::Request& request);
  std::variant<IdTokenClaims, http::Response> Redeem(const PendingLogin& login);
  http::Response StartSession(const PendingLogin& login, const IdTokenClaims& claims);

  const WebContext& ctx_;
  const SessionCookies& cookies_;
};

}  // namespace klutch::bind
