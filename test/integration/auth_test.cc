// Authentication and authorization of a `klutch apiserver` over HTTPS, end to end, as users
// meet them: real kubectl (the dispatcher's default client, 1.27 and 1.33) for namespace Roles,
// `auth can-i`, `auth whoami`, `create token`, impersonation and RBAC escalation; a raw HTTP
// client for the exact Status bodies, bad and forged credentials, anonymous access, the audit
// log and the review APIs. Users come from a --token-auth-file and from client certificates
// issued by the server's CA; expectations are kube-apiserver's answers.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "auth/jwt.h"
#include "core/strings.h"
#include "http/certs.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/server_fixture.h"
#include "test/support/wait.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::GetString;
using machinery::Json;

// token,user,uid,"groups"
constexpr char kTokenFile[] = R"(alice-token,alice,alice-uid,"devs,qa"
bob-token,bob,bob-uid
ivan-token,ivan,ivan-uid
)";
constexpr char kAliceGroups[] = R"(["devs" "qa" "system:authenticated"])";
constexpr char kIssuer[] = "https://kubernetes.default.svc.cluster.local";
constexpr char kUnauthorizedLine[] = "error: You must be logged in to the server (Unauthorized)";

// --- objects ---------------------------------------------------------------------------------

Json Meta(const std::string& ns, const std::string& name) {
  Json m = {{"name", name}};
  if (!ns.empty()) m["namespace"] = ns;
  return m;
}

Json Namespace(const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", Meta("", name)}};
}

Json ServiceAccount(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", Meta(ns, name)}};
}

Json Secret(const std::string& ns, const std::string& name) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", Meta(ns, name)},
          {"stringData", {{"key", "value"}}}};
}

Json Rule(std::vector<std::string> groups, std::vector<std::string> resources,
          std::vector<std::string> verbs, std::vector<std::string> names = {}) {
  Json r = {{"apiGroups", groups}, {"resources", resources}, {"verbs", verbs}};
  if (!names.empty()) r["resourceNames"] = names;
  return r;
}

// A Role (ns set) or ClusterRole.
Json Role(const std::string& ns, const std::string& name, Json rules) {
  return {{"apiVersion", "rbac.authorization.k8s.io/v1"},
          {"kind", ns.empty() ? "ClusterRole" : "Role"},
          {"metadata", Meta(ns, name)},
          {"rules", std::move(rules)}};
}

Json Subject(const std::string& kind, const std::string& name, const std::string& ns = "") {
  Json s = {{"kind", kind}, {"name", name}};
  if (kind == "ServiceAccount") {
    s["namespace"] = ns;
  } else {
    s["apiGroup"] = "rbac.authorization.k8s.io";
  }
  return s;
}

// A RoleBinding (ns set) or ClusterRoleBinding of `role_kind` `role`.
Json Binding(const std::string& ns, const std::string& name, const std::string& role_kind,
             const std::string& role, Json subject) {
  return {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", ns.empty() ? "ClusterRoleBinding" : "RoleBinding"},
      {"metadata", Meta(ns, name)},
      {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", role_kind}, {"name", role}}},
      {"subjects", Json::array({std::move(subject)})}};
}

std::string CollectionPath(const Json& obj) {
  static const std::map<std::string, std::pair<std::string, std::string>> kinds = {
      {"Namespace", {"/api/v1", "namespaces"}},
      {"ServiceAccount", {"/api/v1", "serviceaccounts"}},
      {"Secret", {"/api/v1", "secrets"}},
      {"ConfigMap", {"/api/v1", "configmaps"}},
      {"Role", {"/apis/rbac.authorization.k8s.io/v1", "roles"}},
      {"RoleBinding", {"/apis/rbac.authorization.k8s.io/v1", "rolebindings"}},
      {"ClusterRole", {"/apis/rbac.authorization.k8s.io/v1", "clusterroles"}},
      {"ClusterRoleBinding", {"/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings"}},
  };
  const auto& [prefix, plural] = kinds.at(obj.value("kind", ""));
  const std::string ns = GetString(obj, {"metadata", "namespace"});
  return ns.empty() ? prefix + "/" + plural : prefix + "/namespaces/" + ns + "/" + plural;
}

// --- JWTs --------------------------------------------------------------------------------------

std::vector<std::string> JwtParts(std::string_view token) {
  std::vector<std::string> out;
  for (auto p : core::Split(token, '.')) out.emplace_back(p);
  return out;
}

// The payload of a compact JWS; an empty object when it has none.
Json JwtClaims(std::string_view token) {
  auto parts = JwtParts(token);
  auto payload = parts.size() == 3 ? core::Base64UrlDecode(parts[1]) : std::nullopt;
  Json claims = payload ? Json::parse(*payload, nullptr, false) : Json::object();
  return claims.is_object() ? claims : Json::object();
}

std::string B64(const Json& j) { return core::Base64UrlEncode(j.dump()); }

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string PemBlock(std::string_view type, std::string_view der) {
  std::string b64 = core::Base64Encode(der);
  std::string out = fmt::format("-----BEGIN {}-----\n", type);
  for (size_t i = 0; i < b64.size(); i += 64) out += b64.substr(i, 64) + "\n";
  return out + fmt::format("-----END {}-----\n", type);
}

// --- output matching ---------------------------------------------------------------------------

// Non-blank lines with runs of blanks collapsed to one space and the ends trimmed, so kubectl's
// column alignment does not matter.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    std::string n;
    for (char c : l) {
      if (c == ' ' || c == '\t' || c == '\r') {
        if (!n.empty() && n.back() != ' ') n += ' ';
      } else {
        n += c;
      }
    }
    while (!n.empty() && n.back() == ' ') n.pop_back();
    if (!n.empty()) out.push_back(std::move(n));
  }
  return out;
}

