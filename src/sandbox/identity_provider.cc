#include "sandbox/identity_provider.h"

#include <fmt/format.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "core/file.h"
#include "core/net.h"
#include "core/process.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/certs.h"
#include "http/client.h"
#include "http/message.h"
#include "http/url.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "sandbox/glewlwyd_files.h"

namespace klutch::sandbox {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

constexpr char kGlewlwyd[] = "/usr/bin/glewlwyd";
constexpr char kSchema[] = "/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz";
constexpr char kInitialAdminPassword[] = "password";  // what glewlwyd's schema seeds
constexpr char kPluginName[] = "oidc";
constexpr char kIdentityStateFile[] = "identity.json";

// Whether every directory above `dir` lets others through (so the glewlwyd user can reach it).
core::Status Refused(const std::string& what, int status, const std::string& body) {
  return core::Internal(fmt::format("{}: glewlwyd answered HTTP {} {}", what, status, body));
}

std::string Tail(const fs::path& log) {
  auto text = core::ReadFile(log);
  if (!text.ok()) return "";
  const std::string& t = *text;
  size_t pos = t.size();
  for (int lines = 0; lines < 30 && pos > 0; ++lines) {
    size_t nl = t.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      pos = 0;
      break;
    }
    pos = nl;
  }
  return t.substr(pos);
}

}  // namespace

