#include "client/kubeconfig.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "core/strings.h"
#include "test/support/process.h"

namespace klutch::client::kubeconfig_test {
namespace {

namespace fs = std::filesystem;

using testing::TempDir;

// A getenv over a fixed map, for LoadKubeconfig's KUBECONFIG/HOME lookups.
std::function<const char*(const char*)> FakeEnv(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

std::string B64(std::string_view s) { return core::Base64Encode(s); }

const char kCaPem[] = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
const char kCertPem[] = "-----BEGIN CERTIFICATE-----\nCLIENT\n-----END CERTIFICATE-----\n";
const char kKeyPem[] = "-----BEGIN EC PRIVATE KEY-----\nKEY\n-----END EC PRIVATE KEY-----\n";

// One cluster/user/context file, the shape `kubectl config view` prints.
std::string SimpleConfig(const std::string& cluster_body, const std::string& user_body,
                         const std::string& extra = "") {
  return "apiVersion: v1\nkind: Config\n"
         "clusters:\n- name: c\n  cluster:\n" +
         cluster_body + "users:\n- name: u\n  user:\n" + user_body +
         "contexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n" + extra +
         "current-context: ctx\n";
}

core::Result<RestConfig> LoadText(const TempDir& dir, const std::string& text,
                                  KubeconfigOptions options = {}) {
  options.paths = {dir.Write("config", text)};
  return LoadKubeconfig(options);
}

TEST(ParseKubeconfig, ReadsEveryFieldAndRemembersWhereItCameFrom) {
  std::string text = R"(apiVersion: v1
kind: Config
preferences: {}
clusters:
- name: prod
  cluster:
    server: https://prod.example.com:6443
    tls-server-name: api.internal
    certificate-authority: certs/ca.crt
    disable-compression: true
- name: dev
  cluster:
    server: https://dev:443
    insecure-skip-tls-verify: true
users:
- name: alice
  user:
    client-certificate-data: )" +
                     B64(kCertPem) +
                     R"(
    client-key: /abs/key.pem
    tokenFile: ../token
    as: bob
    as-groups: [admins, devs]
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/login
      args: [get-token, --verbose]
      env:
      - name: REGION
        value: eu
      provideClusterInfo: true
      interactiveMode: Never
      installHint: install it
contexts:
- name: prod-alice
  context:
    cluster: prod
    user: alice
    namespace: team-a
current-context: prod-alice
)";
  auto r = ParseKubeconfig(text, "/home/me/.kube/config", "/home/me/.kube");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Kubeconfig& k = *r;
  ASSERT_EQ(k.clusters.size(), 2u);
  const KubeconfigCluster& prod = k.clusters.at("prod");
  EXPECT_EQ(prod.server, "https://prod.example.com:6443");
  EXPECT_EQ(prod.tls_server_name, "api.internal");
  EXPECT_EQ(prod.certificate_authority, "/home/me/.kube/certs/ca.crt");
  EXPECT_TRUE(prod.disable_compression);
  EXPECT_EQ(prod.source, "/home/me/.kube/config");
  EXPECT_EQ(prod.field, "clusters[0].cluster");
  EXPECT_TRUE(k.clusters.at("dev").insecure_skip_tls_verify);
  EXPECT_EQ(k.clusters.at("dev").field, "clusters[1].cluster");

  const KubeconfigUser& alice = k.users.at("alice");
  EXPECT_EQ(alice.client_certificate_data, kCertPem);
  EXPECT_EQ(alice.client_key, "/abs/key.pem");
  EXPECT_EQ(alice.token_file, "/home/me/token");
  EXPECT_EQ(alice.impersonate, "bob");
  EXPECT_EQ(alice.impersonate_groups, (std::vector<std::string>{"admins", "devs"}));
  const KubeconfigUser& plugin = k.users.at("plugin");
  ASSERT_TRUE(plugin.exec.has_value());
  EXPECT_EQ(plugin.exec->command, "/home/me/.kube/bin/login");
  EXPECT_EQ(plugin.exec->args, (std::vector<std::string>{"get-token", "--verbose"}));
  ASSERT_EQ(plugin.exec->env.size(), 1u);
  EXPECT_EQ(plugin.exec->env[0], (std::pair<std::string, std::string>{"REGION", "eu"}));
  EXPECT_TRUE(plugin.exec->provide_cluster_info);
  EXPECT_EQ(plugin.exec->interactive_mode, "Never");
  EXPECT_EQ(plugin.exec->install_hint, "install it");
  EXPECT_EQ(plugin.field, "users[1].user");

