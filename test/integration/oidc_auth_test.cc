// OpenID Connect end to end: glewlwyd (test/support/oidc_provider.h) issues ID tokens without a
// browser, a real `klutch apiserver` started with --oidc-* flags authenticates them, and the
// real kubectl uses them. Covered: the user and groups the server derives from the claims
// (`kubectl auth whoami`), RBAC deciding for OIDC users and groups, every refused token
// answering 401 with a Status whose message is "Unauthorized" (tampered payload or signature,
// another audience, another issuer, expired, alg "none", HS256 keyed with the provider's public
// key), and following the provider's signing-key rotation.
//
// The servers run with KLUTCH_LOG_LEVEL=debug: they then log why each token was refused (the
// client only ever sees "Unauthorized"), so each refusal is checked to be for the right reason.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "auth/jwt.h"
#include "core/strings.h"
#include "http/client.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/kube_client.h"
#include "test/support/oidc_provider.h"
#include "test/support/process.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;
using namespace std::chrono_literals;

constexpr char kAlice[] = "alice";
constexpr char kAlicePassword[] = "alice-pw";
constexpr char kAliceEmail[] = "alice@example.test";
constexpr char kForbiddenMessage[] =
    "configmaps is forbidden: User \"alice@example.test\" cannot list resource \"configmaps\" in "
    "API group \"\" in the namespace \"default\"";

OidcProvider::Options AliceOptions() {
  return {
      .user = kAlice, .password = kAlicePassword, .email = kAliceEmail, .groups = {"dev", "ops"}};
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Polls `probe` every `interval` until it holds or `deadline` passes (then one last try). For
// conditions whose probe is a round of requests, where Eventually's 20 ms would flood the server.
bool PollEvery(std::chrono::milliseconds interval, std::chrono::seconds deadline,
               const std::function<bool()>& probe) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (probe()) return true;
    std::this_thread::sleep_for(interval);
  }
  return probe();
}

// A compact JWS taken apart; nothing verified.
struct TokenParts {
  Json header;
  Json claims;
  std::string header_b64, claims_b64;
  std::string signature;  // decoded bytes
};

TokenParts Decode(const std::string& token) {
  TokenParts out;
  auto parts = core::Split(token, '.');
  EXPECT_EQ(parts.size(), 3u) << token;
  if (parts.size() != 3) return out;
  out.header_b64 = std::string(parts[0]);
  out.claims_b64 = std::string(parts[1]);
  auto header = core::Base64UrlDecode(parts[0]);
  auto claims = core::Base64UrlDecode(parts[1]);
  auto signature = core::Base64UrlDecode(parts[2]);
  EXPECT_TRUE(header && claims && signature) << token;
  if (!header || !claims || !signature) return out;
  out.signature = *signature;
  auto h = machinery::ParseJson(*header);
  auto c = machinery::ParseJson(*claims);
  EXPECT_TRUE(h.ok() && c.ok()) << token;
  if (h.ok()) out.header = *h;
  if (c.ok()) out.claims = *c;
  return out;
}

std::string Encode(const Json& json) { return core::Base64UrlEncode(machinery::Dump(json)); }

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest, &len);
  return std::string(reinterpret_cast<const char*>(digest), len);
}

// A compact JWS signed with HS256 under `key`.
std::string Hs256Token(const Json& header, const Json& claims, std::string_view key) {
  std::string input = Encode(header) + "." + Encode(claims);
  return input + "." + core::Base64UrlEncode(HmacSha256(key, input));
}

// "-----BEGIN PUBLIC KEY-----" PEM of a DER SubjectPublicKeyInfo, 64 characters a line.
std::string PublicKeyPem(std::string_view der) {
  std::string b64 = core::Base64Encode(der);
  std::string pem = "-----BEGIN PUBLIC KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) pem += b64.substr(i, 64) + "\n";
  return pem + "-----END PUBLIC KEY-----\n";
}

// What the server says a token's user is (POST selfsubjectreviews, the call behind
// `kubectl auth whoami`).
struct Seen {
  int status = 0;
  std::string body;
  std::string username;
  Json groups;
};

class OidcAuth : public ::testing::Test {
 protected:
  std::unique_ptr<OidcProvider> StartProvider(const std::string& name,
                                              OidcProvider::Options options = AliceOptions()) {
    std::string error;
    auto provider = OidcProvider::Start(dir_.path() / name, &error, std::move(options));
    EXPECT_TRUE(provider) << error;
    return provider;
  }

