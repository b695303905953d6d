// IdentityProvider: the sandbox's OpenID Connect provider, Debian's glewlwyd (2.7), on a
// loopback port over HTTPS, with its SQLite database, keys, configuration and log in a
// directory of the sandbox's state.
//
// The first start seeds the database, makes an RS256 signing key (rnbyc), starts glewlwyd (as
// user `glewlwyd` through setpriv when run as root and the directory is reachable, as the
// caller otherwise) and configures it through its admin API: an `oidc` plugin (code flow with
// PKCE, the device authorization grant, ID tokens with email), one confidential client for the
// bind backend and one user. The administrator's password is replaced by a random one. Then the
// sandbox logs in once as that user (glewlwyd's login API and the code flow of the backend's
// client) to learn the OIDC subject glewlwyd gives them, so the sandbox can bind App Cluster 1
// in that user's name. What a later start needs (port, client secret, admin password, the
// user's subject) is kept in `identity.json` (0600), so a restart reuses the database as it is
// and logs in no more. Thread-compatible.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "sandbox/processes.h"

namespace klutch::sandbox {

struct IdentityProviderOptions {
  std::filesystem::path dir;
  uint16_t port = 0;  // 0: a free one at first start, then the remembered one
  // PEM CA certificate and key that sign glewlwyd's serving certificate.
  std::string ca_certificate_pem, ca_key_pem;
  std::string client_id = "klutch-backend";
  std::vector<std::string> redirect_uris;  // the backend's /callback
  std::string user = "demo";
  std::string password;  // "" = a random one at first start (then remembered)
  std::string email = "demo@klutch.local";
};

class IdentityProvider {
 public:
  // Starts (first start: also configures) glewlwyd under `processes` (name "identity-provider")
  // and waits until it answers; when `identity.json` has no subject yet (a first start, or a
  // state made before subjects were kept) it logs in as the user to learn it. Errors name the
  // step and carry the tail of glewlwyd's log. Needs at least one redirect URI.
  static core::Result<std::unique_ptr<IdentityProvider>> Start(IdentityProviderOptions options,
                                                               ProcessSet& processes);

  std::string issuer() const;    // https://127.0.0.1:PORT/api/oidc
  std::string base_url() const;  // https://127.0.0.1:PORT
  uint16_t port() const { return port_; }
  const std::string& client_id() const { return options_.client_id; }
  const std::string& client_secret() const { return client_secret_; }
  const std::string& user() const { return options_.user; }
  const std::string& password() const { return password_; }
  // The `sub` of user()'s ID tokens (glewlwyd's oidc plugin, subject type public: made at the
  // user's first token and kept), what the bind backend knows that user by.
  const std::string& subject() const { return subject_; }
  std::filesystem::path log_file() const { return options_.dir / "glewlwyd.log"; }

 private:
  IdentityProvider() = default;
  core::Status Configure();
  core::Status AdminLogin(const std::string& password);
  // One login as user() through the backend's client; the subject of the ID token it yields.
  core::Result<std::string> LogInAsUser();
  core::Status SaveState();

  struct HttpResult {
    int status = 0;
    std::string body;
    std::string location;
    std::string cookie;  // NAME=VALUE of the first Set-Cookie
  };
  core::Result<HttpResult> Request(const std::string& method, const std::string& target,
                                   const std::string& body = {}, const std::string& cookie = {},
                                   const std::string& content_type = "application/json",
                                   const std::string& authorization = {});

  IdentityProviderOptions options_;
  uint16_t port_ = 0;
  std::string ca_pem_;
  std::string client_secret_;
  std::string password_;
  std::string admin_password_;
  std::string admin_cookie_;
  std::string subject_;
};

}  // namespace klutch::sandbox