  const KubeconfigContext& ctx = k.contexts.at("prod-alice");
  EXPECT_EQ(ctx.cluster, "prod");
  EXPECT_EQ(ctx.user, "alice");
  EXPECT_EQ(ctx.namespace_, "team-a");
  EXPECT_EQ(k.current_context, "prod-alice");
  EXPECT_EQ(k.current_context_source, "/home/me/.kube/config");
}

TEST(ParseKubeconfig, BareCommandNamesStayForPathLookup) {
  auto r = ParseKubeconfig(
      "users:\n- name: u\n  user:\n    exec:\n      command: aws\n"
      "      apiVersion: client.authentication.k8s.io/v1beta1\n",
      "/k/config", "/k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->users.at("u").exec->command, "aws");
}

TEST(ParseKubeconfig, EmptyAndNullDocumentsAreEmptyConfigs) {
  for (const char* text : {"", "\n", "---\n", "clusters: null\nusers: []\n"}) {
    auto r = ParseKubeconfig(text, "/k/config", "/k");
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().ToString();
    EXPECT_TRUE(r->clusters.empty() && r->users.empty() && r->contexts.empty()) << text;
    EXPECT_EQ(r->files, (std::vector<std::string>{"/k/config"}));
  }
}

TEST(ParseKubeconfig, StructuralErrorsNameTheFileAndField) {
  struct Case {
    std::string name;
    std::string text;
    core::Reason reason;
    std::string message;  // the whole message must start with this
  };
  const std::vector<Case> cases = {
      {"bad client cert base64",
       "users:\n- name: u\n  user:\n    client-certificate-data: '!!notbase64'\n",
       core::Reason::kInvalid,
       "/tmp/x/config: users[0].user.client-certificate-data: illegal base64 data"},
      {"bad CA base64 in the second cluster",
       "clusters:\n- name: a\n  cluster: {server: https://a}\n- name: b\n  cluster:\n"
       "    certificate-authority-data: abc\n",
       core::Reason::kInvalid,
       "/tmp/x/config: clusters[1].cluster.certificate-authority-data: illegal base64 data"},
      {"bad key base64", "users:\n- name: u\n  user:\n    client-key-data: 'a b'\n",
       core::Reason::kInvalid, "/tmp/x/config: users[0].user.client-key-data: illegal base64"},
      {"malformed YAML", "clusters:\n- name: a\n  cluster: [\n", core::Reason::kBadRequest,
       "/tmp/x/config: error converting YAML to JSON: yaml: line"},
      {"document is a list", "- a\n- b\n", core::Reason::kInvalid,
       "/tmp/x/config: not a kubeconfig: the document is a list"},
      {"clusters is a mapping", "clusters: {a: 1}\n", core::Reason::kInvalid,
       "/tmp/x/config: clusters: must be a list, not a mapping"},
      {"entry is a string", "users:\n- u\n", core::Reason::kInvalid,
       "/tmp/x/config: users[0]: must be a mapping, not a string"},
      {"server is a number", "clusters:\n- name: a\n  cluster:\n    server: 8443\n",
       core::Reason::kInvalid, "/tmp/x/config: clusters[0].cluster.server: must be a string"},
      {"insecure flag is a string",
       "clusters:\n- name: a\n  cluster:\n    insecure-skip-tls-verify: 'true'\n",
       core::Reason::kInvalid,
       "/tmp/x/config: clusters[0].cluster.insecure-skip-tls-verify: must be a boolean"},
      {"cluster body is a list", "clusters:\n- name: a\n  cluster: [1]\n", core::Reason::kInvalid,
       "/tmp/x/config: clusters[0].cluster: must be a mapping"},
      {"missing name", "contexts:\n- context: {cluster: a}\n", core::Reason::kInvalid,
       "/tmp/x/config: contexts[0].name: Required value"},
      {"duplicate name", "contexts:\n- name: a\n- name: b\n- name: a\n", core::Reason::kInvalid,
       "/tmp/x/config: contexts[2].name: Duplicate value: \"a\""},
      {"wrong kind", "kind: Pod\n", core::Reason::kInvalid,
       "/tmp/x/config: kind: Unsupported value: \"Pod\""},
      {"wrong apiVersion", "apiVersion: v2\n", core::Reason::kInvalid,
       "/tmp/x/config: apiVersion: Unsupported value: \"v2\""},
      {"current-context is a list", "current-context: [a]\n", core::Reason::kInvalid,
       "/tmp/x/config: current-context: must be a string"},
      {"exec args not a list",
       "users:\n- name: u\n  user:\n    exec:\n      command: x\n      args: --flag\n",
       core::Reason::kInvalid, "/tmp/x/config: users[0].user.exec.args: must be a list"},
      {"exec arg not a string",
       "users:\n- name: u\n  user:\n    exec:\n      command: x\n      args: [a, {b: 1}]\n",
       core::Reason::kInvalid, "/tmp/x/config: users[0].user.exec.args[1]: must be a string"},
      {"exec env entry not a mapping",
       "users:\n- name: u\n  user:\n    exec:\n      command: x\n      env: [A=b]\n",
       core::Reason::kInvalid, "/tmp/x/config: users[0].user.exec.env[0]: must be a mapping"},
      {"as-groups not a list", "users:\n- name: u\n  user:\n    as-groups: admins\n",
       core::Reason::kInvalid, "/tmp/x/config: users[0].user.as-groups: must be a list"},
  };
  for (const Case& c : cases) {
    auto r = ParseKubeconfig(c.text, "/tmp/x/config", "/tmp/x");
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().reason(), c.reason) << c.name << ": " << r.status().ToString();
    EXPECT_TRUE(r.status().message().starts_with(c.message))
        << c.name << "\n  got:  " << r.status().message() << "\n  want: " << c.message;
  }
}

TEST(ParseKubeconfig, Base64MayBeWrappedAcrossLines) {
  std::string wrapped = B64(kCaPem);
  wrapped.insert(10, "\n");
  auto r = ParseKubeconfig(
      "clusters:\n- name: a\n  cluster:\n    certificate-authority-data: |\n      " +
          wrapped.substr(0, 10) + "\n      " + wrapped.substr(11) + "\n",
      "/k/config", "/k");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->clusters.at("a").certificate_authority_data, kCaPem);
}