  // The flags under test: e-mail as user name (kube adds no prefix to it by default), groups
  // from the "groups" claim with prefix "oidc:".
  static std::vector<std::string> EmailFlags(const OidcProvider& provider) {
    return {"--oidc-issuer-url=" + provider.issuer(),
            "--oidc-client-id=" + provider.client_id(),
            "--oidc-ca-file=" + provider.ca_file(),
            "--oidc-username-claim=email",
            "--oidc-groups-claim=groups",
            "--oidc-groups-prefix=oidc:"};
  }

  // Starts `klutch apiserver` (data in dir_/`name`) with `args`, logging at debug level.
  void StartServer(std::vector<std::string> args, const std::string& name = "server") {
    const char* previous = std::getenv("KLUTCH_LOG_LEVEL");
    std::optional<std::string> saved;
    if (previous) saved = previous;
    setenv("KLUTCH_LOG_LEVEL", "debug", 1);
    std::string error;
    server_ = ApiServerProcess::Start(dir_.path() / name, std::move(args), &error);
    if (saved) {
      setenv("KLUTCH_LOG_LEVEL", saved->c_str(), 1);
    } else {
      unsetenv("KLUTCH_LOG_LEVEL");
    }
    ASSERT_TRUE(server_) << error;
    auto creds = ReadKubeconfig(server_->kubeconfig());
    ASSERT_TRUE(creds.ok()) << creds.status().ToString();
    creds_ = *creds;
  }

  // One request with `token` as bearer and no client certificate.
  http::ClientResponse Call(const std::string& method, const std::string& path,
                            const std::string& token, std::string body = {}) {
    http::Client client({.host = creds_.host,
                         .port = creds_.port,
                         .tls = true,
                         .ca_pem = creds_.ca_pem,
                         .timeout = std::chrono::milliseconds(20000)});
    http::Headers headers;
    headers.Add("Authorization", "Bearer " + token);
    headers.Add("Accept", "application/json");
    if (!body.empty()) headers.Add("Content-Type", "application/json");
    auto r = client.Do(method, path, headers, std::move(body));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }

