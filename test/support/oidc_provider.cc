#include "test/support/oidc_provider.h"

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/net.h"
#include "core/random.h"
#include "core/strings.h"
#include "http/certs.h"
#include "http/client.h"
#include "machinery/json.h"
#include "sandbox/glewlwyd_files.h"

namespace klutch::testing {

namespace fs = std::filesystem;
using machinery::Json;

namespace {

constexpr char kGlewlwyd[] = "/usr/bin/glewlwyd";
constexpr char kSchema[] = "/usr/share/doc/glewlwyd/database/init.sqlite3.sql.gz";
// The seeded administrator (init.sqlite3.sql).
constexpr char kAdminUser[] = "admin";
constexpr char kAdminPassword[] = "password";
constexpr char kPluginName[] = "oidc";

// A port the kernel considers free right now: bound to 127.0.0.1:0, then released for
// glewlwyd to take (Start() retries on the rare race).
core::Result<uint16_t> FreeLoopbackPort() {
  KLUTCH_ASSIGN_OR_RETURN(int port, core::FreeTcpPort("127.0.0.1"));
  return static_cast<uint16_t>(port);
}

core::Status WriteFile(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) return core::Internal("cannot write " + path.string());
  return core::Status::Ok();
}

// "NAME=VALUE" of a Set-Cookie header value (attributes dropped).
std::string CookiePair(std::string_view set_cookie) {
  auto semi = set_cookie.find(';');
  return std::string(core::Trim(set_cookie.substr(0, semi)));
}

// The first value of query parameter `name` in a URL, "" when absent.
std::string QueryParam(const std::string& url, const std::string& name) {
  auto q = url.find('?');
  if (q == std::string::npos) return "";
  for (const auto& [k, v] : http::ParseQuery(std::string_view(url).substr(q + 1))) {
    if (k == name) return v;
  }
  return "";
}

core::Status Unexpected(const std::string& what, const OidcProvider::HttpResult& r) {
  return core::Internal(what + ": HTTP " + std::to_string(r.status) + " " + r.body);
}

// Whether a user other than the owner can reach `dir` (every ancestor searchable by others).
bool ReachableByOthers(const fs::path& dir) {
  for (fs::path p = dir.parent_path(); !p.empty(); p = p.parent_path()) {
    std::error_code ec;
    auto perms = fs::status(p, ec).permissions();
    if (ec || (perms & fs::perms::others_exec) == fs::perms::none) return false;
    if (p == p.root_path()) break;
  }
  return true;
}

std::string RandomToken() { return core::Base64UrlEncode(core::RandomBytes(18)); }

// Options::serve_webapp: a copy of Debian's web app with a config.json of our own, served at
// the root (sandbox/glewlwyd_files.h says why).
core::Status WriteWebapp(const fs::path& dir) { return sandbox::WriteGlewlwydWebapp(dir); }

}  // namespace