bool HasLine(const std::string& text, std::string_view line) {
  auto lines = Lines(text);
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

struct KubectlRun {
  std::string command;
  CommandResult result;
};

std::string Describe(const KubectlRun& run) {
  return fmt::format("\n$ {}\nexit {}{}\nstdout:\n{}stderr:\n{}", run.command, run.result.exit_code,
                     run.result.timed_out ? " (timed out)" : "", run.result.out, run.result.err);
}

// Exit 0 and exactly these stdout lines (normalized as Lines does).
::testing::AssertionResult Prints(const KubectlRun& run, const std::vector<std::string>& want) {
  if (run.result.exit_code == 0 && Lines(run.result.out) == want) {
    return ::testing::AssertionSuccess();
  }
  std::string w;
  for (const auto& l : want) w += l + "\n";
  return ::testing::AssertionFailure() << "want exit 0 and stdout:\n" << w << Describe(run);
}

// Exit 0 and, when given, `line` among the stdout lines.
::testing::AssertionResult Succeeds(const KubectlRun& run, std::string_view line = {}) {
  if (run.result.exit_code == 0 && (line.empty() || HasLine(run.result.out, line))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "want exit 0 and stdout line: " << line << Describe(run);
}

// Exit 1 and every one of `lines` among the stderr lines.
::testing::AssertionResult FailsWith(const KubectlRun& run, std::vector<std::string_view> lines) {
  bool ok = run.result.exit_code == 1;
  for (auto l : lines) ok = ok && HasLine(run.result.err, l);
  if (ok) return ::testing::AssertionSuccess();
  std::string w;
  for (auto l : lines) w += std::string(l) + "\n";
  return ::testing::AssertionFailure() << "want exit 1 and stderr lines:\n" << w << Describe(run);
}

// `kubectl auth can-i`: "yes" with exit 0, or "no" with exit 1.
::testing::AssertionResult Answers(const KubectlRun& run, bool yes) {
  const std::vector<std::string> want = {yes ? "yes" : "no"};
  if (run.result.exit_code == (yes ? 0 : 1) && Lines(run.result.out) == want) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "want " << want[0] << Describe(run);
}

// --- fixture -----------------------------------------------------------------------------------

// A server with the token file, a 2 s minimum token lifetime (so expiry is observable) and an
// audit log; helpers for admin writes, per-user kubeconfigs and clients, and kubectl.
class AuthTest : public ServerTest {
 protected:
  void SetUp() override {
    token_file_ = dir_.Write("tokens.csv", kTokenFile);
    audit_log_ = dir_.path() / "audit.log";
    std::vector<std::string> args = {"--token-auth-file", token_file_.string(),
                                     "--service-account-min-token-expiration=2s",
                                     "--audit-log-path", audit_log_.string()};
    for (auto& a : ExtraArgs()) args.push_back(a);
    StartServer(args);
    ASSERT_FALSE(HasFatalFailure());
    auto creds = ReadKubeconfig(server_->kubeconfig());
    ASSERT_TRUE(creds.ok()) << creds.status().ToString();
    creds_ = *creds;
    ServerCredentials bare = creds_;
    bare.cert_pem.clear();
    bare.key_pem.clear();
    bare_ = NewClient(bare);
    admin_kc_ = server_->kubeconfig();
    alice_kc_ = TokenKubeconfig("alice", "alice-token");
    bob_kc_ = TokenKubeconfig("bob", "bob-token");
    ivan_kc_ = TokenKubeconfig("ivan", "ivan-token");
  }

  virtual std::vector<std::string> ExtraArgs() { return {}; }

  void TearDown() override {
    if (HasFailure() && server_) {
      std::string log = server_->log();
      ADD_FAILURE() << "server log tail:\n"
                    << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    }
  }

  // A raw request; `authorization` is the whole Authorization header ("" = none).
  http::ClientResponse Send(http::Client& client, std::string_view method, std::string_view path,
                            std::string_view authorization = {}, const Json& body = nullptr,
                            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::Headers h;
    h.Set("Accept", "application/json");
    if (!authorization.empty()) h.Set("Authorization", std::string(authorization));
    for (const auto& [k, v] : headers) h.Add(k, v);
    std::string payload;
    if (!body.is_null()) {
      h.Set("Content-Type", "application/json");
      payload = body.dump();
    }
    auto r = client.Do(method, path, h, payload);
    EXPECT_TRUE(r.ok()) << method << " " << path << ": " << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }

  http::ClientResponse AsToken(std::string_view token, std::string_view method,
                               std::string_view path, const Json& body = nullptr) {
    return Send(*bare_, method, path, "Bearer " + std::string(token), body);
  }

  http::ClientResponse AsAdmin(std::string_view method, std::string_view path,
                               const Json& body = nullptr) {
    return Send(*http_, method, path, {}, body);
  }

  Json Create(const Json& obj) {
    auto r = AsAdmin("POST", CollectionPath(obj), obj);
    EXPECT_EQ(r.status, 201) << r.body;
    return Json::parse(r.body, nullptr, false);
  }

  // Namespaces team-a and team-b; ServiceAccount team-a/robot; Secrets team-a/app-secret and
  // team-a/other; Role team-a/app (configmaps get/list/watch/create, serviceaccounts/token
  // create, secrets get of app-secret only) bound to alice.
  void CreateTeams() {
    Create(Namespace("team-a"));
    Create(Namespace("team-b"));
    robot_uid_ = machinery::Uid(Create(ServiceAccount("team-a", "robot")));
    Create(Secret("team-a", "app-secret"));
    Create(Secret("team-a", "other"));
    Create(Role("team-a", "app",
                Json::array({Rule({""}, {"configmaps"}, {"get", "list", "watch", "create"}),
                             Rule({""}, {"serviceaccounts/token"}, {"create"}),
                             Rule({""}, {"secrets"}, {"get"}, {"app-secret"})})));
    Create(Binding("team-a", "alice-app", "Role", "app", Subject("User", "alice")));
  }

  // A kubeconfig for this server authenticating with `user` (kubeconfig `user` fields).
  fs::path Kubeconfig(const std::string& name, const Json& user) {
    Json cfg = {
        {"apiVersion", "v1"},
        {"kind", "Config"},
        {"clusters",
         Json::array({{{"name", "klutch"},
                       {"cluster",
                        {{"server", server_->url()},
                         {"certificate-authority-data", core::Base64Encode(creds_.ca_pem)}}}}})},
        {"users", Json::array({{{"name", name}, {"user", user}}})},
        {"contexts",
         Json::array({{{"name", name}, {"context", {{"cluster", "klutch"}, {"user", name}}}}})},
        {"current-context", name}};
    return dir_.Write("kubeconfigs/" + name, cfg.dump());  // JSON is YAML
  }

  fs::path TokenKubeconfig(const std::string& name, const std::string& token) {
    return Kubeconfig(name, Json{{"token", token}});
  }

  // A client certificate issued by the server's CA.
  http::Pem IssueClientCertificate(const std::string& cn, std::vector<std::string> orgs) {
    const fs::path pki = dir_.path() / "data" / "pki";
    http::Pem ca{ReadFileOrEmpty(pki / "ca.crt"), ReadFileOrEmpty(pki / "ca.key")};
    auto cert = http::IssueCertificate(
        ca, {.common_name = cn, .organizations = std::move(orgs), .client = true});
    EXPECT_TRUE(cert.ok()) << cert.status().ToString();
    return cert.ok() ? *cert : http::Pem{};
  }

  KubectlRun Kubectl(const fs::path& kubeconfig, const std::string& args,
                     const std::string& input = "") {
    KubectlRun run;
    run.command = "kubectl " + args;
    std::string script = "'" + kubectl_ + "' " + args;
    if (!input.empty()) script += " <<'KLUTCH_EOF'\n" + input + "\nKLUTCH_EOF";
    std::map<std::string, std::string> env = {
        {"KUBECONFIG", kubeconfig.string()},
        {"HOME", (dir_.path() / "home").string()},
        {"KUBECACHEDIR", (dir_.path() / "kube-cache").string()},
        {"PATH", "/usr/local/bin:/usr/bin:/bin"},
        {"LC_ALL", "C"},
    };
    run.result = RunShell(script, env, dir_.path(), std::chrono::seconds(60));
    return run;
  }

  // `kubectl create token` as admin; "" on failure.
  std::string CreateToken(const std::string& args) {
    KubectlRun run = Kubectl(admin_kc_, "create token " + args);
    EXPECT_TRUE(Succeeds(run));
    auto lines = Lines(run.result.out);
    return lines.size() == 1 ? lines[0] : "";
  }

  // SelfSubjectReview with a bearer token: the status code and the user the server sees ({}
  // when refused).
  std::pair<int, Json> WhoIs(std::string_view token) {
    auto r =
        AsToken(token, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                Json{{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "SelfSubjectReview"}});
    Json body = Json::parse(r.body, nullptr, false);
    const Json* user = machinery::Find(body, {"status", "userInfo"});
    return {r.status, user ? *user : Json::object()};
  }

  std::vector<Json> AuditEvents() {
    std::vector<Json> out;
    std::istringstream in(ReadFileOrEmpty(audit_log_));
    for (std::string l; std::getline(in, l);) {
      if (!l.empty()) out.push_back(Json::parse(l, nullptr, false));
    }
    return out;
  }

  std::string kubectl_ = "/usr/bin/kubectl";
  ServerCredentials creds_;
  std::unique_ptr<http::Client> bare_;  // trusts the server's CA, presents no certificate
  fs::path token_file_, audit_log_;
  fs::path admin_kc_, alice_kc_, bob_kc_, ivan_kc_;
  std::string robot_uid_;
};

const std::vector<std::string> kSelfReviewRows = {
    "selfsubjectreviews.authentication.k8s.io [] [] [create]",
    "selfsubjectaccessreviews.authorization.k8s.io [] [] [create]",
    "selfsubjectrulesreviews.authorization.k8s.io [] [] [create]",
};

// system:discovery and system:public-info-viewer, both bound to system:authenticated: kubectl
// lists each binding's rules, so the shared URLs appear twice (as they do with kube-apiserver).
const std::vector<std::string> kNonResourceRows = {
    "[/api/*] [] [get]",     "[/api] [] [get]",      "[/apis/*] [] [get]",  "[/apis] [] [get]",
    "[/healthz] [] [get]",   "[/healthz] [] [get]",  "[/livez] [] [get]",   "[/livez] [] [get]",
    "[/openapi/*] [] [get]", "[/openapi] [] [get]",  "[/readyz] [] [get]",  "[/readyz] [] [get]",
    "[/version/] [] [get]",  "[/version/] [] [get]", "[/version] [] [get]", "[/version] [] [get]",
};

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// --- kubectl with a namespace Role, per client version -----------------------------------------

struct KubectlClient {
  std::string name;    // test name suffix
  std::string binary;  // kubectl to run
  std::string minor;   // --report-minor-version ("" = the server's default)
};

void PrintTo(const KubectlClient& c, std::ostream* os) { *os << c.name; }

class KubectlAuth : public AuthTest, public ::testing::WithParamInterface<KubectlClient> {
 protected:
  void SetUp() override {
    kubectl_ = GetParam().binary;
    // kubectl is part of the machine: a missing one fails the test, it is not skipped.
    ASSERT_TRUE(fs::exists(kubectl_)) << kubectl_ << " is missing: it is required to run "
                                      << "this test";
    AuthTest::SetUp();
  }
  std::vector<std::string> ExtraArgs() override {
    if (GetParam().minor.empty()) return {};
    return {"--report-minor-version", GetParam().minor};
  }
};

TEST_P(KubectlAuth, NamespaceRoleAllowsExactlyItsRules) {
  CreateTeams();
  const auto& alice = alice_kc_;

  // What the Role grants works.
  EXPECT_TRUE(Succeeds(Kubectl(alice, "create configmap x -n team-a --from-literal=k=v"),
                       "configmap/x created"));
  EXPECT_TRUE(Prints(Kubectl(alice, "get configmap x -n team-a -o jsonpath={.data.k}"), {"v"}));
  EXPECT_TRUE(Succeeds(Kubectl(alice, "get configmaps -n team-a -o name"), "configmap/x"));
  EXPECT_TRUE(
      Prints(Kubectl(alice, "get secret app-secret -n team-a -o name"), {"secret/app-secret"}));
  KubectlRun token = Kubectl(alice, "create token robot -n team-a");  // serviceaccounts/token
  EXPECT_TRUE(Succeeds(token));
  EXPECT_EQ(JwtClaims(core::Trim(token.result.out)).value("sub", ""),
            "system:serviceaccount:team-a:robot")
      << Describe(token);

  // Everything else is a kube-style 403.
  EXPECT_TRUE(FailsWith(Kubectl(alice, "get secrets -n team-a"),
                        {"Error from server (Forbidden): secrets is forbidden: User \"alice\" "
                         "cannot list resource \"secrets\" in API group \"\" in the namespace "
                         "\"team-a\""}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "get secret other -n team-a"),
                        {"Error from server (Forbidden): secrets \"other\" is forbidden: User "
                         "\"alice\" cannot get resource \"secrets\" in API group \"\" in the "
                         "namespace \"team-a\""}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "get namespaces"),
                        {"Error from server (Forbidden): namespaces is forbidden: User \"alice\" "
                         "cannot list resource \"namespaces\" in API group \"\" at the cluster "
                         "scope"}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "delete configmap x -n team-a"),
                        {"Error from server (Forbidden): configmaps \"x\" is forbidden: User "
                         "\"alice\" cannot delete resource \"configmaps\" in API group \"\" in "
                         "the namespace \"team-a\""}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "label configmap x -n team-a tier=web"),
                        {"Error from server (Forbidden): configmaps \"x\" is forbidden: User "
                         "\"alice\" cannot patch resource \"configmaps\" in API group \"\" in "
                         "the namespace \"team-a\""}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "get configmaps -n team-b"),
                        {"Error from server (Forbidden): configmaps is forbidden: User \"alice\" "
                         "cannot list resource \"configmaps\" in API group \"\" in the namespace "
                         "\"team-b\""}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "create serviceaccount helper -n team-a"),
                        {"error: failed to create serviceaccount: serviceaccounts is forbidden: "
                         "User \"alice\" cannot create resource \"serviceaccounts\" in API group "
                         "\"\" in the namespace \"team-a\""}));
  EXPECT_TRUE(FailsWith(Kubectl(alice, "get roles -n team-a"),
                        {"Error from server (Forbidden): roles.rbac.authorization.k8s.io is "
                         "forbidden: User \"alice\" cannot list resource \"roles\" in API group "
                         "\"rbac.authorization.k8s.io\" in the namespace \"team-a\""}));
  // The configmap is still there, unlabelled.
  EXPECT_TRUE(
      Prints(Kubectl(admin_kc_, "get configmap x -n team-a -o jsonpath={.metadata.labels}"), {}));

  // auth can-i agrees with the Role: verbs, subresources, resourceNames, other namespaces.
  const std::vector<std::pair<std::string, bool>> questions = {
      {"create configmaps -n team-a", true},
      {"watch configmaps -n team-a", true},
      {"delete configmaps -n team-a", false},
      {"update configmaps/x -n team-a", false},
      {"create serviceaccounts --subresource=token -n team-a", true},
      {"create serviceaccounts -n team-a", false},
      {"get serviceaccounts/robot -n team-a", false},
      {"get secrets/app-secret -n team-a", true},
      {"get secrets/other -n team-a", false},
      {"list secrets -n team-a", false},
      {"get configmaps -n team-b", false},
      {"list namespaces", false},
      {"create selfsubjectaccessreviews.authorization.k8s.io", true},
      {"get /healthz", true},
      {"get /metrics", false},
  };
  for (const auto& [q, yes] : questions) {
    EXPECT_TRUE(Answers(Kubectl(alice, "auth can-i " + q), yes));
  }

  // can-i --list: the Role's rules plus what every authenticated user has.
  std::vector<std::string> team_a = {"Resources Non-Resource URLs Resource Names Verbs",
                                     "configmaps [] [] [get list watch create]",
                                     "serviceaccounts/token [] [] [create]",
                                     "secrets [] [app-secret] [get]"};
  team_a.insert(team_a.end(), kSelfReviewRows.begin(), kSelfReviewRows.end());
  team_a.insert(team_a.end(), kNonResourceRows.begin(), kNonResourceRows.end());
  KubectlRun list = Kubectl(alice, "auth can-i --list -n team-a");
  EXPECT_EQ(list.result.exit_code, 0) << Describe(list);
  EXPECT_EQ(Sorted(Lines(list.result.out)), Sorted(team_a)) << Describe(list);
  const auto rows = Lines(list.result.out);
  EXPECT_TRUE(!rows.empty() && rows.front() == team_a[0]) << Describe(list);
  std::vector<std::string> team_b = {"Resources Non-Resource URLs Resource Names Verbs"};
  team_b.insert(team_b.end(), kSelfReviewRows.begin(), kSelfReviewRows.end());
  team_b.insert(team_b.end(), kNonResourceRows.begin(), kNonResourceRows.end());
  list = Kubectl(alice, "auth can-i --list -n team-b");
  EXPECT_EQ(Sorted(Lines(list.result.out)), Sorted(team_b)) << Describe(list);

  // A user with a client certificate issued by the server's CA: CN is the name, O the groups.
  http::Pem carol = IssueClientCertificate("carol", {"devs"});
  const fs::path carol_kc =
      Kubeconfig("carol", Json{{"client-certificate-data", core::Base64Encode(carol.certificate)},
                               {"client-key-data", core::Base64Encode(carol.private_key)}});
  EXPECT_TRUE(FailsWith(Kubectl(carol_kc, "get configmaps -n team-a"),
                        {"Error from server (Forbidden): configmaps is forbidden: User \"carol\" "
                         "cannot list resource \"configmaps\" in API group \"\" in the "
                         "namespace \"team-a\""}));

  // whoami: kubectl 1.27 asks for authentication.k8s.io/v1beta1 (or v1alpha1)
  // SelfSubjectReviews, which are not served; later clients use v1.
  if (GetParam().name != "kubectl_1_27") {
    EXPECT_TRUE(
        Prints(Kubectl(alice, "auth whoami"), {"ATTRIBUTE VALUE", "Username alice", "UID alice-uid",
                                               "Groups [devs qa system:authenticated]"}));
    EXPECT_TRUE(Prints(Kubectl(carol_kc, "auth whoami"), {"ATTRIBUTE VALUE", "Username carol",
                                                          "Groups [devs system:authenticated]"}));
  }
}