TEST(LoadKubeconfig, MergesKubeconfigListFirstDefinitionWins) {
  TempDir dir;
  fs::path a = dir.Write("a/config",
                         "clusters:\n- name: shared\n  cluster: {server: 'https://from-a:1'}\n"
                         "users:\n- name: me\n  user: {token: token-a}\n"
                         "contexts:\n- name: both\n  context: {cluster: shared, user: me, "
                         "namespace: ns-a}\n");
  fs::path b = dir.Write("b/config",
                         "clusters:\n- name: shared\n  cluster: {server: 'https://from-b:1'}\n"
                         "- name: only-b\n  cluster: {server: 'https://only-b:2'}\n"
                         "users:\n- name: me\n  user: {token: token-b}\n"
                         "contexts:\n- name: both\n  context: {cluster: only-b, user: me}\n"
                         "- name: b-ctx\n  context: {cluster: only-b, user: me}\n"
                         "current-context: both\n");
  fs::path c = dir.Write("c/config", "current-context: b-ctx\n");
  KubeconfigOptions options;
  // Empty entries are skipped; a missing file in the list is ignored.
  options.getenv = FakeEnv({{"KUBECONFIG", a.string() + "::" + (dir.path() / "missing").string() +
                                               ":" + b.string() + ":" + c.string()},
                            {"HOME", "/nonexistent"}});
  auto r = LoadKubeconfig(options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // current-context from b (the first file that sets it), context and cluster from a.
  EXPECT_EQ(r->context_name, "both");
  EXPECT_EQ(r->server, "https://from-a:1");
  EXPECT_EQ(r->bearer_token, "token-a");
  EXPECT_EQ(r->namespace_, "ns-a");

  // Entries only b defines are still reachable.
  options.context = "b-ctx";
  r = LoadKubeconfig(options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server, "https://only-b:2");
  EXPECT_EQ(r->bearer_token, "token-a");  // user "me" is still a's
  EXPECT_EQ(r->namespace_, "default");
}

TEST(LoadKubeconfig, CurrentContextComesFromTheFirstFileThatSetsIt) {
  TempDir dir;
  std::string body =
      "clusters:\n- name: c\n  cluster: {server: 'https://c'}\n"
      "contexts:\n- name: one\n  context: {cluster: c}\n- name: two\n  context: {cluster: c}\n";
  fs::path first = dir.Write("1", body + "current-context: one\n");
  fs::path second = dir.Write("2", "current-context: two\n");
  for (auto [order, want] : std::vector<std::pair<std::string, std::string>>{
           {first.string() + ":" + second.string(), "one"},
           {second.string() + ":" + first.string(), "two"}}) {
    KubeconfigOptions options;
    options.getenv = FakeEnv({{"KUBECONFIG", order}});
    auto r = LoadKubeconfig(options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->context_name, want) << order;
  }
}

TEST(LoadKubeconfig, RelativePathsResolveAgainstTheDefiningFile) {
  TempDir dir;
  dir.Write("one/pki/ca.crt", kCaPem);
  dir.Write("two/client.crt", kCertPem);
  dir.Write("two/keys/client.key", kKeyPem);
  dir.Write("two/token", "  file-token\n");
  dir.Write("one/config",
            "clusters:\n- name: c\n  cluster:\n    server: https://c:6443\n"
            "    certificate-authority: pki/ca.crt\n"
            "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"
            "current-context: x\n");
  dir.Write("two/config",
            "users:\n- name: u\n  user:\n    client-certificate: client.crt\n"
            "    client-key: ./keys/client.key\n    tokenFile: token\n");
  // Relative KUBECONFIG entries, resolved from a cwd that is neither file's directory.
  fs::path old_cwd = fs::current_path();
  fs::current_path(dir.path());
  KubeconfigOptions options;
  options.getenv = FakeEnv({{"KUBECONFIG", "one/config:two/config"}});
  auto r = LoadKubeconfig(options);
  fs::current_path(old_cwd);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ca_pem, kCaPem);
  EXPECT_EQ(r->cert_pem, kCertPem);
  EXPECT_EQ(r->key_pem, kKeyPem);
  EXPECT_EQ(r->bearer_token, "file-token");
  EXPECT_EQ(fs::path(r->bearer_token_file), fs::canonical(dir.path() / "two/token"));
}