std::unique_ptr<OidcProvider> OidcProvider::Start(const fs::path& dir, std::string* error,
                                                  Options options) {
  auto fail = [&](const std::string& message) -> std::unique_ptr<OidcProvider> {
    if (error) *error = message;
    return nullptr;
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir.string() + ": " + ec.message());
  fs::path dir_abs = fs::absolute(dir);
  if (!fs::exists(kGlewlwyd)) return fail(std::string(kGlewlwyd) + " is not installed");

  // TLS: a CA of our own and a serving certificate for the loopback address.
  auto ca = http::GenerateCertificateAuthority("klutch-test-oidc-ca", std::chrono::hours(24));
  if (!ca.ok()) return fail("CA: " + ca.status().ToString());
  auto serving = http::IssueCertificate(*ca, {.common_name = "127.0.0.1",
                                              .dns_names = {"localhost"},
                                              .ip_addresses = {"127.0.0.1"},
                                              .server = true,
                                              .validity = std::chrono::hours(24)});
  if (!serving.ok()) return fail("serving certificate: " + serving.status().ToString());
  for (const auto& [name, content] :
       {std::pair<std::string, std::string>{"ca.pem", ca->certificate},
        {"tls.crt", serving->certificate},
        {"tls.key", serving->private_key}}) {
    if (auto s = WriteFile(dir_abs / name, content); !s.ok()) return fail(s.message());
  }
  fs::permissions(dir_abs / "tls.key", fs::perms::owner_read | fs::perms::owner_write, ec);
  if (options.serve_webapp) {
    if (auto s = WriteWebapp(dir_abs / "webapp"); !s.ok()) return fail(s.message());
  }

  // The database: glewlwyd's schema (administrator admin/password), with a multi-valued
  // "groups" property allowed on users of the database backend (the groups claim reads it).
  for (const char* name : {"glewlwyd.db", "glewlwyd.db-wal", "glewlwyd.db-shm"}) {
    fs::remove(dir_abs / name, ec);
  }
  if (auto s = WriteFile(dir_abs / "seed.sql",
                         "UPDATE g_user_module_instance SET gumi_parameters = json_set("
                         "gumi_parameters, '$.\"data-format\".groups', json('{\"multiple\":true,"
                         "\"read\":true,\"write\":true,\"profile-read\":false,"
                         "\"profile-write\":false}')) WHERE gumi_name = 'database';\n");
      !s.ok()) {
    return fail(s.message());
  }
  // One transaction, and WAL so that glewlwyd's own writes cost one fsync each: statement
  // by statement, seeding alone took seconds.
  CommandResult seeded =
      RunShell(std::string("set -euo pipefail; { echo 'PRAGMA journal_mode=WAL; BEGIN;'; zcat ") +
                   kSchema + "; cat seed.sql; echo 'COMMIT;'; } | sqlite3 glewlwyd.db >/dev/null",
               {}, dir_abs, std::chrono::seconds(60));
  if (seeded.exit_code != 0) {
    return fail("seeding glewlwyd.db failed: " + seeded.out + seeded.err);
  }

  // glewlwyd needs no privileges; as root, run it as its own system user (the Debian
  // package's), which then has to own the directory and be able to reach it. Otherwise
  // (a directory below a private one, no such user) it runs as the caller.
  std::vector<std::string> prefix;
  if (geteuid() == 0 && ReachableByOthers(dir_abs)) {
    if (const passwd* pw = getpwnam("glewlwyd"); pw != nullptr && fs::exists("/usr/bin/setpriv")) {
      bool owned = chown(dir_abs.c_str(), pw->pw_uid, pw->pw_gid) == 0;
      for (const auto& entry : fs::recursive_directory_iterator(dir_abs, ec)) {
        owned = owned && chown(entry.path().c_str(), pw->pw_uid, pw->pw_gid) == 0;
      }
      if (owned) {
        prefix = {"/usr/bin/setpriv", "--reuid=" + std::to_string(pw->pw_uid),
                  "--regid=" + std::to_string(pw->pw_gid), "--clear-groups"};
      }
    }
  }

  std::string last_error;
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto port = FreeLoopbackPort();
    if (!port.ok()) return fail(port.status().ToString());
    auto p = std::unique_ptr<OidcProvider>(new OidcProvider());
    p->dir_ = dir_abs;
    p->options_ = options;
    p->port_ = *port;
    p->ca_pem_ = ca->certificate;
    p->client_secret_ = RandomToken();
    std::string port_text = std::to_string(*port);
    std::string config =
        sandbox::GlewlwydConfig({.port = *port,
                                 .dir = dir_abs,
                                 .webapp = options.serve_webapp ? dir_abs / "webapp" : fs::path(),
                                 .log_level = "INFO"});
    if (auto s = WriteFile(dir_abs / "glewlwyd.conf", config); !s.ok()) return fail(s.message());
    fs::remove(dir_abs / "glewlwyd.log", ec);
    std::vector<std::string> argv = prefix;
    argv.push_back(kGlewlwyd);
    argv.push_back("--config-file=" + (dir_abs / "glewlwyd.conf").string());
    p->child_ = std::make_unique<ChildProcess>(argv, dir_abs / "glewlwyd.log");

    // Ready when the administrator can log in (the first request that needs the database).
    core::Status login = core::Unavailable("not tried");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline && p->child_->running()) {
      login = p->AdminLogin();
      if (login.ok() || login.reason() != core::Reason::kServiceUnavailable) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!login.ok()) {
      last_error = "glewlwyd did not come up on port " + port_text + ": " + login.ToString() +
                   "\nglewlwyd.log (tail):\n" + p->LogTail();
      // A port taken between our probe and glewlwyd's bind: try another one.
      if (!p->child_->running()) continue;
      return fail(last_error);
    }
    if (auto s = p->Configure(); !s.ok()) {
      return fail("configuring glewlwyd: " + s.ToString() + "\nglewlwyd.log (tail):\n" +
                  p->LogTail());
    }
    return p;
  }
  return fail(last_error);
}