std::vector<KubectlClient> Clients() {
  return {{"kubectl_default", "/usr/bin/kubectl", ""},
          {"kubectl_1_27", "/usr/lib/google-cloud-sdk/bin/kubectl.1.27", "27"},
          {"kubectl_1_33", "/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "33"}};
}

INSTANTIATE_TEST_SUITE_P(Clients, KubectlAuth, ::testing::ValuesIn(Clients()),
                         [](const ::testing::TestParamInfo<KubectlClient>& info) {
                           return info.param.name;
                         });

// --- raw 403s ---------------------------------------------------------------------------------

TEST_F(AuthTest, ForbiddenAnswersAreKubeStatuses) {
  CreateTeams();
  Create({{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", Meta("team-a", "x")},
          {"data", {{"k", "v"}}}});

  auto forbidden = [](std::string message, Json details) {
    return Json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                {"status", "Failure"}, {"message", message}, {"reason", "Forbidden"},
                {"details", details},  {"code", 403}};
  };
  auto r = AsToken("alice-token", "DELETE", "/api/v1/namespaces/team-a/configmaps/x");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Json::parse(r.body, nullptr, false),
            forbidden("configmaps \"x\" is forbidden: User \"alice\" cannot delete resource "
                      "\"configmaps\" in API group \"\" in the namespace \"team-a\"",
                      {{"name", "x"}, {"kind", "configmaps"}}))
      << r.body;
  r = AsToken("alice-token", "GET", "/api/v1/namespaces/team-a/secrets");
  EXPECT_EQ(Json::parse(r.body, nullptr, false),
            forbidden("secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in "
                      "API group \"\" in the namespace \"team-a\"",
                      {{"kind", "secrets"}}))
      << r.body;
  r = AsToken("alice-token", "GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin");
  EXPECT_EQ(
      Json::parse(r.body, nullptr, false),
      forbidden(
          "clusterroles.rbac.authorization.k8s.io \"admin\" is forbidden: User "
          "\"alice\" cannot get resource \"clusterroles\" in API group "
          "\"rbac.authorization.k8s.io\" at the cluster scope",
          {{"name", "admin"}, {"group", "rbac.authorization.k8s.io"}, {"kind", "clusterroles"}}))
      << r.body;
  r = AsToken("alice-token", "PUT", "/api/v1/namespaces/team-a/configmaps/x/status",
              Json::object());
  EXPECT_EQ(Json::parse(r.body, nullptr, false)["message"],
            "configmaps \"x\" is forbidden: User \"alice\" cannot update resource "
            "\"configmaps/status\" in API group \"\" in the namespace \"team-a\"")
      << r.body;
  // Non-resource paths name the path; details stay empty.
  r = AsToken("alice-token", "GET", "/metrics");
  EXPECT_EQ(Json::parse(r.body, nullptr, false),
            forbidden("forbidden: User \"alice\" cannot get path \"/metrics\"", Json::object()))
      << r.body;

  // Watching is its own verb: allowed for configmaps (events arrive), refused for secrets.
  http::Headers h;
  h.Set("Authorization", "Bearer alice-token");
  std::string events;
  auto watch = bare_->Stream("GET",
                             "/api/v1/namespaces/team-a/configmaps?watch=1&fieldSelector="
                             "metadata.name%3Dx",
                             h, [&](std::string_view data) {
                               events += data;
                               return events.find('\n') == std::string::npos;
                             });
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_EQ(watch->status, 200);
  Json first = Json::parse(events.substr(0, events.find('\n')), nullptr, false);
  EXPECT_EQ(first.value("type", ""), "ADDED") << events;
  EXPECT_EQ(GetString(first, {"object", "metadata", "name"}), "x") << events;
  watch = bare_->Stream("GET", "/api/v1/namespaces/team-a/secrets?watch=1", h,
                        [](std::string_view) { return false; });
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  EXPECT_EQ(watch->status, 403);
  EXPECT_EQ(Json::parse(watch->body, nullptr, false).value("message", ""),
            "secrets is forbidden: User \"alice\" cannot watch resource \"secrets\" in API group "
            "\"\" in the namespace \"team-a\"")
      << watch->body;
}

// --- service-account tokens --------------------------------------------------------------------

TEST_F(AuthTest, RequestedTokensEndWithTheirLifetimeOrBoundSecret) {
  CreateTeams();
  Create(Role("team-a", "robot", Json::array({Rule({""}, {"configmaps"}, {"list"})})));
  Create(Binding("team-a", "robot", "Role", "robot", Subject("ServiceAccount", "robot", "team-a")));

  // A token works with kubectl and says who it is.
  const std::string hour = CreateToken("robot -n team-a --duration=1h");
  ASSERT_FALSE(hour.empty());
  Json claims = JwtClaims(hour);
  EXPECT_EQ(claims.value("exp", int64_t{0}) - claims.value("iat", int64_t{0}), 3600)
      << claims.dump();
  EXPECT_EQ(claims["aud"], Json::array({kIssuer})) << claims.dump();
  const fs::path robot_kc = TokenKubeconfig("robot", hour);
  EXPECT_TRUE(Prints(
      Kubectl(robot_kc, "auth whoami"),
      {"ATTRIBUTE VALUE", "Username system:serviceaccount:team-a:robot", "UID " + robot_uid_,
       "Groups [system:serviceaccounts system:serviceaccounts:team-a system:authenticated]",
       "Extra: authentication.kubernetes.io/credential-id [JTI=" + claims.value("jti", "") + "]"}));
  EXPECT_TRUE(Succeeds(Kubectl(robot_kc, "get configmaps -n team-a")));
  EXPECT_TRUE(FailsWith(Kubectl(robot_kc, "get secrets -n team-a"),
                        {"Error from server (Forbidden): secrets is forbidden: User "
                         "\"system:serviceaccount:team-a:robot\" cannot list resource \"secrets\" "
                         "in API group \"\" in the namespace \"team-a\""}));

  // Below the minimum lifetime: 422 naming spec.expirationSeconds, as kube words it (the
  // TokenRequest itself has no name).
  EXPECT_TRUE(FailsWith(
      Kubectl(admin_kc_, "create token robot -n team-a --duration=1s"),
      {"error: failed to create token: TokenRequest.authentication.k8s.io \"\" is invalid: "
       "spec.expirationSeconds: Invalid value: 1: may not specify a duration less than 2 "
       "seconds"}));
  auto r = AsAdmin("POST", "/api/v1/namespaces/team-a/serviceaccounts/robot/token",
                   Json{{"apiVersion", "authentication.k8s.io/v1"},
                        {"kind", "TokenRequest"},
                        {"spec", {{"expirationSeconds", 1}}}});
  EXPECT_EQ(r.status, 422) << r.body;
  Json invalid = Json::parse(r.body, nullptr, false);
  EXPECT_EQ(invalid.value("reason", ""), "Invalid") << r.body;
  EXPECT_EQ(invalid["details"],
            (Json{{"group", "authentication.k8s.io"},
                  {"kind", "TokenRequest"},
                  {"causes", Json::array({{{"reason", "FieldValueInvalid"},
                                           {"message",
                                            "Invalid value: 1: may not specify a "
                                            "duration less than 2 seconds"},
                                           {"field", "spec.expirationSeconds"}}})}}))
      << r.body;

  // A 3 s token works at once and is refused from its expiry on.
  const std::string brief = CreateToken("robot -n team-a --duration=3s");
  ASSERT_FALSE(brief.empty());
  const int64_t exp = JwtClaims(brief).value("exp", int64_t{0});
  EXPECT_EQ(exp - JwtClaims(brief).value("iat", int64_t{0}), 3);
  EXPECT_EQ(WhoIs(brief).first, 201);
  EXPECT_TRUE(Eventually([&] { return WhoIs(brief).first == 401; }, std::chrono::seconds(30)));
  const int64_t refused_at = std::chrono::duration_cast<std::chrono::seconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  EXPECT_GE(refused_at, exp) << "refused before its expiry";
  EXPECT_TRUE(FailsWith(Kubectl(TokenKubeconfig("brief", brief), "get configmaps -n team-a"),
                        {kUnauthorizedLine}));

  // A token bound to a Secret ends when the Secret is deleted.
  EXPECT_TRUE(FailsWith(Kubectl(admin_kc_,
                                "create token robot -n team-a --bound-object-kind "
                                "Secret --bound-object-name missing"),
                        {"error: failed to create token: secrets \"missing\" not found"}));
  Create(Secret("team-a", "bound"));
  const std::string bound =
      CreateToken("robot -n team-a --bound-object-kind Secret --bound-object-name bound");
  ASSERT_FALSE(bound.empty());
  EXPECT_EQ(JwtClaims(bound)["kubernetes.io"]["secret"].value("name", ""), "bound");
  const fs::path bound_kc = TokenKubeconfig("bound", bound);
  EXPECT_TRUE(Succeeds(Kubectl(bound_kc, "get configmaps -n team-a")));
  EXPECT_TRUE(
      Succeeds(Kubectl(admin_kc_, "delete secret bound -n team-a"), "secret \"bound\" deleted"));
  EXPECT_TRUE(FailsWith(Kubectl(bound_kc, "get configmaps -n team-a"), {kUnauthorizedLine}));
  // The unbound token is unaffected.
  EXPECT_EQ(WhoIs(hour).first, 201);
}

TEST_F(AuthTest, DeletingAServiceAccountEndsItsTokensAndLegacySecrets) {
  CreateTeams();
  Create(Role("team-a", "robot", Json::array({Rule({""}, {"configmaps"}, {"list"})})));
  Create(Binding("team-a", "robot", "Role", "robot", Subject("ServiceAccount", "robot", "team-a")));
  const std::string requested = CreateToken("robot -n team-a");
  ASSERT_FALSE(requested.empty());

  // A legacy token Secret is filled in by the tokens controller.
  EXPECT_TRUE(Succeeds(Kubectl(admin_kc_, "apply -f -", R"(apiVersion: v1
kind: Secret
metadata:
  name: robot-legacy
  namespace: team-a
  annotations:
    kubernetes.io/service-account.name: robot
type: kubernetes.io/service-account-token)"),
                       "secret/robot-legacy created"));
  const std::string secret_path = "/api/v1/namespaces/team-a/secrets/robot-legacy";
  Json secret;
  ASSERT_TRUE(Eventually([&] {
    auto r = AsAdmin("GET", secret_path);
    secret = Json::parse(r.body, nullptr, false);
    return r.status == 200 && machinery::Find(secret, {"data", "token"});
  })) << secret.dump();
  EXPECT_EQ(core::Base64Decode(GetString(secret, {"data", "namespace"})), "team-a");
  EXPECT_EQ(core::Base64Decode(GetString(secret, {"data", "ca.crt"})), creds_.ca_pem);
  EXPECT_EQ(GetString(secret, {"metadata", "annotations", "kubernetes.io/service-account.uid"}),
            robot_uid_);
  const std::string legacy = core::Base64Decode(GetString(secret, {"data", "token"})).value_or("");
  EXPECT_EQ(JwtClaims(legacy).value("iss", ""), "kubernetes/serviceaccount");
  const fs::path legacy_kc = TokenKubeconfig("legacy", legacy);
  const fs::path requested_kc = TokenKubeconfig("requested", requested);
  KubectlRun who = Kubectl(legacy_kc, "auth whoami");
  EXPECT_TRUE(Succeeds(who, "Username system:serviceaccount:team-a:robot"));
  EXPECT_TRUE(Succeeds(who, "UID " + robot_uid_));
  EXPECT_TRUE(Succeeds(
      who, "Groups [system:serviceaccounts system:serviceaccounts:team-a system:authenticated]"));
  EXPECT_TRUE(Succeeds(Kubectl(legacy_kc, "get configmaps -n team-a")));
  EXPECT_TRUE(Succeeds(Kubectl(requested_kc, "get configmaps -n team-a")));

  // Deleting the account: both tokens are refused as soon as the delete returns, and the
  // legacy Secret goes.
  EXPECT_TRUE(Succeeds(Kubectl(admin_kc_, "delete serviceaccount robot -n team-a"),
                       "serviceaccount \"robot\" deleted"));
  EXPECT_TRUE(FailsWith(Kubectl(requested_kc, "get configmaps -n team-a"), {kUnauthorizedLine}));
  EXPECT_TRUE(FailsWith(Kubectl(legacy_kc, "get configmaps -n team-a"), {kUnauthorizedLine}));
  EXPECT_TRUE(Eventually([&] { return AsAdmin("GET", secret_path).status == 404; }));

  // An account re-created under the same name is another account (new uid): old tokens stay
  // refused.
  Create(ServiceAccount("team-a", "robot"));
  EXPECT_EQ(WhoIs(requested).first, 401);
  EXPECT_EQ(WhoIs(legacy).first, 401);
}

// --- impersonation ----------------------------------------------------------------------------

TEST_F(AuthTest, OnlyImpersonateGrantsAllowImpersonation) {
  CreateTeams();
  // Admins (system:masters) may impersonate anyone.
  EXPECT_TRUE(Prints(Kubectl(admin_kc_, "--as=alice auth whoami"),
                     {"ATTRIBUTE VALUE", "Username alice", "Groups [system:authenticated]"}));
  EXPECT_TRUE(Prints(Kubectl(admin_kc_, "--as=alice --as-group=devs auth whoami"),
                     {"ATTRIBUTE VALUE", "Username alice", "Groups [devs system:authenticated]"}));
  EXPECT_TRUE(
      Prints(Kubectl(admin_kc_, "--as=alice --as-uid=u-1 auth whoami"),
             {"ATTRIBUTE VALUE", "Username alice", "UID u-1", "Groups [system:authenticated]"}));
  EXPECT_TRUE(Prints(
      Kubectl(admin_kc_, "--as=system:serviceaccount:team-a:robot auth whoami"),
      {"ATTRIBUTE VALUE", "Username system:serviceaccount:team-a:robot",
       "Groups [system:serviceaccounts system:serviceaccounts:team-a system:authenticated]"}));
  // ... and then have that user's rights, no more.
  EXPECT_TRUE(Succeeds(Kubectl(admin_kc_, "--as=alice get configmaps -n team-a")));
  EXPECT_TRUE(FailsWith(Kubectl(admin_kc_, "--as=alice get secrets -n team-a"),
                        {"Error from server (Forbidden): secrets is forbidden: User \"alice\" "
                         "cannot list resource \"secrets\" in API group \"\" in the namespace "
                         "\"team-a\""}));
  EXPECT_TRUE(
      Answers(Kubectl(admin_kc_, "--as=alice auth can-i create configmaps -n team-a"), true));
  EXPECT_TRUE(Answers(Kubectl(admin_kc_, "--as=alice auth can-i list secrets -n team-a"), false));

  // Others may not.
  EXPECT_TRUE(FailsWith(Kubectl(alice_kc_, "--as=bob get configmaps -n team-a"),
                        {"Error from server (Forbidden): users \"bob\" is forbidden: User "
                         "\"alice\" cannot impersonate resource \"users\" in API group \"\" at "
                         "the cluster scope"}));
  EXPECT_TRUE(FailsWith(Kubectl(alice_kc_,
                                "--as=system:serviceaccount:team-a:robot get "
                                "configmaps -n team-a"),
                        {"Error from server (Forbidden): serviceaccounts \"robot\" is forbidden: "
                         "User \"alice\" cannot impersonate resource \"serviceaccounts\" in API "
                         "group \"\" in the namespace \"team-a\""}));

  // A ClusterRole with impersonate on users/bob: bob, and only bob, and none of bob's groups.
  Create(
      Role("", "impersonate-bob", Json::array({Rule({""}, {"users"}, {"impersonate"}, {"bob"})})));
  Create(Binding("", "ivan-impersonates-bob", "ClusterRole", "impersonate-bob",
                 Subject("User", "ivan")));
  EXPECT_TRUE(Prints(Kubectl(ivan_kc_, "--as=bob auth whoami"),
                     {"ATTRIBUTE VALUE", "Username bob", "Groups [system:authenticated]"}));
  EXPECT_TRUE(FailsWith(Kubectl(ivan_kc_, "--as=bob get configmaps -n team-a"),
                        {"Error from server (Forbidden): configmaps is forbidden: User \"bob\" "
                         "cannot list resource \"configmaps\" in API group \"\" in the namespace "
                         "\"team-a\""}));
  EXPECT_TRUE(FailsWith(Kubectl(ivan_kc_, "--as=carol get configmaps -n team-a"),
                        {"Error from server (Forbidden): users \"carol\" is forbidden: User "
                         "\"ivan\" cannot impersonate resource \"users\" in API group \"\" at "
                         "the cluster scope"}));
  EXPECT_TRUE(FailsWith(Kubectl(ivan_kc_, "--as=bob --as-group=admins get configmaps -n team-a"),
                        {"Error from server (Forbidden): groups \"admins\" is forbidden: User "
                         "\"ivan\" cannot impersonate resource \"groups\" in API group \"\" at "
                         "the cluster scope"}));
  // Raw: groups without a user is a 400.
  auto r = Send(*http_, "GET", "/api/v1/namespaces/team-a/configmaps", {}, nullptr,
                {{"Impersonate-Group", "devs"}});
  EXPECT_EQ(r.status, 400) << r.body;
}

// --- RBAC escalation --------------------------------------------------------------------------

TEST_F(AuthTest, RbacWritesCannotGrantMoreThanTheWriterHolds) {
  CreateTeams();
  // alice may write Roles and RoleBindings in team-a (where she holds the app Role), is admin
  // of team-b, and may bind ClusterRole edit in team-a.
  Create(Role(
      "team-a", "rbac-editor",
      Json::array({Rule({"rbac.authorization.k8s.io"}, {"roles", "rolebindings"},
                        {"create", "get", "list", "patch", "delete"}),
                   Rule({"rbac.authorization.k8s.io"}, {"clusterroles"}, {"bind"}, {"edit"})})));
  Create(Binding("team-a", "alice-rbac", "Role", "rbac-editor", Subject("User", "alice")));
  Create(Binding("team-b", "alice-admin", "ClusterRole", "admin", Subject("User", "alice")));
  const std::string not_held = fmt::format(
      "is forbidden: user \"alice\" (groups={}) is attempting to grant RBAC permissions not "
      "currently held:",
      kAliceGroups);

  // team-a: secrets beyond the one named Secret she may read are refused...
  EXPECT_TRUE(
      FailsWith(Kubectl(alice_kc_, "create -f -", R"(apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: secret-reader, namespace: team-a}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get, list]})"),
                {"Error from server (Forbidden): error when creating \"STDIN\": "
                 "roles.rbac.authorization.k8s.io \"secret-reader\" " +
                     not_held,
                 R"({APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]})"}));
  // ... what she holds is fine.
  EXPECT_TRUE(Succeeds(Kubectl(alice_kc_, "create -f -", R"(apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: secret-reader, namespace: team-a}
rules:
- {apiGroups: [""], resources: [secrets], verbs: [get], resourceNames: [app-secret]}
- {apiGroups: [""], resources: [configmaps], verbs: [get, list]})"),
                       "role.rbac.authorization.k8s.io/secret-reader created"));
  // Growing a Role by update is checked too.
  EXPECT_TRUE(FailsWith(
      Kubectl(alice_kc_,
              "patch role secret-reader -n team-a --type=json -p "
              "'[{\"op\":\"add\",\"path\":\"/rules/-\",\"value\":{\"apiGroups\":[\"\"],"
              "\"resources\":[\"secrets\"],\"verbs\":[\"list\"]}}]'"),
      {"Error from server (Forbidden): roles.rbac.authorization.k8s.io \"secret-reader\" " +
           not_held,
       R"({APIGroups:[""], Resources:["secrets"], Verbs:["list"]})"}));
  // Binding: cluster-admin is refused, edit is allowed by the bind grant although she does
  // not hold edit's rules.
  EXPECT_TRUE(FailsWith(
      Kubectl(alice_kc_,
              "create rolebinding root -n team-a --clusterrole=cluster-admin "
              "--user=alice"),
      {"error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io \"root\" " +
           not_held,
       R"({APIGroups:["*"], Resources:["*"], Verbs:["*"]})",
       R"({NonResourceURLs:["*"], Verbs:["*"]})"}));
  EXPECT_TRUE(Succeeds(
      Kubectl(alice_kc_, "create rolebinding bob-edit -n team-a --clusterrole=edit --user=bob"),
      "rolebinding.rbac.authorization.k8s.io/bob-edit created"));
  EXPECT_TRUE(Succeeds(Kubectl(bob_kc_, "get secrets -n team-a -o name"), "secret/other"));

  // team-b, where alice is admin: she holds secrets there, but not cluster-admin nor nodes.
  EXPECT_TRUE(Succeeds(Kubectl(alice_kc_,
                               "create role secret-reader -n team-b --verb=get "
                               "--verb=list --resource=secrets"),
                       "role.rbac.authorization.k8s.io/secret-reader created"));
  EXPECT_TRUE(
      FailsWith(Kubectl(alice_kc_, "create -f -", R"(apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: node-reader, namespace: team-b}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]})"),
                {"Error from server (Forbidden): error when creating \"STDIN\": "
                 "roles.rbac.authorization.k8s.io \"node-reader\" " +
                     not_held,
                 R"({APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]})"}));
  EXPECT_TRUE(FailsWith(
      Kubectl(alice_kc_,
              "create rolebinding root -n team-b --clusterrole=cluster-admin "
              "--user=alice"),
      {"error: failed to create rolebinding: rolebindings.rbac.authorization.k8s.io \"root\" " +
       not_held}));
  // Binding view (covered by admin) takes effect for bob at once.
  EXPECT_TRUE(FailsWith(Kubectl(bob_kc_, "get configmaps -n team-b"),
                        {"Error from server (Forbidden): configmaps is forbidden: User \"bob\" "
                         "cannot list resource \"configmaps\" in API group \"\" in the namespace "
                         "\"team-b\""}));
  EXPECT_TRUE(Succeeds(
      Kubectl(alice_kc_, "create rolebinding viewers -n team-b --clusterrole=view --user=bob"),
      "rolebinding.rbac.authorization.k8s.io/viewers created"));
  EXPECT_TRUE(Succeeds(Kubectl(bob_kc_, "get configmaps -n team-b")));
  EXPECT_TRUE(FailsWith(Kubectl(bob_kc_, "get secrets -n team-b"),
                        {"Error from server (Forbidden): secrets is forbidden: User \"bob\" "
                         "cannot list resource \"secrets\" in API group \"\" in the namespace "
                         "\"team-b\""}));
  // Nothing refused was stored.
  for (const auto& path :
       {"/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/roles/node-reader",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/root",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings/root"}) {
    EXPECT_EQ(AsAdmin("GET", path).status, 404) << path;
  }
}

// --- bad credentials ---------------------------------------------------------------------------

const Json kUnauthorizedStatus = {
    {"kind", "Status"},    {"apiVersion", "v1"},        {"metadata", Json::object()},
    {"status", "Failure"}, {"message", "Unauthorized"}, {"reason", "Unauthorized"},
    {"code", 401}};

TEST_F(AuthTest, MissingOrBadCredentialsAreUnauthorized) {
  const std::string path = "/api/v1/namespaces/default/configmaps";
  auto r = Send(*bare_, "GET", path);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(Json::parse(r.body, nullptr, false), kUnauthorizedStatus) << r.body;
  // Discovery needs credentials too; health and version do not.
  EXPECT_EQ(Send(*bare_, "GET", "/api").status, 401);
  for (const char* open : {"/healthz", "/livez", "/readyz", "/version"}) {
    EXPECT_EQ(Send(*bare_, "GET", open).status, 200) << open;
  }

  // The harness can succeed: the static token is accepted, with any case of "Bearer".
  EXPECT_EQ(Send(*bare_, "GET", path, "Bearer alice-token").status, 403);
  EXPECT_EQ(Send(*bare_, "GET", path, "bearer alice-token").status, 403);

  std::mt19937 rng(42);
  auto random_part = [&](size_t n) {
    std::string bytes(n, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng() & 0xff);
    return core::Base64UrlEncode(bytes);
  };
  const std::string header = B64(Json{{"alg", "RS256"}, {"typ", "JWT"}});
  const std::string payload = B64(Json{{"sub", "system:serviceaccount:default:default"}});
  const std::vector<std::string> bad = {
      "Basic YWxpY2U6YWxpY2UtdG9rZW4=",  // alice:alice-token
      "Bearer",
      "Bearer ",
      "Bearer a b",
      "Bearer alice-Token",
      "Token alice-token",
      "alice-token",
      "garbage!@#$%",
      "Bearer " + random_part(20) + "." + random_part(40) + "." + random_part(256),
      "Bearer " + header + "." + payload,
      "Bearer " + header + "." + payload + ".",
      "Bearer " + core::Base64UrlEncode("not json") + "." + payload + "." + random_part(256),
      "Bearer " + header + "." + core::Base64UrlEncode("[1,2]") + "." + random_part(256),
      "Bearer " + header + "=." + payload + "." + random_part(256),
      "Bearer " + std::string(20 * 1024, 'a'),
      "Bearer " + header + "." + random_part(15 * 1024) + "." + random_part(256),
  };
  for (const auto& h : bad) {
    r = Send(*bare_, "GET", path, h);
    EXPECT_EQ(r.status, 401) << h.substr(0, 80);
    EXPECT_EQ(Json::parse(r.body, nullptr, false), kUnauthorizedStatus) << r.body;
  }
  // Bad credentials are refused even on the open paths.
  EXPECT_EQ(Send(*bare_, "GET", "/healthz", "Bearer nope").status, 401);
}

TEST_F(AuthTest, ForgedServiceAccountTokensAreUnauthorized) {
  CreateTeams();
  const std::string real = CreateToken("robot -n team-a");
  ASSERT_FALSE(real.empty());
  ASSERT_EQ(WhoIs(real).first, 201);
  const auto parts = JwtParts(real);
  ASSERT_EQ(parts.size(), 3u);
  const Json header = Json::parse(*core::Base64UrlDecode(parts[0]));
  const Json claims = JwtClaims(real);
  const std::string kid = header.value("kid", "");
  ASSERT_FALSE(kid.empty()) << header.dump();

  // The server's public key, as an attacker could fetch it (JWKS) or derive it.
  auto sa_key = auth::SigningKey::FromPem(ReadFileOrEmpty(dir_.path() / "data/pki/sa.key"));
  ASSERT_TRUE(sa_key.ok()) << sa_key.status().ToString();
  const std::string der = sa_key->public_key().DerSpki();
  const std::string pem = PemBlock("PUBLIC KEY", der);
  CommandResult openssl = RunShell("openssl pkey -in data/pki/sa.key -pubout", {}, dir_.path(),
                                   std::chrono::seconds(30));
  ASSERT_EQ(openssl.exit_code, 0) << openssl.err;
  EXPECT_EQ(openssl.out, pem);

  std::vector<std::pair<std::string, std::string>> forged;
  // alg none, with and without the original signature.
  for (const char* alg : {"none", "None", "NONE"}) {
    const std::string h = B64(Json{{"alg", alg}, {"typ", "JWT"}, {"kid", kid}});
    forged.emplace_back(std::string("alg ") + alg, h + "." + parts[1] + ".");
    forged.emplace_back(std::string("alg ") + alg + " + signature",
                        h + "." + parts[1] + "." + parts[2]);
  }
  // HS256 keyed with the public key (PEM with and without the final newline, DER).
  for (const auto& [what, secret] : std::vector<std::pair<std::string, std::string>>{
           {"pem", pem}, {"pem-trimmed", pem.substr(0, pem.size() - 1)}, {"der", der}}) {
    const std::string h = B64(Json{{"alg", "HS256"}, {"typ", "JWT"}, {"kid", kid}});
    const std::string input = h + "." + parts[1];
    forged.emplace_back("HS256 " + what,
                        input + "." + core::Base64UrlEncode(HmacSha256(secret, input)));
  }
  // Another RSA key signing the same claims under the same kid.
  auto other = auth::SigningKey::Generate();
  ASSERT_TRUE(other.ok());
  auto other_token = other->Sign(claims);
  ASSERT_TRUE(other_token.ok());
  auto other_parts = JwtParts(*other_token);
  forged.emplace_back("other key", B64(Json{{"alg", "RS256"}, {"kid", kid}}) + "." +
                                       other_parts[1] + "." + other_parts[2]);
  // The real signature over changed claims (another account).
  Json changed = claims;
  changed["sub"] = "system:serviceaccount:kube-system:default";
  changed["kubernetes.io"]["namespace"] = "kube-system";
  changed["kubernetes.io"]["serviceaccount"]["name"] = "default";
  forged.emplace_back("changed claims", parts[0] + "." + B64(changed) + "." + parts[2]);
  // The real token with its signature cut or extended.
  forged.emplace_back("cut signature",
                      parts[0] + "." + parts[1] + "." + parts[2].substr(0, parts[2].size() - 4));
  forged.emplace_back("padded", real + "=");

  for (const auto& [what, token] : forged) {
    auto [code, user] = WhoIs(token);
    EXPECT_EQ(code, 401) << what << ": " << user.dump();
  }
  // None of that disturbed the real token.
  EXPECT_EQ(WhoIs(real).second.value("username", ""), "system:serviceaccount:team-a:robot");
}

TEST_F(AuthTest, ClientCertificatesOfAnotherCaAreUnauthorized) {
  // A certificate from the server's CA authenticates (CN, O).
  http::Pem ours = IssueClientCertificate("carol", {"devs"});
  ServerCredentials c = creds_;
  c.cert_pem = ours.certificate;
  c.key_pem = ours.private_key;
  auto carol = NewClient(c);
  auto r = Send(*carol, "GET", "/api/v1/namespaces/default/configmaps");
  EXPECT_EQ(Json::parse(r.body, nullptr, false).value("message", ""),
            "configmaps is forbidden: User \"carol\" cannot list resource \"configmaps\" in API "
            "group \"\" in the namespace \"default\"")
      << r.body;

  // Same subject (even system:masters) from an unknown CA: the connection is accepted, as
  // kube-apiserver accepts it, and the request is Unauthorized - also for health checks.
  auto evil_ca = http::GenerateCertificateAuthority("evil-ca", std::chrono::hours(24));
  ASSERT_TRUE(evil_ca.ok());
  auto evil = http::IssueCertificate(
      *evil_ca,
      {.common_name = "kubernetes-admin", .organizations = {"system:masters"}, .client = true});
  ASSERT_TRUE(evil.ok());
  c.cert_pem = evil->certificate;
  c.key_pem = evil->private_key;
  auto mallory = NewClient(c);
  for (const char* path : {"/api/v1/namespaces", "/healthz"}) {
    auto refused = Send(*mallory, "GET", path);
    EXPECT_EQ(refused.status, 401) << path << ": " << refused.body;
    EXPECT_EQ(Json::parse(refused.body, nullptr, false), kUnauthorizedStatus) << refused.body;
  }
  // A valid bearer token on the same connection still authenticates, as in kube's union.
  auto with_token =
      Send(*mallory, "GET", "/api/v1/namespaces/team-a/configmaps", "Bearer alice-token");
  EXPECT_NE(with_token.status, 401) << with_token.body;
  // The server is unharmed.
  EXPECT_EQ(AsAdmin("GET", "/api/v1/namespaces").status, 200);
}

// --- anonymous access --------------------------------------------------------------------------

class AnonymousAuthTest : public AuthTest {
 protected:
  std::vector<std::string> ExtraArgs() override { return {"--anonymous-auth"}; }
};

// Raw requests only: kubectl prompts for a user name when its kubeconfig user has no
// credentials at all.
TEST_F(AnonymousAuthTest, RequestsWithoutCredentialsRunAsSystemAnonymous) {
  auto forbidden = [](std::string message, Json details) {
    return Json{{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", Json::object()},
                {"status", "Failure"}, {"message", message}, {"reason", "Forbidden"},
                {"details", details},  {"code", 403}};
  };
  const Json namespaces = forbidden(
      "namespaces is forbidden: User \"system:anonymous\" cannot list resource \"namespaces\" in "
      "API group \"\" at the cluster scope",
      {{"kind", "namespaces"}});
  auto r = Send(*bare_, "GET", "/api/v1/namespaces");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Json::parse(r.body, nullptr, false), namespaces) << r.body;
  // system:unauthenticated has the public info, not discovery (bound to system:authenticated).
  EXPECT_EQ(Send(*bare_, "GET", "/healthz").status, 200);
  EXPECT_EQ(Send(*bare_, "GET", "/version").status, 200);
  r = Send(*bare_, "GET", "/api");
  EXPECT_EQ(
      Json::parse(r.body, nullptr, false),
      forbidden("forbidden: User \"system:anonymous\" cannot get path \"/api\"", Json::object()))
      << r.body;
  // A bad bearer token is still refused, not downgraded to anonymous; a good one still counts.
  EXPECT_EQ(Send(*bare_, "GET", "/api/v1/namespaces", "Bearer nope").status, 401);
  r = Send(*bare_, "GET", "/api/v1/namespaces", "Bearer alice-token");
  EXPECT_NE(r.body.find("User \\\"alice\\\""), std::string::npos) << r.body;
  // An Authorization header that is not a bearer token is no credential to kube-apiserver (its
  // bearer authenticator passes), so the request is anonymous.
  r = Send(*bare_, "GET", "/api/v1/namespaces", "Basic YWxpY2U6YWxpY2UtdG9rZW4=");
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Json::parse(r.body, nullptr, false), namespaces) << r.body;
}