  Seen Whoami(const std::string& token) {
    Json review = {{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}};
    http::ClientResponse r = Call("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                  token, machinery::Dump(review));
    Seen seen{.status = r.status, .body = r.body};
    if (r.status != 201) return seen;
    auto json = machinery::ParseJson(r.body);
    EXPECT_TRUE(json.ok()) << r.body;
    if (!json.ok()) return seen;
    seen.username = machinery::GetString(*json, {"status", "userInfo", "username"});
    if (const Json* groups = machinery::Find(*json, {"status", "userInfo", "groups"})) {
      seen.groups = *groups;
    }
    return seen;
  }

  // The first line of the server's log containing `needle` ("" when none yet).
  std::string LogLine(const std::string& needle) const {
    std::istringstream log(server_->log());
    for (std::string line; std::getline(log, line);) {
      if (line.find(needle) != std::string::npos) return line;
    }
    return "";
  }

  // Whether the log has a line containing `then` after one containing `first`.
  bool LogHasAfter(const std::string& first, const std::string& then) const {
    std::string log = server_->log();
    size_t at = log.find(first);
    return at != std::string::npos && log.find(then, at) != std::string::npos;
  }

  // Expects `token` refused: HTTP 401 with the Status kube-apiserver sends (message exactly
  // "Unauthorized"), the server's log naming `reason`, and kubectl failing the same way.
  // `name` (a DNS label) makes the request path unique, so its log line is found.
  void ExpectRefused(const std::string& token, const std::string& name, const std::string& reason) {
    SCOPED_TRACE("token case " + name);
    std::string path = "/api/v1/namespaces/" + name + "/configmaps";
    http::ClientResponse r = Call("GET", path, token);
    EXPECT_EQ(r.status, 401) << r.body;
    auto status = machinery::ParseJson(r.body);
    EXPECT_TRUE(status.ok()) << r.body;
    if (status.ok()) {
      EXPECT_EQ(status->value("kind", ""), "Status") << r.body;
      EXPECT_EQ(status->value("status", ""), "Failure") << r.body;
      EXPECT_EQ(status->value("message", ""), "Unauthorized") << r.body;
      EXPECT_EQ(status->value("reason", ""), "Unauthorized") << r.body;
      EXPECT_EQ(status->value("code", 0), 401) << r.body;
    }
    std::string line;
    EXPECT_TRUE(Eventually(
        [&] {
          line = LogLine("GET " + path + " from ");
          return !line.empty();
        },
        10s))
        << server_->log();
    EXPECT_NE(line.find(reason), std::string::npos) << "want \"" << reason << "\" in: " << line;

    CommandResult k = Kubectl(token, "get configmaps -n " + name);
    EXPECT_EQ(k.exit_code, 1) << k.out << k.err;
    EXPECT_NE(k.err.find("error: You must be logged in to the server"), std::string::npos) << k.err;
  }

  // A kubeconfig for the server with `token` as the user's credential (none when empty).
  fs::path WriteKubeconfig(const std::string& token) {
    std::string name = "kubeconfig-" + std::to_string(++kubeconfigs_);
    std::string config =
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: klutch\n"
        "  cluster:\n"
        "    server: " +
        server_->url() +
        "\n"
        "    certificate-authority-data: " +
        core::Base64Encode(creds_.ca_pem) +
        "\n"
        "users:\n"
        "- name: oidc\n"
        "  user: " +
        (token.empty() ? std::string("{}") : "\n    token: " + token) +
        "\n"
        "contexts:\n"
        "- name: oidc\n"
        "  context: {cluster: klutch, user: oidc}\n"
        "current-context: oidc\n";
    return dir_.Write(name, config);
  }

  CommandResult RunKubectl(const fs::path& kubeconfig, const std::string& args) {
    std::map<std::string, std::string> env = {{"KUBECONFIG", kubeconfig.string()},
                                              {"KUBECACHEDIR", (dir_.path() / "cache").string()},
                                              {"HOME", dir_.path().string()},
                                              {"LC_ALL", "C"}};
    return RunShell("kubectl " + args, env, dir_.path(), 60s);
  }
  // kubectl as the OIDC user of `token` (a kubeconfig with `token:`).
  CommandResult Kubectl(const std::string& token, const std::string& args) {
    return RunKubectl(WriteKubeconfig(token), args);
  }
  // kubectl as the server's administrator (client certificate, system:masters).
  CommandResult AdminKubectl(const std::string& args) {
    return RunKubectl(server_->kubeconfig(), args);
  }

  void SetUp() override {
    // kubectl is part of the machine: a missing one fails the test, it is not skipped.
    ASSERT_TRUE(fs::exists("/usr/bin/kubectl"))
        << "/usr/bin/kubectl is missing: it is required to run this test";
  }

  TempDir dir_{"klutch-oidc-auth"};
  std::unique_ptr<ApiServerProcess> server_;
  ServerCredentials creds_;
  int kubeconfigs_ = 0;
};

// kubectl with an ID token acts as the user the claims name: e-mail as user name, groups
// prefixed, plus system:authenticated. RBAC then decides: forbidden (kube's message) until the
// administrator binds a role to the user or to one of its (prefixed) groups.
TEST_F(OidcAuth, KubectlActsAsTheTokenUserAndRbacDecides) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  auto token = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(token.ok()) << token.status().ToString();

  // `kubectl --token` over a kubeconfig without credentials, as JSON and as the table.
  fs::path bare = WriteKubeconfig("");
  CommandResult whoami = RunKubectl(bare, "--token=" + *token + " auth whoami -o json");
  ASSERT_EQ(whoami.exit_code, 0) << whoami.out << whoami.err;
  auto review = machinery::ParseJson(whoami.out);
  ASSERT_TRUE(review.ok()) << whoami.out;
  EXPECT_EQ(machinery::GetString(*review, {"kind"}), "SelfSubjectReview") << whoami.out;
  EXPECT_EQ(machinery::GetString(*review, {"status", "userInfo", "username"}), kAliceEmail)
      << whoami.out;
  const Json* groups = machinery::Find(*review, {"status", "userInfo", "groups"});
  ASSERT_NE(groups, nullptr) << whoami.out;
  EXPECT_EQ(*groups, Json::array({"oidc:dev", "oidc:ops", "system:authenticated"})) << whoami.out;
  whoami = Kubectl(*token, "auth whoami");
  EXPECT_EQ(whoami.exit_code, 0) << whoami.err;
  EXPECT_EQ(whoami.out,
            "ATTRIBUTE   VALUE\n"
            "Username    alice@example.test\n"
            "Groups      [oidc:dev oidc:ops system:authenticated]\n")
      << whoami.err;
  Seen seen = Whoami(*token);  // the same through HTTP
  EXPECT_EQ(seen.status, 201) << seen.body;
  EXPECT_EQ(seen.username, kAliceEmail) << seen.body;
  EXPECT_EQ(seen.groups, Json::array({"oidc:dev", "oidc:ops", "system:authenticated"}))
      << seen.body;