OidcProvider::~OidcProvider() = default;

std::string OidcProvider::base_url() const { return "https://127.0.0.1:" + std::to_string(port_); }
std::string OidcProvider::issuer() const { return base_url() + "/api/oidc"; }
std::string OidcProvider::ca_file() const { return (dir_ / "ca.pem").string(); }
std::string OidcProvider::log() const { return ReadFileOrEmpty(dir_ / "glewlwyd.log"); }

std::string OidcProvider::LogTail() const {
  std::string text = log();
  size_t pos = text.size();
  for (int lines = 0; lines < 40 && pos > 0; ++lines) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) {
      pos = 0;
      break;
    }
  }
  return text.substr(pos);
}

core::Result<OidcProvider::HttpResult> OidcProvider::Request(
    const std::string& method, const std::string& target, const std::string& body,
    const std::string& content_type, const std::string& cookie, const std::string& authorization) {
  http::Client client({.host = "127.0.0.1",
                       .port = port_,
                       .tls = true,
                       .ca_pem = ca_pem_,
                       .timeout = std::chrono::milliseconds(10000)});
  http::Headers headers;
  if (!content_type.empty()) headers.Add("Content-Type", content_type);
  if (!cookie.empty()) headers.Add("Cookie", cookie);
  if (!authorization.empty()) headers.Add("Authorization", authorization);
  KLUTCH_ASSIGN_OR_RETURN(http::ClientResponse response, client.Do(method, target, headers, body));
  HttpResult result;
  result.status = response.status;
  result.body = std::move(response.body);
  result.location = std::string(response.headers.Get("Location"));
  result.set_cookie = CookiePair(response.headers.Get("Set-Cookie"));
  return result;
}

core::Status OidcProvider::AdminLogin() {
  Json creds = {{"username", kAdminUser}, {"password", kAdminPassword}};
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult r, Request("POST", "/api/auth/", machinery::Dump(creds), "application/json"));
  if (r.status != 200 || r.set_cookie.empty()) return Unexpected("administrator login", r);
  admin_cookie_ = r.set_cookie;
  return core::Status::Ok();
}

core::Result<std::string> OidcProvider::GenerateKey(const std::string& kid) {
  std::string file = "key-" + kid + ".jwks";
  // rnbyc writes the private key (with alg and kid set) as a JWKS to -o; without -p the
  // public half would land in the same file.
  CommandResult r = RunShell("rnbyc -j -g RSA2048 -k " + kid + " -a RS256 -n 0 -o " + file +
                                 " -p key-" + kid + ".pub.jwks",
                             {}, dir_, std::chrono::seconds(60));
  if (r.exit_code != 0) return core::Internal("rnbyc failed: " + r.out + r.err);
  auto jwks = machinery::ParseJson(ReadFileOrEmpty(dir_ / file));
  if (!jwks.ok() || !jwks->contains("keys") || (*jwks)["keys"].size() != 1 ||
      !(*jwks)["keys"][0].contains("d")) {
    return core::Internal("rnbyc wrote no private key to " + file);
  }
  return machinery::Dump((*jwks)["keys"][0]);
}