// --- audit ------------------------------------------------------------------------------------

TEST_F(AuthTest, AuditEventsRecordUserDecisionAndImpersonation) {
  CreateTeams();
  ASSERT_EQ(AsToken("alice-token", "GET", "/api/v1/namespaces/team-a/secrets?audit=1").status, 403);
  ASSERT_EQ(AsToken("alice-token", "GET", "/api/v1/namespaces/team-a/configmaps?audit=2").status,
            200);
  ASSERT_EQ(Send(*http_, "GET", "/api/v1/namespaces/team-a/configmaps?audit=3", {}, nullptr,
                 {{"Impersonate-User", "alice"}})
                .status,
            200);
  ASSERT_EQ(Send(*bare_, "GET", "/api/v1/namespaces/team-a/configmaps?audit=4").status, 401);
  ASSERT_EQ(Send(*bare_, "GET", "/api/v1/namespaces/team-a/configmaps?audit=5",
                 "Bearer alice-token", nullptr, {{"Impersonate-User", "bob"}})
                .status,
            403);

  auto find = [&](std::string_view uri) -> Json {
    Json found;
    Eventually(
        [&] {
          for (auto& e : AuditEvents()) {
            if (e.value("requestURI", "") == uri) {
              found = e;
              return true;
            }
          }
          return false;
        },
        std::chrono::seconds(10));
    return found;
  };
  const Json alice = {{"username", "alice"},
                      {"uid", "alice-uid"},
                      {"groups", {"devs", "qa", "system:authenticated"}}};

  Json e = find("/api/v1/namespaces/team-a/secrets?audit=1");
  ASSERT_TRUE(e.is_object()) << ReadFileOrEmpty(audit_log_);
  EXPECT_EQ(e.value("kind", ""), "Event");
  EXPECT_EQ(e.value("apiVersion", ""), "audit.k8s.io/v1");
  EXPECT_EQ(e.value("level", ""), "Metadata");
  EXPECT_EQ(e.value("stage", ""), "ResponseComplete");
  EXPECT_FALSE(e.value("auditID", "").empty());
  EXPECT_EQ(e.value("verb", ""), "list");
  EXPECT_EQ(e["user"], alice) << e.dump();
  EXPECT_EQ(e["sourceIPs"], Json::array({"127.0.0.1"})) << e.dump();
  EXPECT_EQ(e["objectRef"],
            (Json{{"resource", "secrets"}, {"namespace", "team-a"}, {"apiVersion", "v1"}}))
      << e.dump();
  EXPECT_EQ(e["responseStatus"]["code"], 403) << e.dump();
  EXPECT_EQ(e["annotations"]["authorization.k8s.io/decision"], "forbid") << e.dump();
  EXPECT_FALSE(e.contains("impersonatedUser"));

  e = find("/api/v1/namespaces/team-a/configmaps?audit=2");
  EXPECT_EQ(e["user"], alice) << e.dump();
  EXPECT_EQ(e["responseStatus"]["code"], 200) << e.dump();
  EXPECT_EQ(e["annotations"],
            (Json{{"authorization.k8s.io/decision", "allow"},
                  {"authorization.k8s.io/reason",
                   "RBAC: allowed by RoleBinding \"alice-app/team-a\" of Role \"app\" to User "
                   "\"alice\""}}))
      << e.dump();

  e = find("/api/v1/namespaces/team-a/configmaps?audit=3");
  EXPECT_EQ(e["user"]["username"], "kubernetes-admin") << e.dump();
  EXPECT_EQ(e["impersonatedUser"],
            (Json{{"username", "alice"}, {"groups", {"system:authenticated"}}}))
      << e.dump();
  EXPECT_EQ(e["annotations"]["authorization.k8s.io/decision"], "allow") << e.dump();

  e = find("/api/v1/namespaces/team-a/configmaps?audit=4");
  EXPECT_EQ(e["responseStatus"]["code"], 401) << e.dump();
  EXPECT_FALSE(e["user"].contains("username")) << e.dump();
  EXPECT_FALSE(e.contains("annotations")) << e.dump();

  // A refused impersonation names who tried.
  e = find("/api/v1/namespaces/team-a/configmaps?audit=5");
  EXPECT_EQ(e["responseStatus"]["code"], 403) << e.dump();
  EXPECT_EQ(e["user"], alice) << e.dump();
  EXPECT_FALSE(e.contains("impersonatedUser")) << e.dump();
  EXPECT_EQ(e["annotations"]["authorization.k8s.io/decision"], "forbid") << e.dump();
}