TEST(LoadKubeconfig, FallsBackToHomeKubeConfig) {
  TempDir dir;
  dir.Write(".kube/config", SimpleConfig("    server: https://home:6443\n", "    token: t\n"));
  KubeconfigOptions options;
  options.getenv = FakeEnv({{"HOME", dir.path().string()}});
  auto r = LoadKubeconfig(options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server, "https://home:6443");
  // An empty KUBECONFIG counts as unset.
  options.getenv = FakeEnv({{"HOME", dir.path().string()}, {"KUBECONFIG", ""}});
  EXPECT_TRUE(LoadKubeconfig(options).ok());
}

TEST(LoadKubeconfig, MissingFiles) {
  TempDir dir;
  // An explicitly named file must exist.
  KubeconfigOptions options;
  options.paths = {dir.path() / "nope"};
  auto r = LoadKubeconfig(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kNotFound);
  EXPECT_NE(r.status().message().find((dir.path() / "nope").string()), std::string::npos);
  EXPECT_NE(r.status().message().find("No such file"), std::string::npos);

  // A KUBECONFIG list of only missing files is "no configuration".
  options = {};
  options.getenv =
      FakeEnv({{"KUBECONFIG", (dir.path() / "a").string() + ":" + (dir.path() / "b").string()}});
  r = LoadKubeconfig(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), core::Reason::kInvalid);
  EXPECT_NE(r.status().message().find("no configuration has been provided"), std::string::npos);
  EXPECT_NE(r.status().message().find((dir.path() / "b").string()), std::string::npos);

  // So is no KUBECONFIG and no HOME.
  options.getenv = FakeEnv({});
  r = LoadKubeconfig(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("neither KUBECONFIG nor HOME"), std::string::npos);

  // A directory where a file should be is an error even in the list.
  dir.Write("d/x", "");
  options.getenv = FakeEnv({{"KUBECONFIG", (dir.path() / "d").string()}});
  r = LoadKubeconfig(options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is a directory"), std::string::npos);
}