  // Without a binding: kube's 403, through HTTP and kubectl.
  CommandResult created =
      AdminKubectl("create configmap team-settings -n default --from-literal=a=b");
  ASSERT_EQ(created.exit_code, 0) << created.out << created.err;
  http::ClientResponse denied = Call("GET", "/api/v1/namespaces/default/configmaps", *token);
  EXPECT_EQ(denied.status, 403) << denied.body;
  auto status = machinery::ParseJson(denied.body);
  ASSERT_TRUE(status.ok()) << denied.body;
  EXPECT_EQ(status->value("reason", ""), "Forbidden") << denied.body;
  EXPECT_EQ(status->value("message", ""), kForbiddenMessage) << denied.body;
  CommandResult get = Kubectl(*token, "get configmaps -n default");
  EXPECT_EQ(get.exit_code, 1) << get.out;
  EXPECT_EQ(get.err, std::string("Error from server (Forbidden): ") + kForbiddenMessage + "\n");
  EXPECT_NE(get.err.find("User \"alice@example.test\" cannot list resource \"configmaps\""),
            std::string::npos);

  // A RoleBinding of ClusterRole view to the user: the same command then lists.
  CommandResult bound = AdminKubectl(
      "create rolebinding alice-view --clusterrole=view --user=alice@example.test -n default");
  ASSERT_EQ(bound.exit_code, 0) << bound.out << bound.err;
  EXPECT_EQ(bound.out, "rolebinding.rbac.authorization.k8s.io/alice-view created\n");
  EXPECT_TRUE(Eventually(
      [&] {
        get = Kubectl(*token, "get configmaps -n default -o name");
        return get.exit_code == 0;
      },
      30s))
      << get.out << get.err;
  EXPECT_NE(get.out.find("configmap/team-settings\n"), std::string::npos) << get.out;
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/default/configmaps", *token).status, 200);
  // view does not write.
  CommandResult write = Kubectl(*token, "create configmap mine -n default");
  EXPECT_EQ(write.exit_code, 1) << write.out;
  EXPECT_NE(write.err.find("User \"alice@example.test\" cannot create resource \"configmaps\""),
            std::string::npos)
      << write.err;

  // A Group subject names the prefixed group: bob (group qa) is allowed through oidc:qa.
  ASSERT_TRUE(provider->AddUser("bob", "bob-pw", "bob@example.test", {"qa"}).ok());
  auto bob = provider->IdToken("bob", "bob-pw");
  ASSERT_TRUE(bob.ok()) << bob.status().ToString();
  get = Kubectl(*bob, "get configmaps -n default -o name");
  EXPECT_EQ(get.exit_code, 1) << get.out;
  EXPECT_NE(get.err.find("User \"bob@example.test\" cannot list resource \"configmaps\""),
            std::string::npos)
      << get.err;
  bound = AdminKubectl("create rolebinding qa-view --clusterrole=view --group=oidc:qa -n default");
  ASSERT_EQ(bound.exit_code, 0) << bound.out << bound.err;
  EXPECT_TRUE(Eventually(
      [&] {
        get = Kubectl(*bob, "get configmaps -n default -o name");
        return get.exit_code == 0;
      },
      30s))
      << get.out << get.err;
  EXPECT_NE(get.out.find("configmap/team-settings\n"), std::string::npos) << get.out;
}