// A User-Agent that is not UTF-8 (HTTP allows any byte from 0x80 on) is kept, as
// kube-apiserver keeps it: the write is answered 201, the object stored with the manager
// derived from the header (each invalid byte read as U+FFFD), and the audit event written
// with the header's invalid bytes replaced.
TEST_F(AuthTest, AWriteWithAUserAgentThatIsNotUtf8IsAnsweredStoredAndAudited) {
  const std::string user_agent =
      "bad\xff\xfe"
      "agent/1.0 (linux/amd64)";
  const std::string replaced =
      "bad\xef\xbf\xbd\xef\xbf\xbd"
      "agent";
  const std::string uri = "/api/v1/namespaces/default/configmaps?audit=user-agent";
  const Json cm = {{"apiVersion", "v1"},
                   {"kind", "ConfigMap"},
                   {"metadata", {{"name", "from-odd-agent"}}},
                   {"data", {{"k", "v"}}}};
  http::ClientResponse r = Send(*http_, "POST", uri, {}, cm, {{"User-Agent", user_agent}});
  EXPECT_EQ(r.status, 201) << r.body;
  Json created = Json::parse(r.body, nullptr, false);
  EXPECT_EQ(machinery::Find(created, {"metadata", "managedFields"}) != nullptr
                ? created["metadata"]["managedFields"][0].value("manager", "")
                : "",
            replaced)
      << r.body;

  r = AsAdmin("GET", "/api/v1/namespaces/default/configmaps/from-odd-agent");
  ASSERT_EQ(r.status, 200) << r.body;
  Json stored = Json::parse(r.body, nullptr, false);
  EXPECT_EQ(stored["data"], (Json{{"k", "v"}})) << r.body;
  EXPECT_EQ(stored["metadata"]["managedFields"][0]["manager"], replaced) << r.body;

  // The event is written before the answer is sent.
  Json event;
  for (auto& e : AuditEvents()) {
    if (e.value("requestURI", "") == uri) event = e;
  }
  ASSERT_TRUE(event.is_object()) << ReadFileOrEmpty(audit_log_);
  EXPECT_EQ(event.value("verb", ""), "create") << event.dump();
  EXPECT_EQ(event["responseStatus"]["code"], 201) << event.dump();
  EXPECT_EQ(event.value("userAgent", ""), replaced + "/1.0 (linux/amd64)") << event.dump();
  EXPECT_EQ(event["user"]["username"], "kubernetes-admin") << event.dump();
  EXPECT_EQ(event["annotations"]["authorization.k8s.io/decision"], "allow") << event.dump();
}

