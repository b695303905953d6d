// OidcProvider: a real OpenID Connect provider for tests, Debian's glewlwyd (2.7.x) on a free
// loopback port over HTTPS, with an SQLite database, its keys, config and log in a directory
// the test owns.
//
// Start() seeds the database, issues a CA and a serving certificate for 127.0.0.1, starts
// glewlwyd (as user `glewlwyd` through setpriv when the caller is root, as the caller
// otherwise) and configures it through the admin REST API: an `oidc` plugin signing RS256
// with kid "sig1", a confidential client (client_secret_basic) and the user(s). IdToken()
// logs in without a browser (login API, authorization-code flow, token endpoint). The process
// ends by PID when the object is destroyed.
//
// Needs /usr/bin/glewlwyd, rnbyc, sqlite3 and zcat (scripts/install-deps.sh). Not
// thread-safe: one call at a time.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "test/support/process.h"

namespace klutch::http {
class Client;
}  // namespace klutch::http

namespace klutch::testing {

// What OidcProvider::Start() creates besides the provider itself.
struct OidcProviderOptions {
  // The first user, created by Start().
  std::string user = "alice";
  std::string password = "alice-pw";
  std::string email = "alice@example.test";
  // Sent as the "groups" claim (a JSON array) of the user's ID tokens; no claim when empty.
  std::vector<std::string> groups;
  // Lifetime of the tokens the provider issues (the oidc plugin's access-token-duration,
  // which glewlwyd 2.7 also uses for the ID token: exp = iat + this). At least 1 s.
  std::chrono::seconds token_duration{3600};
  // Also serve glewlwyd's web login (Debian's /usr/share/glewlwyd/webapp, with a config.json
  // of our own in DIR/webapp) at base_url(), so that a browser sent to an authorization URL
  // lands on base_url()/login.html and can log in through the real form
  // (test/support/browser.h). Off by default: the REST login needs no web app.
  bool serve_webapp = false;
};

class OidcProvider {
 public:
  using Options = OidcProviderOptions;

  // Starts glewlwyd in `dir` (created if missing; config, database, keys, certificates and
  // glewlwyd.log live there) and waits until it serves and is configured. Returns nullptr and
  // sets `*error` (with the tail of glewlwyd's log) on any failure.
  static std::unique_ptr<OidcProvider> Start(const std::filesystem::path& dir, std::string* error,
                                             Options options = {});
  ~OidcProvider();  // SIGTERM to glewlwyd by PID (SIGKILL after 5 s)
  OidcProvider(const OidcProvider&) = delete;
  OidcProvider& operator=(const OidcProvider&) = delete;

  // https://127.0.0.1:PORT/api/oidc: the `iss` of its tokens and the base of
  // /.well-known/openid-configuration and /jwks.
  std::string issuer() const;
  // https://127.0.0.1:PORT (no trailing slash).
  std::string base_url() const;
  uint16_t port() const { return port_; }
  // PEM file of the CA that signed the serving certificate (verify with it, not system CAs).
  std::string ca_file() const;
  std::string ca_pem() const { return ca_pem_; }
  std::string client_id() const { return client_id_; }
  std::string client_secret() const { return client_secret_; }
  // The kid new tokens are signed with ("sig1" until RotateKey()).
  std::string current_kid() const { return current_kid_; }
  // glewlwyd's log so far.
  std::string log() const;

  // An ID token (compact JWS) for `user`, obtained as a browser would without one: login API
  // for a session cookie, consent, GET /api/oidc/auth (code from the 302 Location), then
  // POST /api/oidc/token with client_secret_basic. kUnauthorized for a wrong user or password;
  // kServiceUnavailable / kInternalError (with glewlwyd's answer) for anything else.
  core::Result<std::string> IdToken(const std::string& user, const std::string& password);
  // The same for another client registered with AddClient(): the token's aud (and azp) is
  // `client_id`. An unknown client or wrong secret fails like any glewlwyd refusal
  // (kInternalError with its answer).
  core::Result<std::string> IdToken(const std::string& user, const std::string& password,
                                    const std::string& client_id, const std::string& client_secret);