core::Status OidcProvider::Configure() {
  KLUTCH_ASSIGN_OR_RETURN(std::string key, GenerateKey("sig1"));
  keys_ = {key};
  current_kid_ = "sig1";
  next_key_ = 2;
  Json params = {
      {"iss", issuer()},
      {"jwt-type", "rsa"},
      {"jwt-key-size", "256"},
      {"jwks-show", true},
      {"access-token-duration", std::max<int64_t>(1, options_.token_duration.count())},
      {"refresh-token-duration", 1209600},
      {"code-duration", 600},
      {"refresh-token-rolling", true},
      {"allow-non-oidc", false},
      {"auth-type-code-enabled", true},
      {"auth-type-token-enabled", false},
      {"auth-type-id-token-enabled", true},
      {"auth-type-none-enabled", false},
      {"auth-type-password-enabled", false},
      {"auth-type-client-enabled", true},
      // The device authorization grant (RFC 8628) for `kubectl bind --headless`, with a short
      // polling interval so tests do not wait 5 s per poll.
      {"auth-type-device-enabled", true},
      {"device-authorization-expiration", 600},
      {"device-authorization-interval", 1},
      {"auth-type-refresh-enabled", true},
      {"pkce-allowed", true},
      {"pkce-method-plain-allowed", false},
      {"subject-type", "public"},
      {"scope", Json::array()},
      // "groups": the user's multi-valued property of that name, as a JSON array, in every
      // ID token (absent for users without groups).
      {"claims",
       Json::array({{{"name", "groups"}, {"user-property", "groups"}, {"mandatory", true}}})},
      {"additional-parameters", Json::array()},
      {"name-claim", "mandatory"},
      {"email-claim", "mandatory"},
      {"allowed-scope", Json::array({"openid", "g_profile"})},
  };
  plugin_json_ = machinery::Dump(params);
  Json jwks = {{"keys", Json::array({machinery::ParseJson(key).value()})}};
  params["jwks-private"] = machinery::Dump(jwks);
  params["default-kid"] = current_kid_;
  Json plugin = {{"module", "oidc"},
                 {"name", kPluginName},
                 {"display_name", kPluginName},
                 {"enabled", true},
                 {"parameters", params}};
  KLUTCH_ASSIGN_OR_RETURN(HttpResult r, Request("POST", "/api/mod/plugin/", machinery::Dump(plugin),
                                                "application/json", admin_cookie_));
  if (r.status != 200) return Unexpected("creating the oidc plugin", r);

  KLUTCH_RETURN_IF_ERROR(AddClient(client_id_, client_secret_));
  return AddUser(options_.user, options_.password, options_.email, options_.groups);
}

core::Status OidcProvider::AddClient(const std::string& client_id,
                                     const std::string& client_secret) {
  Json client = {
      {"client_id", client_id},
      {"client_name", client_id},
      {"client_secret", client_secret},
      {"confidential", true},
      {"enabled", true},
      {"redirect_uri", Json::array({redirect_uri_})},
      {"authorization_type", Json::array({"code", "refresh_token", "device_authorization"})},
      // Without it a confidential client's token requests fail with unauthorized_client.
      {"token_endpoint_auth_method", Json::array({"client_secret_basic", "client_secret_post"})},
      {"scope", Json::array()},
  };
  KLUTCH_ASSIGN_OR_RETURN(HttpResult r, Request("POST", "/api/client/", machinery::Dump(client),
                                                "application/json", admin_cookie_));
  if (r.status == 400) return core::BadRequest("creating client " + client_id + ": " + r.body);
  if (r.status != 200) return Unexpected("creating client " + client_id, r);
  return core::Status::Ok();
}

core::Status OidcProvider::AddUser(const std::string& user, const std::string& password,
                                   const std::string& email,
                                   const std::vector<std::string>& groups) {
  Json body = {{"username", user}, {"name", user},
               {"email", email},   {"password", password},
               {"enabled", true},  {"scope", Json::array({"g_profile", "openid"})}};
  if (!groups.empty()) body["groups"] = groups;
  KLUTCH_ASSIGN_OR_RETURN(HttpResult r, Request("POST", "/api/user/", machinery::Dump(body),
                                                "application/json", admin_cookie_));
  if (r.status == 400) return core::BadRequest("creating user " + user + ": " + r.body);
  if (r.status != 200) return Unexpected("creating user " + user, r);
  return core::Status::Ok();
}

core::Result<std::string> OidcProvider::IdToken(const std::string& user,
                                                const std::string& password) {
  return IdToken(user, password, client_id_, client_secret_);
}