core::Result<std::unique_ptr<IdentityProvider>> IdentityProvider::Start(
    IdentityProviderOptions options, ProcessSet& processes) {
  if (!fs::exists(kGlewlwyd)) {
    return core::NotFound(std::string(kGlewlwyd) +
                          " is missing: run `make deps` (scripts/install-deps.sh) to install "
                          "glewlwyd");
  }
  std::unique_ptr<IdentityProvider> idp(new IdentityProvider());
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  options.dir = fs::absolute(options.dir);
  const fs::path& dir = options.dir;
  idp->options_ = options;

  // What a previous start set up.
  bool configured = false;
  if (auto saved = core::ReadFile(dir / kIdentityStateFile); saved.ok()) {
    auto state = machinery::ParseJson(*saved);
    if (state.ok()) {
      auto port = core::ParseInt64(machinery::GetString(*state, {"port"}));
      idp->port_ = port ? static_cast<uint16_t>(*port) : 0;
      idp->client_secret_ = machinery::GetString(*state, {"clientSecret"});
      idp->password_ = machinery::GetString(*state, {"password"});
      idp->admin_password_ = machinery::GetString(*state, {"adminPassword"});
      idp->subject_ = machinery::GetString(*state, {"subject"});
      configured =
          machinery::GetString(*state, {"configured"}) == "true" && fs::exists(dir / "glewlwyd.db");
    }
  }
  if (!configured) {
    if (idp->port_ == 0) {
      if (options.port != 0) {
        idp->port_ = options.port;
      } else {
        KLUTCH_ASSIGN_OR_RETURN(int port, core::FreeTcpPort("127.0.0.1"));
        idp->port_ = static_cast<uint16_t>(port);
      }
    }
    idp->client_secret_ = core::RandomPassword(32);
    idp->password_ = options.password.empty() ? core::RandomPassword(12) : options.password;
    idp->admin_password_ = core::RandomPassword(32);
    idp->subject_.clear();
    for (const char* name : {"glewlwyd.db", "glewlwyd.db-wal", "glewlwyd.db-shm"}) {
      fs::remove(dir / name, ec);
    }
    // glewlwyd's schema in one WAL transaction (statement by statement it takes seconds).
    auto seeded = core::RunProcess(
        {.argv = {"/bin/sh", "-c",
                  std::string("set -e; { echo 'PRAGMA journal_mode=WAL; BEGIN;'; zcat ") + kSchema +
                      "; echo 'COMMIT;'; } | sqlite3 glewlwyd.db >/dev/null"},
         .cwd = dir},
        std::chrono::seconds(60));
    if (!seeded.ok() || seeded->exit_code != 0) {
      return core::Internal("seeding glewlwyd's database failed: " +
                            (seeded.ok() ? seeded->output : seeded.status().message()));
    }
  }
  idp->ca_pem_ = options.ca_certificate_pem;

  // A serving certificate for the loopback address, renewed at every start.
  http::Pem ca{options.ca_certificate_pem, options.ca_key_pem};
  auto serving = http::IssueCertificate(ca, {.common_name = "127.0.0.1",
                                             .dns_names = {"localhost"},
                                             .ip_addresses = {"127.0.0.1"},
                                             .server = true,
                                             .validity = std::chrono::hours(24 * 365)});
  if (!serving.ok()) return core::Internal("glewlwyd's certificate: " + serving.status().message());
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "tls.crt", serving->certificate));
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "tls.key", serving->private_key));

  KLUTCH_RETURN_IF_ERROR(WriteGlewlwydWebapp(dir / "webapp"));
  std::string port = std::to_string(idp->port_);
  std::string config = GlewlwydConfig({.port = idp->port_, .dir = dir, .webapp = dir / "webapp"});
  KLUTCH_RETURN_IF_ERROR(core::WriteFileAtomic(dir / "glewlwyd.conf", config));

  // No privileges needed: as root, run as the package's system user when it can reach the
  // directory.
  ProcessOptions p;
  p.name = "identity-provider";
  auto account = core::LookupUser("glewlwyd");
  if (::geteuid() == 0 && account.ok() &&
      core::CheckReachableBy(*account, dir.parent_path(), "runs the identity provider").ok()) {
    if (const passwd* pw = ::getpwnam("glewlwyd");
        pw != nullptr && fs::exists("/usr/bin/setpriv")) {
      bool owned = ::chown(dir.c_str(), pw->pw_uid, pw->pw_gid) == 0;
      for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
        owned = owned && ::chown(entry.path().c_str(), pw->pw_uid, pw->pw_gid) == 0;
      }
      if (owned) {
        p.spec.argv = {"/usr/bin/setpriv", "--reuid=" + std::to_string(pw->pw_uid),
                       "--regid=" + std::to_string(pw->pw_gid), "--clear-groups"};
      }
    }
  }
  p.spec.argv.push_back(kGlewlwyd);
  p.spec.argv.push_back("--config-file=" + (dir / "glewlwyd.conf").string());
  p.spec.cwd = dir;
  p.spec.output_file = dir / "glewlwyd.log";
  p.grace = std::chrono::seconds(5);
  KLUTCH_RETURN_IF_ERROR(processes.Start(std::move(p)));

  // Up when the administrator can log in (the first request that needs the database).
  const std::string admin_password = configured ? idp->admin_password_ : kInitialAdminPassword;
  core::Status login = core::Unavailable("not tried");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline && processes.Running("identity-provider")) {
    login = idp->AdminLogin(admin_password);
    if (login.ok() || login.reason() != core::Reason::kServiceUnavailable) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!login.ok()) {
    processes.Stop("identity-provider");
    return core::Status(
        login.reason(),
        fmt::format("glewlwyd did not come up on port {}: {}\n{} (tail):\n{}", port,
                    login.message(), (dir / "glewlwyd.log").string(), Tail(dir / "glewlwyd.log")));
  }
  if (!configured) {
    core::Status st = idp->Configure();
    if (!st.ok()) {
      processes.Stop("identity-provider");
      return core::Status(st.reason(), "configuring glewlwyd: " + st.message());
    }
  }
  if (idp->subject_.empty()) {
    auto subject = idp->LogInAsUser();
    core::Status st = subject.ok() ? core::Status::Ok() : subject.status();
    if (subject.ok()) {
      idp->subject_ = *subject;
      st = idp->SaveState();
    }
    if (!st.ok()) {
      processes.Stop("identity-provider");
      return core::Status(
          st.reason(), fmt::format("logging in to glewlwyd as {} to learn their OIDC subject: {}",
                                   idp->options_.user, st.message()));
    }
  }
  return idp;
}

std::string IdentityProvider::base_url() const {
  return "https://127.0.0.1:" + std::to_string(port_);
}
std::string IdentityProvider::issuer() const { return base_url() + "/api/oidc"; }

core::Result<IdentityProvider::HttpResult> IdentityProvider::Request(
    const std::string& method, const std::string& target, const std::string& body,
    const std::string& cookie, const std::string& content_type, const std::string& authorization) {
  http::Client client({.host = "127.0.0.1",
                       .port = port_,
                       .tls = true,
                       .ca_pem = ca_pem_,
                       .timeout = std::chrono::milliseconds(10000)});
  http::Headers headers;
  if (!body.empty()) headers.Add("Content-Type", content_type);
  if (!cookie.empty()) headers.Add("Cookie", cookie);
  if (!authorization.empty()) headers.Add("Authorization", authorization);
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse response, client.Do(method, target, headers, body));
  HttpResult r{response.status, std::move(response.body),
               std::string(response.headers.Get("Location")), ""};
  std::string_view set_cookie = response.headers.Get("Set-Cookie");
  r.cookie = std::string(core::Trim(set_cookie.substr(0, set_cookie.find(';'))));
  return r;
}