// --- TokenReview and SubjectAccessReview --------------------------------------------------------

TEST_F(AuthTest, TokenAndSubjectAccessReviewsAnswerForOthers) {
  CreateTeams();
  const std::string token = CreateToken("robot -n team-a");
  ASSERT_FALSE(token.empty());
  auto review = [&](const Json& spec) {
    auto r = AsAdmin(
        "POST", "/apis/authentication.k8s.io/v1/tokenreviews",
        Json{{"apiVersion", "authentication.k8s.io/v1"}, {"kind", "TokenReview"}, {"spec", spec}});
    EXPECT_EQ(r.status, 201) << r.body;
    return Json::parse(r.body, nullptr, false)["status"];
  };
  Json status = review({{"token", token}});
  EXPECT_EQ(status["authenticated"], true) << status.dump();
  EXPECT_EQ(
      status["user"],
      (Json{{"username", "system:serviceaccount:team-a:robot"},
            {"uid", robot_uid_},
            {"groups",
             {"system:serviceaccounts", "system:serviceaccounts:team-a", "system:authenticated"}},
            {"extra",
             {{"authentication.kubernetes.io/credential-id",
               {"JTI=" + JwtClaims(token).value("jti", "")}}}}}))
      << status.dump();
  EXPECT_EQ(status["audiences"], Json::array({kIssuer})) << status.dump();
  status = review({{"token", "alice-token"}});
  EXPECT_EQ(status["authenticated"], true) << status.dump();
  EXPECT_EQ(status["user"]["username"], "alice") << status.dump();
  // Audiences: the answer names only those the token is valid for.
  status = review({{"token", token}, {"audiences", {kIssuer, "https://elsewhere.example"}}});
  EXPECT_EQ(status["audiences"], Json::array({kIssuer})) << status.dump();
  status =
      review({{"token", "alice-token"}, {"audiences", {"https://elsewhere.example", kIssuer}}});
  EXPECT_EQ(status["audiences"], Json::array({kIssuer})) << status.dump();
  const std::string vault_token = CreateToken("robot -n team-a --audience vault");
  ASSERT_FALSE(vault_token.empty());
  status = review({{"token", vault_token}, {"audiences", {"vault"}}});
  EXPECT_EQ(status["authenticated"], true) << status.dump();
  EXPECT_EQ(status["audiences"], Json::array({"vault"})) << status.dump();
  for (const Json& spec :
       {Json{{"token", "garbage"}}, Json{{"token", token + "x"}}, Json{{"token", vault_token}},
        Json{{"token", "alice-token"}, {"audiences", {"vault"}}},
        Json{{"token", token}, {"audiences", {"https://elsewhere.example"}}}}) {
    status = review(spec);
    EXPECT_FALSE(status.value("authenticated", false)) << status.dump();
    EXPECT_FALSE(status["user"].contains("username")) << status.dump();
    EXPECT_FALSE(status.value("error", "").empty()) << status.dump();
  }

  auto access = [&](const std::string& path, Json spec) {
    auto r =
        AsAdmin("POST", path,
                Json{{"apiVersion", "authorization.k8s.io/v1"},
                     {"kind", path.find("local") != std::string::npos ? "LocalSubjectAccessReview"
                                                                      : "SubjectAccessReview"},
                     {"spec", std::move(spec)}});
    EXPECT_EQ(r.status, 201) << r.body;
    return Json::parse(r.body, nullptr, false)["status"];
  };
  const std::string sar = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
  auto attrs = [](std::string verb, std::string resource, std::string name = "",
                  std::string group = "") {
    Json a = {{"namespace", "team-a"}, {"verb", verb}, {"resource", resource}};
    if (!name.empty()) a["name"] = name;
    if (!group.empty()) a["group"] = group;
    return a;
  };
  status = access(sar, {{"user", "alice"}, {"resourceAttributes", attrs("create", "configmaps")}});
  EXPECT_EQ(status["allowed"], true) << status.dump();
  EXPECT_EQ(status["reason"],
            "RBAC: allowed by RoleBinding \"alice-app/team-a\" of Role \"app\" to User \"alice\"");
  status = access(sar, {{"user", "alice"}, {"resourceAttributes", attrs("delete", "configmaps")}});
  EXPECT_EQ(status["allowed"], false) << status.dump();
  status = access(
      sar, {{"user", "alice"}, {"resourceAttributes", attrs("get", "secrets", "app-secret")}});
  EXPECT_EQ(status["allowed"], true) << status.dump();
  // The review's subject has exactly the groups given: system:authenticated is not implied.
  Json self = {{"verb", "create"},
               {"group", "authorization.k8s.io"},
               {"resource", "selfsubjectaccessreviews"}};
  status = access(sar, {{"user", "alice"}, {"resourceAttributes", self}});
  EXPECT_EQ(status["allowed"], false) << status.dump();
  status = access(
      sar, {{"user", "alice"}, {"groups", {"system:authenticated"}}, {"resourceAttributes", self}});
  EXPECT_EQ(status["allowed"], true) << status.dump();
  status = access(
      sar, {{"user", "alice"}, {"nonResourceAttributes", {{"verb", "get"}, {"path", "/metrics"}}}});
  EXPECT_EQ(status["allowed"], false) << status.dump();
  status = access("/apis/authorization.k8s.io/v1/namespaces/team-a/localsubjectaccessreviews",
                  {{"user", "alice"}, {"resourceAttributes", attrs("list", "configmaps")}});
  EXPECT_EQ(status["allowed"], true) << status.dump();

  // Reviews about others need their own grant.
  auto r = AsToken("alice-token", "POST", sar,
                   Json{{"apiVersion", "authorization.k8s.io/v1"},
                        {"kind", "SubjectAccessReview"},
                        {"spec", {{"user", "bob"}, {"resourceAttributes", attrs("get", "pods")}}}});
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Json::parse(r.body, nullptr, false).value("message", ""),
            "subjectaccessreviews.authorization.k8s.io is forbidden: User \"alice\" cannot "
            "create resource \"subjectaccessreviews\" in API group \"authorization.k8s.io\" at "
            "the cluster scope")
      << r.body;
}

}  // namespace
}  // namespace klutch::testing