core::Result<std::string> OidcProvider::IdToken(const std::string& user,
                                                const std::string& password,
                                                const std::string& client_id,
                                                const std::string& client_secret) {
  // 1. Login API: a session cookie for the user.
  Json creds = {{"username", user}, {"password", password}};
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult login, Request("POST", "/api/auth/", machinery::Dump(creds), "application/json"));
  if (login.status == 401) {
    return core::Status(core::Reason::kUnauthorized, "glewlwyd rejected the login of " + user);
  }
  if (login.status != 200 || login.set_cookie.empty()) return Unexpected("login of " + user, login);
  const std::string& session = login.set_cookie;

  // 2. Consent for the client (what the browser's grant screen records).
  Json grant = {{"scope", "openid"}};
  KLUTCH_ASSIGN_OR_RETURN(HttpResult consent,
                          Request("PUT", "/api/auth/grant/" + core::PercentEncode(client_id),
                                  machinery::Dump(grant), "application/json", session));
  if (consent.status != 200) return Unexpected("granting scope openid", consent);

  // 3. Authorization request; g_continue says the login UI is done, so glewlwyd answers
  //    with the redirect to the client carrying the code.
  std::string state = RandomToken();
  std::string nonce = RandomToken();
  std::string target =
      "/api/oidc/auth?response_type=code&client_id=" + core::PercentEncode(client_id) +
      "&redirect_uri=" + core::PercentEncode(redirect_uri_) + "&scope=openid&state=" + state +
      "&nonce=" + nonce + "&g_continue";
  KLUTCH_ASSIGN_OR_RETURN(HttpResult auth, Request("GET", target, {}, {}, session));
  if (auth.status != 302 || auth.location.rfind(redirect_uri_, 0) != 0) {
    return core::Internal("authorization request: HTTP " + std::to_string(auth.status) +
                          " Location \"" + auth.location + "\" " + auth.body);
  }
  std::string code = QueryParam(auth.location, "code");
  if (code.empty() || QueryParam(auth.location, "state") != state) {
    return core::Internal("authorization request: no code for our state in " + auth.location);
  }

  // 4. Token request (client_secret_basic).
  std::string form = "grant_type=authorization_code&code=" + core::PercentEncode(code) +
                     "&redirect_uri=" + core::PercentEncode(redirect_uri_);
  std::string basic = "Basic " + core::Base64Encode(client_id + ":" + client_secret);
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult token,
      Request("POST", "/api/oidc/token", form, "application/x-www-form-urlencoded", {}, basic));
  if (token.status != 200) return Unexpected("token request", token);
  auto parsed = machinery::ParseJson(token.body);
  if (!parsed.ok() || !parsed->contains("id_token") || !(*parsed)["id_token"].is_string()) {
    return core::Internal("token response without id_token: " + token.body);
  }
  return (*parsed)["id_token"].get<std::string>();
}

core::Result<std::string> OidcProvider::UserSession(const std::string& user,
                                                    const std::string& password,
                                                    const std::string& client_id) {
  Json creds = {{"username", user}, {"password", password}};
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult login, Request("POST", "/api/auth/", machinery::Dump(creds), "application/json"));
  if (login.status == 401) {
    return core::Status(core::Reason::kUnauthorized, "glewlwyd rejected the login of " + user);
  }
  if (login.status != 200 || login.set_cookie.empty()) return Unexpected("login of " + user, login);
  Json grant = {{"scope", "openid"}};
  KLUTCH_ASSIGN_OR_RETURN(HttpResult consent,
                          Request("PUT", "/api/auth/grant/" + core::PercentEncode(client_id),
                                  machinery::Dump(grant), "application/json", login.set_cookie));
  if (consent.status != 200) return Unexpected("granting scope openid", consent);
  return login.set_cookie;
}

core::Result<std::string> OidcProvider::AuthorizeAs(const std::string& user,
                                                    const std::string& password,
                                                    const std::string& authorization_url) {
  const std::string base = base_url();
  if (authorization_url.rfind(base + "/", 0) != 0) {
    return core::BadRequest("not an authorization URL of this provider: " + authorization_url);
  }
  std::string target = authorization_url.substr(base.size());
  std::string client_id = QueryParam(authorization_url, "client_id");
  KLUTCH_ASSIGN_OR_RETURN(std::string session, UserSession(user, password, client_id));
  // g_continue: the login UI is done; glewlwyd answers with the redirect to the client.
  target += target.find('?') == std::string::npos ? "?g_continue" : "&g_continue";
  KLUTCH_ASSIGN_OR_RETURN(HttpResult auth, Request("GET", target, {}, {}, session));
  if (auth.status != 302 || auth.location.empty()) {
    return core::Internal("authorization request: HTTP " + std::to_string(auth.status) +
                          " Location \"" + auth.location + "\" " + auth.body);
  }
  return auth.location;
}

core::Status OidcProvider::ApproveDevice(const std::string& user, const std::string& password,
                                         const std::string& user_code,
                                         const std::string& client_id) {
  KLUTCH_ASSIGN_OR_RETURN(std::string session,
                          UserSession(user, password, client_id.empty() ? client_id_ : client_id));
  KLUTCH_ASSIGN_OR_RETURN(
      HttpResult r,
      Request("GET", "/api/oidc/device?code=" + core::PercentEncode(user_code) + "&g_continue", {},
              {}, session));
  if (r.status != 302 || r.location.find("prompt=deviceComplete") == std::string::npos) {
    return core::Internal("confirming device code " + user_code + ": HTTP " +
                          std::to_string(r.status) + " Location \"" + r.location + "\"");
  }
  return core::Status::Ok();
}