core::Status IdentityProvider::AdminLogin(const std::string& password) {
  Json creds = {{"username", "admin"}, {"password", password}};
  KLUTCH_ASSIGN_OR_RETURN(HttpResult r, Request("POST", "/api/auth/", machinery::Dump(creds)));
  if (r.status != 200 || r.cookie.empty()) {
    return core::Status(
        core::Reason::kUnauthorized,
        fmt::format("glewlwyd refused the administrator's login (HTTP {})", r.status));
  }
  admin_cookie_ = r.cookie;
  return core::Status::Ok();
}

core::Status IdentityProvider::Configure() {
  // The signing key: RS256 with kid "sig1", private half as a JWKS.
  auto made =
      core::RunProcess({.argv = {"rnbyc", "-j", "-g", "RSA2048", "-k", "sig1", "-a", "RS256", "-n",
                                 "0", "-o", "key-sig1.jwks", "-p", "key-sig1.pub.jwks"},
                        .cwd = options_.dir},
                       std::chrono::seconds(60));
  if (!made.ok() || made->exit_code != 0) {
    return core::Internal("rnbyc failed: " + (made.ok() ? made->output : made.status().message()));
  }
  KLUTCH_ASSIGN_OR_RETURN(std::string jwks_text, core::ReadFile(options_.dir / "key-sig1.jwks"));
  // The private key lives on in glewlwyd's database only.
  std::error_code ec;
  std::filesystem::remove(options_.dir / "key-sig1.jwks", ec);
  std::filesystem::remove(options_.dir / "key-sig1.pub.jwks", ec);
  KLUTCH_ASSIGN_OR_RETURN(Json jwks, machinery::ParseJson(jwks_text));
  Json params = {
      {"iss", issuer()},
      {"jwt-type", "rsa"},
      {"jwt-key-size", "256"},
      {"jwks-show", true},
      {"jwks-private", machinery::Dump(jwks)},
      {"default-kid", "sig1"},
      {"access-token-duration", 3600},
      {"refresh-token-duration", 1209600},
      {"code-duration", 600},
      {"refresh-token-rolling", true},
      {"allow-non-oidc", false},
      {"auth-type-code-enabled", true},
      {"auth-type-token-enabled", false},
      {"auth-type-id-token-enabled", true},
      {"auth-type-none-enabled", false},
      {"auth-type-password-enabled", false},
      {"auth-type-client-enabled", false},
      {"auth-type-device-enabled", true},
      {"device-authorization-expiration", 600},
      {"device-authorization-interval", 1},
      {"auth-type-refresh-enabled", true},
      {"pkce-allowed", true},
      {"pkce-method-plain-allowed", false},
      {"subject-type", "public"},
      {"scope", Json::array()},
      {"claims", Json::array()},
      {"additional-parameters", Json::array()},
      {"name-claim", "mandatory"},
      {"email-claim", "mandatory"},
      {"allowed-scope", Json::array({"openid", "g_profile"})},
  };
  Json plugin = {{"module", "oidc"},
                 {"name", kPluginName},
                 {"display_name", "Klutch sandbox"},
                 {"enabled", true},
                 {"parameters", params}};
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult r, Request("POST", "/api/mod/plugin/", machinery::Dump(plugin), admin_cookie_));
  if (r.status != 200) return Refused("creating the oidc plugin", r.status, r.body);

  Json client = {
      {"client_id", options_.client_id},
      {"client_name", "Klutch bind backend"},
      {"client_secret", client_secret_},
      {"confidential", true},
      {"enabled", true},
      {"redirect_uri", options_.redirect_uris},
      {"authorization_type", Json::array({"code", "refresh_token", "device_authorization"})},
      {"token_endpoint_auth_method", Json::array({"client_secret_basic", "client_secret_post"})},
      {"scope", Json::array()},
  };
  KLUTCH_ASSIGN_OR_RETURN(r,
                          Request("POST", "/api/client/", machinery::Dump(client), admin_cookie_));
  if (r.status != 200) return Refused("creating the backend's client", r.status, r.body);

  Json user = {{"username", options_.user}, {"name", options_.user},
               {"email", options_.email},   {"password", password_},
               {"enabled", true},           {"scope", Json::array({"g_profile", "openid"})}};
  KLUTCH_ASSIGN_OR_RETURN(r, Request("POST", "/api/user/", machinery::Dump(user), admin_cookie_));
  if (r.status != 200) return Refused("creating user " + options_.user, r.status, r.body);

  // The schema's administrator password is public knowledge: replace it.
  Json change = {{"username", "admin"},
                 {"old_password", kInitialAdminPassword},
                 {"password", admin_password_}};
  KLUTCH_ASSIGN_OR_RETURN(
      r, Request("PUT", "/api/profile/password", machinery::Dump(change), admin_cookie_));
  if (r.status != 200) return Refused("changing the administrator's password", r.status, r.body);
  return SaveState();
}