// With the default username claim (sub) the user name is prefixed with the issuer URL and
// "#", as kube-apiserver does; --oidc-username-prefix=- drops the prefix. Without
// --oidc-groups-claim the token's groups are ignored.
TEST_F(OidcAuth, DefaultUsernamePrefixIsTheIssuerUrl) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  std::vector<std::string> flags = {"--oidc-issuer-url=" + provider->issuer(),
                                    "--oidc-client-id=" + provider->client_id(),
                                    "--oidc-ca-file=" + provider->ca_file()};
  ASSERT_NO_FATAL_FAILURE(StartServer(flags, "server-default"));
  auto token = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  std::string sub = Decode(*token).claims.value("sub", "");
  ASSERT_FALSE(sub.empty());

  CommandResult whoami = Kubectl(*token, "auth whoami -o json");
  ASSERT_EQ(whoami.exit_code, 0) << whoami.out << whoami.err;
  auto review = machinery::ParseJson(whoami.out);
  ASSERT_TRUE(review.ok()) << whoami.out;
  EXPECT_EQ(machinery::GetString(*review, {"status", "userInfo", "username"}),
            provider->issuer() + "#" + sub)
      << whoami.out;
  const Json* groups = machinery::Find(*review, {"status", "userInfo", "groups"});
  ASSERT_NE(groups, nullptr) << whoami.out;
  EXPECT_EQ(*groups, Json::array({"system:authenticated"})) << whoami.out;

  server_.reset();
  flags.push_back("--oidc-username-prefix=-");
  ASSERT_NO_FATAL_FAILURE(StartServer(flags, "server-no-prefix"));
  Seen seen = Whoami(*token);
  EXPECT_EQ(seen.status, 201) << seen.body;
  EXPECT_EQ(seen.username, sub) << seen.body;
}

// A token whose payload was changed after signing, or whose signature was changed, is refused.
TEST_F(OidcAuth, RefusesTamperedTokens) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  auto token = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(Whoami(*token).username, kAliceEmail);  // the untouched token passes
  TokenParts parts = Decode(*token);
  std::string signature_b64 = core::Base64UrlEncode(parts.signature);

  // Another e-mail in the payload, the original signature.
  Json claims = parts.claims;
  claims["email"] = "mallory@example.test";
  ExpectRefused(parts.header_b64 + "." + Encode(claims) + "." + signature_b64, "changed-email",
                "oidc: signature is invalid");
  // One character of the payload's base64url changed, the first change (from the middle on)
  // that still decodes to a JSON object: only the signature can tell.
  std::string payload;
  for (size_t at = parts.claims_b64.size() / 2; at < parts.claims_b64.size() && payload.empty();
       ++at) {
    for (char c : std::string_view("ABCabc012")) {
      std::string candidate = parts.claims_b64;
      if (candidate[at] == c) continue;
      candidate[at] = c;
      auto decoded = core::Base64UrlDecode(candidate);
      if (!decoded) continue;
      auto json = machinery::ParseJson(*decoded);
      if (json.ok() && json->is_object() && *json != parts.claims) {
        payload = candidate;
        break;
      }
    }
  }
  ASSERT_FALSE(payload.empty()) << "no one-character change of " << parts.claims_b64;
  ExpectRefused(parts.header_b64 + "." + payload + "." + signature_b64, "flipped-payload",
                "oidc: signature is invalid");
  // One bit of the signature flipped.
  std::string signature = parts.signature;
  signature[signature.size() / 2] ^= 0x01;
  ExpectRefused(parts.header_b64 + "." + parts.claims_b64 + "." + core::Base64UrlEncode(signature),
                "flipped-signature", "oidc: signature is invalid");
}

// A valid token of the same provider issued to another client (aud) is not for this server.
TEST_F(OidcAuth, RefusesTokensForAnotherAudience) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  ASSERT_TRUE(provider->AddClient("other-app", "other-secret").ok());
  auto other = provider->IdToken(kAlice, kAlicePassword, "other-app", "other-secret");
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  TokenParts parts = Decode(*other);
  EXPECT_EQ(parts.claims.value("iss", ""), provider->issuer());
  EXPECT_EQ(parts.claims.value("aud", Json()), Json("other-app")) << parts.claims.dump();
  ExpectRefused(*other, "other-audience", "oidc: invalid audience");

  auto ours = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  EXPECT_EQ(Whoami(*ours).username, kAliceEmail);
}