TEST(LoadKubeconfig, OverridesPickContextClusterUserAndNamespace) {
  TempDir dir;
  std::string text = R"(clusters:
- name: c1
  cluster: {server: 'https://c1'}
- name: c2
  cluster: {server: 'https://c2'}
users:
- name: u1
  user: {token: t1}
- name: u2
  user: {username: admin, password: secret}
contexts:
- name: x1
  context: {cluster: c1, user: u1, namespace: n1}
- name: x2
  context: {cluster: c2, user: u2}
current-context: x1
)";
  auto r = LoadText(dir, text);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->context_name, "x1");
  EXPECT_EQ(r->server, "https://c1");
  EXPECT_EQ(r->bearer_token, "t1");
  EXPECT_EQ(r->namespace_, "n1");

  KubeconfigOptions o;
  o.context = "x2";
  r = LoadText(dir, text, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server, "https://c2");
  EXPECT_EQ(r->username, "admin");
  EXPECT_EQ(r->password, "secret");
  EXPECT_EQ(r->bearer_token, "");
  EXPECT_EQ(r->namespace_, "default");

  o = {};
  o.cluster = "c2";
  o.user = "u2";
  o.namespace_ = "other";
  r = LoadText(dir, text, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->context_name, "x1");
  EXPECT_EQ(r->server, "https://c2");
  EXPECT_EQ(r->username, "admin");
  EXPECT_EQ(r->namespace_, "other");

  // A cluster override works without any context at all; no user means anonymous.
  dir.Write("config", "");
  o = {};
  o.cluster = "c1";
  o.paths = {dir.Write("bare", "clusters:\n- name: c1\n  cluster: {server: 'https://c1'}\n")};
  r = LoadKubeconfig(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server, "https://c1");
  EXPECT_EQ(r->context_name, "");
  EXPECT_TRUE(r->bearer_token.empty() && r->cert_pem.empty() && !r->exec);
}

TEST(LoadKubeconfig, OverridesNamingMissingEntriesFail) {
  TempDir dir;
  std::string text = SimpleConfig("    server: https://c\n", "    token: t\n");
  struct Case {
    KubeconfigOptions options;
    std::string message;
  };
  std::vector<Case> cases(4);
  cases[0].options.context = "nope";
  cases[0].message = "context \"nope\" does not exist in " + (dir.path() / "config").string();
  cases[1].options.cluster = "nope";
  cases[1].message = "cluster \"nope\" (given as an override) does not exist";
  cases[2].options.user = "nope";
  cases[2].message = "user \"nope\" (given as an override) does not exist";
  cases[3].options.namespace_ = "Not_A_Namespace";
  cases[3].message = "namespace override \"Not_A_Namespace\" is not a valid namespace";
  for (const Case& c : cases) {
    auto r = LoadText(dir, text, c.options);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_EQ(r.status().reason(), core::Reason::kInvalid);
    EXPECT_TRUE(r.status().message().starts_with(c.message)) << r.status().message();
  }
}