  // The browser part of an authorization-code flow a relying party started: `authorization_url`
  // (the issuer's /auth URL with the relying party's client_id, redirect_uri, state, nonce,
  // PKCE challenge) is opened with `user` logged in (login API, consent for the client), and
  // the Location glewlwyd redirects to is returned: redirect_uri?code=...&state=... (or
  // ...?error=...). kUnauthorized for a wrong user or password.
  core::Result<std::string> AuthorizeAs(const std::string& user, const std::string& password,
                                        const std::string& authorization_url);
  // The user's part of a device authorization grant (RFC 8628): logs `user` in, grants the
  // client's scopes and confirms `user_code` at /api/oidc/device. kUnauthorized for a wrong
  // user or password; kInternalError with glewlwyd's answer when it refuses the code.
  core::Status ApproveDevice(const std::string& user, const std::string& password,
                             const std::string& user_code, const std::string& client_id = "");
  // The redirect URI registered for every client (never contacted by glewlwyd).
  std::string redirect_uri() const { return redirect_uri_; }

  // Registers another confidential client (client_secret_basic, code flow, the same redirect
  // URI as client_id()). A client glewlwyd refuses (e.g. the id exists) -> kBadRequest with
  // glewlwyd's answer.
  core::Status AddClient(const std::string& client_id, const std::string& client_secret);

  // Creates another user (scopes openid and g_profile; `groups` become its "groups" claim).
  // A user glewlwyd refuses (e.g. the name exists) -> kBadRequest with glewlwyd's answer.
  core::Status AddUser(const std::string& user, const std::string& password,
                       const std::string& email, const std::vector<std::string>& groups = {});

  // Generates a new RS256 key with a new kid ("sig2", "sig3", ...), publishes it in the JWKS
  // beside the old ones and signs new tokens with it. Returns the new kid.
  core::Result<std::string> RotateKey();
  // Removes every key but the current one from the JWKS, so tokens signed with an older key
  // no longer verify.
  core::Status DropOldKeys();

  // One request to glewlwyd (`target` is a path such as "/api/oidc/jwks"), over a fresh
  // TLS connection that trusts ca_pem(). For tests that look at the provider directly.
  struct HttpResult {
    int status = 0;
    std::string body;
    std::string location;    // Location header
    std::string set_cookie;  // "NAME=VALUE" of the first Set-Cookie header, "" when none
  };
  core::Result<HttpResult> Request(const std::string& method, const std::string& target,
                                   const std::string& body = {},
                                   const std::string& content_type = {},
                                   const std::string& cookie = {},
                                   const std::string& authorization = {});

 private:
  OidcProvider() = default;
  core::Status Configure();
  core::Status AdminLogin();
  // Logs `user` in through the login API and grants `client_id` the openid scope: the
  // session cookie.
  core::Result<std::string> UserSession(const std::string& user, const std::string& password,
                                        const std::string& client_id);
  core::Result<std::string> GenerateKey(const std::string& kid);
  core::Status UpdateSigningKeys();
  std::string LogTail() const;

  std::filesystem::path dir_;
  Options options_;
  uint16_t port_ = 0;
  std::string ca_pem_;
  std::string client_id_ = "klutch";
  std::string client_secret_;
  std::string redirect_uri_ = "http://127.0.0.1/callback";  // never contacted
  std::string admin_cookie_;
  // The plugin's parameters (JSON text) as last sent; the keys (JWK JSON text, private),
  // the current signing key first.
  std::string plugin_json_;
  std::vector<std::string> keys_;
  std::string current_kid_;
  int next_key_ = 1;
  std::unique_ptr<ChildProcess> child_;
};

// The user's part of a device login at a glewlwyd this test did not start (klutch up's), as a
// browser would do it, with curl: log `user` in at `idp` (https://host:port), consent to
// `client_id`'s openid scope, confirm `user_code`. `ca_file` verifies glewlwyd; the cookie jar
// goes to `dir` and is removed. kInternalError with curl's output when a step fails or
// glewlwyd does not answer deviceComplete.
core::Status ApproveDeviceAt(const std::string& idp, const std::filesystem::path& ca_file,
                             const std::string& user, const std::string& password,
                             const std::string& user_code, const std::filesystem::path& dir,
                             const std::string& client_id = "klutch-backend");

}  // namespace klutch::testing