namespace klutch::testing {
namespace {

// Service-account issuer discovery: service accounts (and admins) read the issuer document and
// its JWKS, and a token the server issued verifies against that JWKS; others are refused.
TEST_F(AuthTest, IssuerDiscoveryPublishesTheServiceAccountKeys) {
  CreateTeams();
  const std::string token = CreateToken("robot -n team-a");
  ASSERT_FALSE(token.empty());
  auto doc = AsToken(token, "GET", "/.well-known/openid-configuration");
  ASSERT_EQ(doc.status, 200) << doc.body;
  Json config = Json::parse(doc.body, nullptr, false);
  EXPECT_EQ(config["issuer"], kIssuer) << doc.body;
  EXPECT_EQ(config["id_token_signing_alg_values_supported"], Json::array({"RS256"}));
  const std::string jwks_uri = config.value("jwks_uri", "");
  EXPECT_TRUE(jwks_uri.ends_with("/openid/v1/jwks")) << jwks_uri;

  auto keys = AsToken(token, "GET", "/openid/v1/jwks");
  ASSERT_EQ(keys.status, 200) << keys.body;
  EXPECT_EQ(keys.headers.Get("Content-Type"), "application/jwk-set+json");
  auto jwks = auth::Jwks::Parse(keys.body);
  ASSERT_TRUE(jwks.ok()) << jwks.status().ToString();
  auto jwt = auth::ParseJwt(token);
  ASSERT_TRUE(jwt.ok());
  EXPECT_TRUE(auth::VerifyJwt(*jwt, jwks->Candidates(jwt->kid, jwt->alg)).ok());

  // alice is no service account: the bootstrap policy does not grant her these paths.
  EXPECT_EQ(AsToken("alice-token", "GET", "/openid/v1/jwks").status, 403);
  EXPECT_EQ(AsAdmin("GET", "/openid/v1/jwks").status, 200);
}

}  // namespace
}  // namespace klutch::testing