core::Status OidcProvider::UpdateSigningKeys() {
  auto params = machinery::ParseJson(plugin_json_);
  if (!params.ok()) return params.status();
  Json keys = Json::array();
  for (const auto& k : keys_) keys.push_back(machinery::ParseJson(k).value());
  (*params)["jwks-private"] = machinery::Dump(Json{{"keys", keys}});
  // glewlwyd 2.7.5 signs with the first key of the JWKS whatever default-kid says, so the
  // current key is kept first; default-kid is set as well for versions that honour it.
  (*params)["default-kid"] = current_kid_;
  Json plugin = {{"module", "oidc"},
                 {"name", kPluginName},
                 {"display_name", kPluginName},
                 {"enabled", true},
                 {"parameters", *params}};
  KLUTCH_ASSIGN_OR_RETURN(HttpResult r,
                          Request("PUT", std::string("/api/mod/plugin/") + kPluginName,
                                  machinery::Dump(plugin), "application/json", admin_cookie_));
  if (r.status == 401) {
    // The administrator's session expired: log in again once.
    KLUTCH_RETURN_IF_ERROR(AdminLogin());
    KLUTCH_ASSIGN_OR_RETURN(r, Request("PUT", std::string("/api/mod/plugin/") + kPluginName,
                                       machinery::Dump(plugin), "application/json", admin_cookie_));
  }
  if (r.status != 200) return Unexpected("updating the oidc plugin", r);
  // A stored plugin configuration takes effect when the plugin is reset (reloaded).
  KLUTCH_ASSIGN_OR_RETURN(
      r, Request("PUT", std::string("/api/mod/plugin/") + kPluginName + "/reset", {}, {},
                 admin_cookie_));
  if (r.status != 200) return Unexpected("resetting the oidc plugin", r);
  return core::Status::Ok();
}

core::Result<std::string> OidcProvider::RotateKey() {
  std::string kid = "sig" + std::to_string(next_key_);
  KLUTCH_ASSIGN_OR_RETURN(std::string key, GenerateKey(kid));
  ++next_key_;
  keys_.insert(keys_.begin(), key);
  std::string previous = current_kid_;
  current_kid_ = kid;
  if (auto s = UpdateSigningKeys(); !s.ok()) {
    keys_.erase(keys_.begin());
    current_kid_ = previous;
    return s;
  }
  return kid;
}

core::Status OidcProvider::DropOldKeys() {
  if (keys_.size() <= 1) return core::Status::Ok();
  std::vector<std::string> old(keys_.begin() + 1, keys_.end());
  keys_.resize(1);
  if (auto s = UpdateSigningKeys(); !s.ok()) {
    keys_.insert(keys_.end(), old.begin(), old.end());
    return s;
  }
  return core::Status::Ok();
}

core::Status ApproveDeviceAt(const std::string& idp, const fs::path& ca_file,
                             const std::string& user, const std::string& password,
                             const std::string& user_code, const fs::path& dir,
                             const std::string& client_id) {
  CommandResult r = RunShell(
      "set -e; C=\"$DIR/cookies-$RANDOM\"; trap 'rm -f \"$C\"' EXIT; "
      "curl -sf --cacert \"$CA\" -c \"$C\" -H 'Content-Type: application/json' "
      "-d \"{\\\"username\\\":\\\"$U\\\",\\\"password\\\":\\\"$P\\\"}\" \"$IDP/api/auth/\" "
      ">/dev/null; "
      "curl -sf --cacert \"$CA\" -b \"$C\" -X PUT -H 'Content-Type: application/json' "
      "-d '{\"scope\":\"openid\"}' \"$IDP/api/auth/grant/$CLIENT\" >/dev/null; "
      "curl -s --cacert \"$CA\" -b \"$C\" -o /dev/null -w '%{redirect_url}' "
      "\"$IDP/api/oidc/device?code=$CODE&g_continue\"",
      {{"CA", ca_file.string()},
       {"U", user},
       {"P", password},
       {"IDP", idp},
       {"CODE", user_code},
       {"CLIENT", client_id},
       {"DIR", dir.string()}},
      dir, std::chrono::seconds(30));
  if (r.exit_code != 0 || r.out.find("deviceComplete") == std::string::npos) {
    return core::Internal("approving device code " + user_code + " at " + idp + " as " + user +
                          " failed: " + r.out + r.err);
  }
  return core::Status::Ok();
}

}  // namespace klutch::testing