TEST(LoadKubeconfig, EveryCredentialSourceReachesTheRestConfig) {
  TempDir dir;
  dir.Write("ca.crt", kCaPem);
  dir.Write("tls.crt", kCertPem);
  dir.Write("tls.key", kKeyPem);
  dir.Write("tok", "rotating\n");
  struct Case {
    std::string name;
    std::string cluster;
    std::string user;
    std::function<void(const RestConfig&)> check;
  };
  const std::vector<Case> cases = {
      {"inline data",
       "    server: https://c\n    certificate-authority-data: " + B64(kCaPem) + "\n",
       "    client-certificate-data: " + B64(kCertPem) + "\n    client-key-data: " + B64(kKeyPem) +
           "\n",
       [](const RestConfig& r) {
         EXPECT_EQ(r.ca_pem, kCaPem);
         EXPECT_EQ(r.cert_pem, kCertPem);
         EXPECT_EQ(r.key_pem, kKeyPem);
       }},
      {"files", "    server: https://c\n    certificate-authority: ca.crt\n",
       "    client-certificate: tls.crt\n    client-key: tls.key\n",
       [](const RestConfig& r) {
         EXPECT_EQ(r.ca_pem, kCaPem);
         EXPECT_EQ(r.cert_pem, kCertPem);
         EXPECT_EQ(r.key_pem, kKeyPem);
       }},
      {"token", "    server: https://c\n", "    token: abc\n",
       [](const RestConfig& r) {
         EXPECT_EQ(r.bearer_token, "abc");
         EXPECT_EQ(r.bearer_token_file, "");
       }},
      {"token file", "    server: https://c\n", "    tokenFile: tok\n",
       [&](const RestConfig& r) {
         EXPECT_EQ(r.bearer_token, "rotating");  // the value read now backs up later reads
         EXPECT_EQ(r.bearer_token_file, (dir.path() / "tok").string());
       }},
      {"token and token file", "    server: https://c\n", "    token: fixed\n    tokenFile: tok\n",
       [&](const RestConfig& r) {
         EXPECT_EQ(r.bearer_token, "fixed");
         EXPECT_EQ(r.bearer_token_file, (dir.path() / "tok").string());
       }},
      {"basic auth", "    server: https://c\n", "    username: admin\n    password: pw\n",
       [](const RestConfig& r) {
         EXPECT_EQ(r.username, "admin");
         EXPECT_EQ(r.password, "pw");
       }},
      {"impersonation", "    server: https://c\n",
       "    token: t\n    as: jane\n    as-uid: '42'\n    as-groups: [g1, g2]\n",
       [](const RestConfig& r) {
         EXPECT_EQ(r.impersonate_user, "jane");
         EXPECT_EQ(r.impersonate_uid, "42");
         EXPECT_EQ(r.impersonate_groups, (std::vector<std::string>{"g1", "g2"}));
       }},
      {"exec v1", "    server: https://c\n",
       "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: bin/plugin\n"
       "      interactiveMode: IfAvailable\n",
       [&](const RestConfig& r) {
         ASSERT_TRUE(r.exec.has_value());
         EXPECT_EQ(r.exec->command, (dir.path() / "bin/plugin").string());
         EXPECT_EQ(r.exec->interactive_mode, "IfAvailable");
         EXPECT_EQ(r.exec->api_version, "client.authentication.k8s.io/v1");
       }},
      {"exec v1beta1 defaults interactiveMode", "    server: https://c\n",
       "    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: p\n",
       [](const RestConfig& r) {
         ASSERT_TRUE(r.exec.has_value());
         EXPECT_EQ(r.exec->interactive_mode, "IfAvailable");
       }},
      {"insecure without CA", "    server: https://c\n    insecure-skip-tls-verify: true\n",
       "    token: t\n",
       [](const RestConfig& r) {
         EXPECT_TRUE(r.insecure_skip_tls_verify);
         EXPECT_EQ(r.ca_pem, "");
       }},
      {"tls-server-name and compression",
       "    server: https://10.0.0.1:6443\n    tls-server-name: kubernetes\n"
       "    disable-compression: true\n",
       "    token: t\n",
       [](const RestConfig& r) {
         EXPECT_EQ(r.tls_server_name, "kubernetes");
         EXPECT_TRUE(r.disable_compression);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = LoadText(dir, SimpleConfig(c.cluster, c.user));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->context_name, "ctx");
    EXPECT_EQ(r->namespace_, "default");
    c.check(*r);
  }
}

TEST(LoadKubeconfig, ServerUrlsAreNormalizedOrRejected) {
  TempDir dir;
  struct Case {
    std::string server;
    std::string extra_cluster;
    std::string want;  // "" means rejected
  };
  const std::vector<Case> cases = {
      {"https://h:6443", "", "https://h:6443"},
      {"https://h:6443/", "", "https://h:6443"},
      {"https://h/prefix/", "", "https://h/prefix"},
      {"HTTPS://h", "", "https://h"},
      {"https://[::1]:6443", "", "https://[::1]:6443"},
      {"h:6443", "    insecure-skip-tls-verify: true\n", "https://h:6443"},
      {"h:8080", "", "http://h:8080"},
      {"ftp://h", "", ""},
      {"https://", "", ""},
      {"https://h:0", "", ""},
      {"https://h:99999", "", ""},
      {"https://h:", "", ""},
      {"https://user:pw@h", "", ""},
      {"https://h/?watch=1", "", ""},
      {"https://[::1", "", ""},
  };
  for (const Case& c : cases) {
    auto r = LoadText(
        dir, SimpleConfig("    server: '" + c.server + "'\n" + c.extra_cluster, "    token: t\n"));
    if (c.want.empty()) {
      ASSERT_FALSE(r.ok()) << c.server;
      EXPECT_TRUE(r.status().message().starts_with((dir.path() / "config").string() +
                                                   ": clusters[0].cluster.server: Invalid value"))
          << r.status().message();
    } else {
      ASSERT_TRUE(r.ok()) << c.server << ": " << r.status().ToString();
      EXPECT_EQ(r->server, c.want);
    }
  }
}

TEST(LoadKubeconfig, ConfigurationErrorsNameTheFileAndField) {
  TempDir dir;
  const std::string f = (dir.path() / "config").string();
  const std::string server = "    server: https://c\n";
  const std::string token = "    token: t\n";
  const std::string exec_v1 =
      "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: p\n";
  struct Case {
    std::string name;
    std::string text;
    std::string message;  // prefix
  };
  const std::vector<Case> cases = {
      {"context names a missing cluster",
       "clusters: []\ncontexts:\n- name: x\n  context: {cluster: nope}\ncurrent-context: x\n",
       f + ": contexts[0].context.cluster: cluster \"nope\" not found for context \"x\""},
      {"context names a missing user",
       "clusters:\n- name: c\n  cluster: {server: 'https://c'}\n"
       "contexts:\n- name: x\n  context: {cluster: c, user: ghost}\ncurrent-context: x\n",
       f + ": contexts[0].context.user: user \"ghost\" not found for context \"x\""},
      {"context names no cluster",
       "contexts:\n- name: x\n  context: {user: u}\ncurrent-context: x\n",
       f + ": contexts[0].context.cluster: Required value"},
      {"current-context names a missing context",
       "contexts:\n- name: x\n  context: {cluster: c}\ncurrent-context: gone\n",
       f + ": current-context: context \"gone\" does not exist"},
      {"no current context", "clusters:\n- name: c\n  cluster: {server: 'https://c'}\n",
       "no context chosen: current-context is not set in " + f},
      {"cluster without server", SimpleConfig("    tls-server-name: x\n", token),
       f + ": clusters[0].cluster.server: Required value: cluster \"c\" has no server"},
      {"proxy-url", SimpleConfig(server + "    proxy-url: http://proxy:3128\n", token),
       f + ": clusters[0].cluster.proxy-url: proxy-url is not supported"},
      {"insecure with CA data",
       SimpleConfig(server +
                        "    insecure-skip-tls-verify: true\n"
                        "    certificate-authority-data: " +
                        B64(kCaPem) + "\n",
                    token),
       f + ": clusters[0].cluster.insecure-skip-tls-verify: specifying a root certificates file "
           "with the insecure flag is not allowed"},
      {"insecure with CA file",
       SimpleConfig(server + "    insecure-skip-tls-verify: true\n"
                             "    certificate-authority: ca.crt\n",
                    token),
       f + ": clusters[0].cluster.insecure-skip-tls-verify: specifying a root certificates"},
      {"CA file and data",
       SimpleConfig(server +
                        "    certificate-authority: ca.crt\n"
                        "    certificate-authority-data: " +
                        B64(kCaPem) + "\n",
                    token),
       f + ": clusters[0].cluster: certificate-authority-data and certificate-authority are "
           "both specified"},
      {"unreadable CA file",
       SimpleConfig(server + "    certificate-authority: missing.crt\n", token),
       f + ": clusters[0].cluster.certificate-authority: unable to read \"" +
           (dir.path() / "missing.crt").string() + "\": No such file or directory"},
      {"unreadable client certificate",
       SimpleConfig(
           server, "    client-certificate: nope.crt\n    client-key-data: " + B64(kKeyPem) + "\n"),
       f + ": users[0].user.client-certificate: unable to read"},
      {"unreadable client key",
       SimpleConfig(server, "    client-certificate-data: " + B64(kCertPem) +
                                "\n    client-key: nope.key\n"),
       f + ": users[0].user.client-key: unable to read"},
      {"certificate without key",
       SimpleConfig(server, "    client-certificate-data: " + B64(kCertPem) + "\n"),
       f + ": users[0].user.client-key: Required value"},
      {"certificate file and data",
       SimpleConfig(server, "    client-certificate: a.crt\n    client-certificate-data: " +
                                B64(kCertPem) + "\n    client-key-data: " + B64(kKeyPem) + "\n"),
       f + ": users[0].user: client-certificate-data and client-certificate are both specified"},
      {"unreadable token file", SimpleConfig(server, "    tokenFile: no-token\n"),
       f + ": users[0].user.tokenFile: unable to read"},
      {"token and basic auth", SimpleConfig(server, "    token: t\n    username: u\n"),
       f + ": users[0].user: more than one authentication method found for user \"u\""},
      {"groups without a user to impersonate", SimpleConfig(server, "    as-groups: [g]\n"),
       f + ": users[0].user: requesting groups or user-extra without impersonating a user"},
      {"auth-provider", SimpleConfig(server, "    auth-provider:\n      name: gcp\n"),
       f + ": users[0].user.auth-provider: auth-provider \"gcp\" is not supported"},
      {"exec and auth-provider",
       SimpleConfig(server, exec_v1 + "      interactiveMode: Never\n"
                                      "    auth-provider: {name: oidc}\n"),
       f + ": users[0].user: auth-provider cannot be provided in combination with an exec"},
      {"exec without command",
       SimpleConfig(server, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"),
       f + ": users[0].user.exec.command: Required value"},
      {"exec without apiVersion", SimpleConfig(server, "    exec:\n      command: p\n"),
       f + ": users[0].user.exec.apiVersion: Required value"},
      {"exec with a removed apiVersion",
       SimpleConfig(server,
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1alpha1\n"
                    "      command: p\n"),
       f + ": users[0].user.exec.apiVersion: Unsupported value: "
           "\"client.authentication.k8s.io/v1alpha1\""},
      {"exec v1 without interactiveMode", SimpleConfig(server, exec_v1),
       f + ": users[0].user.exec.interactiveMode: Required value"},
      {"exec interactiveMode Always",
       SimpleConfig(server, exec_v1 + "      interactiveMode: Always\n"),
       f + ": users[0].user.exec.interactiveMode: interactiveMode Always needs a terminal"},
      {"exec interactiveMode unknown",
       SimpleConfig(server, exec_v1 + "      interactiveMode: Sometimes\n"),
       f + ": users[0].user.exec.interactiveMode: Unsupported value: \"Sometimes\""},
      {"exec env without a name",
       SimpleConfig(server, exec_v1 + "      interactiveMode: Never\n      env:\n"
                                      "      - {name: A, value: b}\n      - {value: c}\n"),
       f + ": users[0].user.exec.env[1].name: Required value"},
      {"bad namespace", SimpleConfig(server, token, "    namespace: Bad_Namespace\n"),
       f + ": contexts[0].context.namespace: Invalid value: \"Bad_Namespace\""},
  };
  for (const Case& c : cases) {
    auto r = LoadText(dir, c.text);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().reason(), core::Reason::kInvalid) << c.name;
    EXPECT_TRUE(r.status().message().starts_with(c.message))
        << c.name << "\n  got:  " << r.status().message() << "\n  want: " << c.message;
  }
}

TEST(LoadKubeconfig, OnlyTheChosenContextIsValidated) {
  TempDir dir;
  // A broken cluster and user that the chosen context does not use do not matter.
  auto r = LoadText(dir,
                    "clusters:\n- name: good\n  cluster: {server: 'https://good'}\n"
                    "- name: broken\n  cluster: {proxy-url: 'http://p'}\n"
                    "users:\n- name: broken\n  user: {auth-provider: {name: gcp}}\n"
                    "contexts:\n- name: ok\n  context: {cluster: good}\n"
                    "- name: bad\n  context: {cluster: broken, user: broken}\n"
                    "current-context: ok\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->server, "https://good");
}

TEST(Kubeconfig, MergeKeepsFirstDefinitions) {
  auto a = ParseKubeconfig("clusters:\n- name: x\n  cluster: {server: 'https://a'}\n", "/a", "/");
  auto b = ParseKubeconfig(
      "clusters:\n- name: x\n  cluster: {server: 'https://b'}\n"
      "- name: y\n  cluster: {server: 'https://y'}\ncurrent-context: y\n",
      "/b", "/");
  ASSERT_TRUE(a.ok() && b.ok());
  Kubeconfig merged = *a;
  merged.Merge(*b);
  EXPECT_EQ(merged.clusters.at("x").server, "https://a");
  EXPECT_EQ(merged.clusters.at("x").source, "/a");
  EXPECT_EQ(merged.clusters.at("y").source, "/b");
  EXPECT_EQ(merged.current_context, "y");
  EXPECT_EQ(merged.current_context_source, "/b");
  EXPECT_EQ(merged.files, (std::vector<std::string>{"/a", "/b"}));
}

TEST(ReadConfigFile, ReadsBytesAndReportsMissingFiles) {
  TempDir dir;
  std::string binary("a\0b\xff", 4);
  auto r = ReadConfigFile(dir.Write("bin", binary));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, binary);
  auto missing = ReadConfigFile(dir.path() / "missing");
  EXPECT_EQ(missing.status().reason(), core::Reason::kNotFound);
}

}  // namespace
}  // namespace klutch::client::kubeconfig_test