// A valid token of another provider (another issuer URL, its own keys, the same kid "sig1")
// is refused.
TEST_F(OidcAuth, RefusesTokensOfAnotherIssuer) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  auto stranger = StartProvider("glewlwyd-other");
  ASSERT_TRUE(stranger);
  ASSERT_NE(stranger->issuer(), provider->issuer());
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  auto foreign = stranger->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(foreign.ok()) << foreign.status().ToString();
  TokenParts parts = Decode(*foreign);
  EXPECT_EQ(parts.claims.value("iss", ""), stranger->issuer());
  EXPECT_EQ(parts.claims.value("aud", Json()), Json(provider->client_id()));
  EXPECT_EQ(parts.header.value("kid", ""), provider->current_kid());
  // No authenticator claims a token of an unknown issuer.
  ExpectRefused(*foreign, "other-issuer", "no authenticator accepts the token");
  // Claiming our issuer does not help: our keys do not verify the stranger's signature.
  Json claims = parts.claims;
  claims["iss"] = provider->issuer();
  ExpectRefused(
      parts.header_b64 + "." + Encode(claims) + "." + core::Base64UrlEncode(parts.signature),
      "other-issuer-renamed", "oidc: signature is invalid");
}

// A token is accepted until its exp and refused from then on (no leeway, and the server's
// token cache does not outlive exp).
TEST_F(OidcAuth, RefusesExpiredTokens) {
  OidcProvider::Options options = AliceOptions();
  options.token_duration = 4s;
  auto provider = StartProvider("glewlwyd-short", options);
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  // Accepted before exp: the answer came back before exp by the test's clock, so the server
  // (same clock) checked earlier still. A machine too slow for that gets another token.
  std::string token;
  int64_t exp = 0;
  for (int attempt = 0; attempt < 3 && token.empty(); ++attempt) {
    auto issued = provider->IdToken(kAlice, kAlicePassword);
    ASSERT_TRUE(issued.ok()) << issued.status().ToString();
    TokenParts parts = Decode(*issued);
    exp = parts.claims.value("exp", int64_t{0});
    EXPECT_EQ(exp - parts.claims.value("iat", int64_t{0}), 4) << parts.claims.dump();
    Seen before = Whoami(*issued);
    if (UnixNow() >= exp) continue;
    EXPECT_EQ(before.status, 201) << before.body;
    EXPECT_EQ(before.username, kAliceEmail);
    token = *issued;
  }
  ASSERT_FALSE(token.empty()) << "three tokens expired before the server could be asked";

  // Until the clock is past exp (by a second, as exp has second resolution).
  ASSERT_TRUE(PollEvery(100ms, 30s, [&] { return UnixNow() >= exp + 1; }));
  ExpectRefused(token, "expired", "oidc: token has expired");
}

// Unsigned tokens (alg none) and HS256 tokens keyed with the provider's public key material
// (the algorithm-confusion attack) are refused, whatever the claims say.
TEST_F(OidcAuth, RefusesUnsignedAndHmacTokens) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  auto token = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(Whoami(*token).username, kAliceEmail);
  TokenParts parts = Decode(*token);
  const Json& claims = parts.claims;

  // alg none, empty signature (not even a JWS for the server's parser).
  ExpectRefused(Encode({{"alg", "none"}, {"typ", "JWT"}}) + "." + Encode(claims) + ".",
                "alg-none-empty", "no authenticator accepts the token");
  // alg none, with the kid and the original signature left in place.
  ExpectRefused(Encode({{"alg", "none"}, {"kid", parts.header.value("kid", "")}}) + "." +
                    parts.claims_b64 + "." + core::Base64UrlEncode(parts.signature),
                "alg-none-signed", "oidc: OIDC token signed with none, not an accepted algorithm");

  // HS256 keyed with the RSA modulus of the JWKS, and with the PEM of the public key.
  auto jwks_response = provider->Request("GET", "/api/oidc/jwks");
  ASSERT_TRUE(jwks_response.ok()) << jwks_response.status().ToString();
  auto jwks = machinery::ParseJson(jwks_response->body);
  ASSERT_TRUE(jwks.ok() && jwks->contains("keys") && !(*jwks)["keys"].empty())
      << jwks_response->body;
  const Json& jwk = (*jwks)["keys"][0];
  auto modulus = core::Base64UrlDecode(jwk.value("n", ""));
  ASSERT_TRUE(modulus && modulus->size() == 256) << jwk.dump();
  auto key = auth::PublicKey::FromJwk(jwk);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  std::string pem = PublicKeyPem(key->DerSpki());
  Json hs256 = {{"alg", "HS256"}, {"kid", jwk.value("kid", "")}, {"typ", "JWT"}};
  ExpectRefused(Hs256Token(hs256, claims, *modulus), "hs256-modulus",
                "oidc: OIDC token signed with HS256, not an accepted algorithm");
  ExpectRefused(Hs256Token(hs256, claims, pem), "hs256-pem",
                "oidc: OIDC token signed with HS256, not an accepted algorithm");

  // Nor can HMAC be allowed: the server refuses to start with it.
  server_.reset();
  std::vector<std::string> flags = EmailFlags(*provider);
  flags.push_back("--oidc-signing-algs=RS256,HS256");
  std::string error;
  auto refused = ApiServerProcess::Start(dir_.path() / "server-hs256", flags, &error);
  EXPECT_FALSE(refused);
  EXPECT_NE(error.find("--oidc-signing-algs: HS256 is not an asymmetric algorithm"),
            std::string::npos)
      << error;
}