core::Status IdentityProvider::SaveState() {
  Json state = {{"port", std::to_string(port_)},
                {"clientSecret", client_secret_},
                {"password", password_},
                {"adminPassword", admin_password_},
                {"configured", "true"}};
  if (!subject_.empty()) state["subject"] = subject_;
  return core::WriteFileAtomic(options_.dir / kIdentityStateFile, machinery::Dump(state));
}

core::Result<std::string> IdentityProvider::LogInAsUser() {
  if (options_.redirect_uris.empty()) {
    return core::BadRequest("the backend's client has no redirect URI to log in through");
  }
  const std::string& redirect_uri = options_.redirect_uris.front();
  const std::string& user = options_.user;

  // A session of the user (glewlwyd's login API), and their consent to the backend's client
  // for scope openid (what its grant screen records; the user's own backend, in the sandbox).
  Json creds = {{"username", user}, {"password", password_}};
  KLUTCH_ASSIGN_OR_RETURN(HttpResult login, Request("POST", "/api/auth/", machinery::Dump(creds)));
  if (login.status != 200 || login.cookie.empty()) {
    return Refused("logging in as " + user, login.status, login.body);
  }
  Json grant = {{"scope", "openid"}};
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult consent,
      Request("PUT", "/api/auth/grant/" + core::PercentEncode(options_.client_id),
              machinery::Dump(grant), login.cookie));
  if (consent.status != 200) return Refused("granting scope openid", consent.status, consent.body);

  // The authorization request as the browser makes it once the login UI is done (g_continue):
  // glewlwyd redirects to the client with a code. The redirect is not followed.
  const std::string state = core::RandomSuffix(16);
  const std::string nonce = core::RandomSuffix(16);
  const std::string target =
      "/api/oidc/auth?response_type=code&client_id=" + core::PercentEncode(options_.client_id) +
      "&redirect_uri=" + core::PercentEncode(redirect_uri) + "&scope=openid&state=" + state +
      "&nonce=" + nonce + "&g_continue";
  KLUTCH_ASSIGN_OR_RETURN(HttpResult auth, Request("GET", target, {}, login.cookie));
  std::string code;
  if (auth.status == 302 && auth.location.starts_with(redirect_uri)) {
    const size_t q = auth.location.find('?');
    std::string returned_state;
    for (auto& [key, value] :
         http::ParseQuery(q == std::string::npos ? "" : auth.location.substr(q + 1))) {
      if (key == "code") code = value;
      if (key == "state") returned_state = value;
    }
    if (returned_state != state) code.clear();
  }
  if (code.empty()) {
    return core::Internal(fmt::format("the authorization request got no code: HTTP {} to \"{}\" {}",
                                      auth.status, auth.location, auth.body));
  }

  // The token request (client_secret_basic).
  const std::string form = http::FormEncode(
      {{"grant_type", "authorization_code"}, {"code", code}, {"redirect_uri", redirect_uri}});
  const std::string basic =
      "Basic " + core::Base64Encode(options_.client_id + ":" + client_secret_);
  KLUTCH_ASSIGN_OR_RETURN(HttpResult token, Request("POST", "/api/oidc/token", form, {},
                                                    "application/x-www-form-urlencoded", basic));
  if (token.status != 200) return Refused("the token request", token.status, token.body);

  // The ID token came straight from the token endpoint over TLS with the client's secret, so
  // its payload is read without checking the signature (OpenID Connect Core 3.1.3.7).
  auto parsed = machinery::ParseJson(token.body);
  const std::string id_token =
      parsed.ok() ? machinery::GetString(*parsed, {"id_token"}) : std::string();
  const size_t first = id_token.find('.');
  const size_t second = id_token.find('.', first == std::string::npos ? 0 : first + 1);
  if (first == std::string::npos || second == std::string::npos) {
    // (Its body is not quoted: it holds the user's tokens.)
    return core::Internal("glewlwyd's token response holds no ID token");
  }
  auto payload =
      core::Base64UrlDecode(std::string_view(id_token).substr(first + 1, second - first - 1));
  std::string subject;
  if (payload) {
    if (auto claims = machinery::ParseJson(*payload); claims.ok()) {
      subject = machinery::GetString(*claims, {"sub"});
    }
  }
  if (subject.empty()) return core::Internal("the ID token's payload has no sub claim");
  return subject;
}

}  // namespace klutch::sandbox