// The provider rotates its signing key: a token with the new kid makes the server refetch the
// JWKS, and is accepted. When the provider then withdraws the old key, the server keeps the
// keys it fetched until its next refetch (as kube-apiserver's go-oidc key set does), which only
// a token with a kid it does not know triggers, at most once per 10 s; from then on tokens
// signed with the withdrawn key are refused.
TEST_F(OidcAuth, FollowsKeyRotation) {
  auto provider = StartProvider("glewlwyd");
  ASSERT_TRUE(provider);
  ASSERT_NO_FATAL_FAILURE(StartServer(EmailFlags(*provider)));
  auto old_token = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(old_token.ok()) << old_token.status().ToString();
  EXPECT_EQ(Decode(*old_token).header.value("kid", ""), "sig1");
  EXPECT_EQ(Whoami(*old_token).username, kAliceEmail);

  auto kid = provider->RotateKey();
  ASSERT_TRUE(kid.ok()) << kid.status().ToString();
  auto new_token = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(new_token.ok()) << new_token.status().ToString();
  TokenParts new_parts = Decode(*new_token);
  EXPECT_EQ(new_parts.header.value("kid", ""), *kid);
  // The refetch is rate-limited (10 s after a previous one), hence the deadline.
  Seen seen;
  EXPECT_TRUE(PollEvery(250ms, 15s,
                        [&] {
                          seen = Whoami(*new_token);
                          return seen.status == 201;
                        }))
      << seen.status << " " << seen.body << "\n"
      << server_->log();
  EXPECT_EQ(seen.username, kAliceEmail);
  EXPECT_FALSE(LogLine("2 signing keys").empty()) << server_->log();
  EXPECT_EQ(Whoami(*old_token).username, kAliceEmail);  // both keys are published

  ASSERT_TRUE(provider->DropOldKeys().ok());
  // The server still holds sig1 (and may have cached the token's result).
  EXPECT_EQ(Whoami(*old_token).username, kAliceEmail);
  // A token naming an unknown kid (new claims, new signature: refused either way) triggers the
  // refetch once the rate limit allows; after it, and after the old token's cached result
  // expires (10 s), the old token is refused.
  std::string unknown_kid = Encode({{"alg", "RS256"}, {"kid", "no-such-key"}}) + "." +
                            new_parts.claims_b64 + "." + core::Base64UrlEncode(new_parts.signature);
  Seen old_seen;
  EXPECT_TRUE(PollEvery(500ms, 45s,
                        [&] {
                          EXPECT_EQ(Whoami(unknown_kid).status, 401);
                          old_seen = Whoami(*old_token);
                          return old_seen.status == 401;
                        }))
      << old_seen.status << " " << old_seen.body;
  EXPECT_TRUE(LogHasAfter("2 signing keys", "1 signing keys")) << server_->log();
  ExpectRefused(*old_token, "withdrawn-key", "oidc: no key to verify the token with");
  // The current key still verifies.
  EXPECT_EQ(Whoami(*new_token).username, kAliceEmail);
  auto fresh = provider->IdToken(kAlice, kAlicePassword);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  EXPECT_EQ(Whoami(*fresh).username, kAliceEmail);
}

}  // namespace
}  // namespace klutch::testing
