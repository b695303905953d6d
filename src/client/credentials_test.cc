#include "client/credentials.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::client::credentials_test {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("klutch-credentials-" + std::to_string(::getpid()) + "-" + std::to_string(++counter));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path Write(const std::string& name, const std::string& content) const {
    fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  // Replaces `name` atomically (write + rename), as the kubelet rotates projected tokens.
  void Rotate(const std::string& name, const std::string& content) const {
    Write(name + ".tmp", content);
    fs::rename(path_ / (name + ".tmp"), path_ / name);
  }
  // A /bin/sh script, executable.
  fs::path Script(const std::string& name, const std::string& body) const {
    fs::path p = Write(name, "#!/bin/sh\n" + body);
    ::chmod(p.c_str(), 0755);
    return p;
  }
  std::string Read(const std::string& name) const {
    std::ifstream in(path_ / name, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  fs::path path_;
};

core::SystemTime Start() { return *core::ParseTime("2030-01-01T00:00:00Z"); }

constexpr char kV1[] = "client.authentication.k8s.io/v1";

ExecConfig Exec(const fs::path& command) {
  ExecConfig e;
  e.api_version = kV1;
  e.command = command.string();
  e.interactive_mode = "Never";
  e.timeout = seconds(20);
  return e;
}

// A plugin that counts its runs in `runs` (one line each) and prints a token carrying the
// run number, expiring at $EXPIRY when set.
fs::path CountingPlugin(const TempDir& dir) {
  std::string runs = (dir.path() / "runs").string();
  return dir.Script(
      "plugin.sh",
      "echo run >> '" + runs +
          "'\n"
          "n=$(wc -l < '" +
          runs +
          "' | tr -d ' ')\n"
          "if [ -n \"$EXPIRY\" ]; then exp=\",\\\"expirationTimestamp\\\":\\\"$EXPIRY\\\"\"; fi\n"
          "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
          "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"token-%s\"%s}}' "
          "\"$n\" \"$exp\"\n");
}

int Runs(const TempDir& dir) {
  std::string s = dir.Read("runs");
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(Credentials, StaticMaterialPassesThrough) {
  RestConfig config;
  config.bearer_token = "tok";
  config.cert_pem = "CERT";
  config.key_pem = "KEY";
  config.username = "admin";
  config.password = "pw";
  auto creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_FALSE((*creds)->IsDynamic());
  auto m = (*creds)->Current();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, (AuthMaterial{"tok", "CERT", "KEY", "admin", "pw"}));
  (*creds)->Invalidate();
  EXPECT_EQ((*creds)->Current()->bearer_token, "tok");
}

TEST(Credentials, TokenFileIsReReadWhenItRotatesAtMostOncePerSecond) {
  TempDir dir;
  dir.Write("token", "first\n");
  core::FakeClock clock(Start());
  RestConfig config;
  config.bearer_token_file = (dir.path() / "token").string();
  auto creds = Credentials::For(config, clock);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  Credentials& c = **creds;
  EXPECT_TRUE(c.IsDynamic());
  EXPECT_EQ(c.Current()->bearer_token, "first");

  dir.Rotate("token", "second");
  clock.Advance(milliseconds(500));
  EXPECT_EQ(c.Current()->bearer_token, "first") << "checked again within a second";
  clock.Advance(milliseconds(500));
  EXPECT_EQ(c.Current()->bearer_token, "second");

  // An in-place rewrite that keeps size and (coarse) mtime is still seen within a minute.
  dir.Write("token", "third!");
  clock.Advance(minutes(1));
  EXPECT_EQ(c.Current()->bearer_token, "third!");
}

TEST(Credentials, InvalidateForcesATokenFileReRead) {
  TempDir dir;
  dir.Write("token", "aaa");
  core::FakeClock clock(Start());
  RestConfig config;
  config.bearer_token_file = (dir.path() / "token").string();
  auto creds = Credentials::For(config, clock);
  ASSERT_TRUE(creds.ok());
  Credentials& c = **creds;
  AuthMaterial used = *c.Current();
  EXPECT_EQ(used.bearer_token, "aaa");
  dir.Write("token", "bbb");
  // A stale rejection of something we no longer hand out changes nothing...
  c.Invalidate(AuthMaterial{"zzz"});
  EXPECT_EQ(c.Current()->bearer_token, "aaa");
  // ...the real one re-reads at once, without waiting for the clock.
  c.Invalidate(used);
  EXPECT_EQ(c.Current()->bearer_token, "bbb");
}

TEST(Credentials, TokenFileFailuresFallBack) {
  TempDir dir;
  core::FakeClock clock(Start());
  RestConfig config;
  config.bearer_token_file = (dir.path() / "token").string();

  // Missing from the start, with nothing to fall back to: a configuration error.
  auto creds = Credentials::For(config, clock);
  ASSERT_FALSE(creds.ok());
  EXPECT_EQ(creds.status().reason(), core::Reason::kInvalid);
  EXPECT_NE(creds.status().message().find(config.bearer_token_file), std::string::npos);

  // With a static token it backs up the file.
  config.bearer_token = "static";
  creds = Credentials::For(config, clock);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  EXPECT_EQ((*creds)->Current()->bearer_token, "static");
  dir.Write("token", "from-file");
  clock.Advance(seconds(1));
  EXPECT_EQ((*creds)->Current()->bearer_token, "from-file");

  // Once read, a vanished or emptied file keeps the last good token.
  fs::remove(dir.path() / "token");
  clock.Advance(seconds(2));
  EXPECT_EQ((*creds)->Current()->bearer_token, "from-file");
  dir.Write("token", "  \n");
  clock.Advance(seconds(2));
  EXPECT_EQ((*creds)->Current()->bearer_token, "from-file");

  // An empty file with no fallback is refused.
  config.bearer_token.clear();
  auto empty = Credentials::For(config, clock);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
}

TEST(Credentials, ExecPluginResultIsCachedUntilItExpires) {
  TempDir dir;
  core::FakeClock clock(Start());
  RestConfig config;
  config.exec = Exec(CountingPlugin(dir));
  config.exec->env = {{"EXPIRY", "2030-01-01T00:10:00Z"}};
  auto creds = Credentials::For(config, clock);
  ASSERT_TRUE(creds.ok()) << creds.status().ToString();
  Credentials& c = **creds;
  EXPECT_TRUE(c.IsDynamic());
  auto m = c.Current();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->bearer_token, "token-1");
  clock.Advance(minutes(9));
  EXPECT_EQ(c.Current()->bearer_token, "token-1");
  EXPECT_EQ(Runs(dir), 1);
  clock.Advance(minutes(2));  // past expirationTimestamp
  EXPECT_EQ(c.Current()->bearer_token, "token-2");
  EXPECT_EQ(Runs(dir), 2);
}

TEST(Credentials, ExecPluginWithoutExpiryIsCachedUntilInvalidated) {
  TempDir dir;
  core::FakeClock clock(Start());
  RestConfig config;
  config.exec = Exec(CountingPlugin(dir));
  auto creds = Credentials::For(config, clock);
  ASSERT_TRUE(creds.ok());
  Credentials& c = **creds;
  AuthMaterial first = *c.Current();
  EXPECT_EQ(first.bearer_token, "token-1");
  clock.Advance(hours(24 * 365));
  EXPECT_EQ(c.Current()->bearer_token, "token-1");

  c.Invalidate();
  AuthMaterial second = *c.Current();
  EXPECT_EQ(second.bearer_token, "token-2");

  // Two requests rejected with the same old token: only a rejection of what is current now
  // causes another run.
  c.Invalidate(first);
  EXPECT_EQ(c.Current()->bearer_token, "token-2");
  c.Invalidate(second);
  EXPECT_EQ(c.Current()->bearer_token, "token-3");
  EXPECT_EQ(Runs(dir), 3);
}

TEST(Credentials, ConcurrentCallersShareOnePluginRun) {
  TempDir dir;
  RestConfig config;
  config.exec = Exec(CountingPlugin(dir));
  auto creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  std::vector<std::thread> threads;
  std::vector<std::string> tokens(8);
  for (size_t i = 0; i < tokens.size(); ++i) {
    threads.emplace_back([&, i] {
      auto m = (*creds)->Current();
      tokens[i] = m.ok() ? m->bearer_token : m.status().ToString();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& t : tokens) EXPECT_EQ(t, "token-1");
  EXPECT_EQ(Runs(dir), 1);
}

TEST(Credentials, ExecPluginGetsExecInfoArgsAndEnv) {
  TempDir dir;
  std::string out = (dir.path() / "seen").string();
  fs::path plugin =
      dir.Script("p.sh", "printf '%s\\n' \"$KUBERNETES_EXEC_INFO\" > '" + out +
                             "'\n"
                             "printf '%s|' \"$@\" >> '" +
                             out +
                             "'\n"
                             "printf '\\n%s\\n' \"$GREETING\" >> '" +
                             out +
                             "'\n"
                             "read line || echo stdin-empty >> '" +
                             out +
                             "'\n"
                             "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
                             "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n");
  RestConfig config;
  config.server = "https://api.example:6443";
  config.tls_server_name = "kube";
  config.ca_pem = "CA-PEM";
  config.exec = Exec(plugin);
  config.exec->api_version = "client.authentication.k8s.io/v1beta1";
  config.exec->args = {"get token", "--x"};
  config.exec->env = {{"GREETING", "hello world"}};
  config.exec->provide_cluster_info = true;
  auto creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  auto m = (*creds)->Current();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->bearer_token, "t");

  std::vector<std::string> lines;
  std::istringstream seen(dir.Read("seen"));
  for (std::string line; std::getline(seen, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u) << dir.Read("seen");
  auto info = machinery::ParseJson(lines[0]);
  ASSERT_TRUE(info.ok()) << lines[0];
  EXPECT_EQ((*info)["apiVersion"], "client.authentication.k8s.io/v1beta1");
  EXPECT_EQ((*info)["kind"], "ExecCredential");
  EXPECT_EQ((*info)["spec"]["interactive"], false);
  EXPECT_EQ((*info)["spec"]["cluster"]["server"], "https://api.example:6443");
  EXPECT_EQ((*info)["spec"]["cluster"]["tls-server-name"], "kube");
  EXPECT_EQ((*info)["spec"]["cluster"]["certificate-authority-data"], core::Base64Encode("CA-PEM"));
  EXPECT_EQ(lines[1], "get token|--x|");
  EXPECT_EQ(lines[2], "hello world");
  EXPECT_EQ(lines[3], "stdin-empty");

  // Without provideClusterInfo the spec carries no cluster.
  config.exec->provide_cluster_info = false;
  auto plain = Credentials::For(config);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->Current().ok());
  info = machinery::ParseJson(dir.Read("seen").substr(0, dir.Read("seen").find('\n')));
  ASSERT_TRUE(info.ok());
  EXPECT_FALSE((*info)["spec"].contains("cluster"));
}

TEST(Credentials, ExecPluginCertificateReplacesConfiguredOneAndStaticTokenWins) {
  TempDir dir;
  fs::path plugin = dir.Script(
      "p.sh",
      "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"plugin-token\",\"clientCertificateData\":\"PLUGIN-CERT\","
      "\"clientKeyData\":\"PLUGIN-KEY\"}}'\n");
  RestConfig config;
  config.exec = Exec(plugin);
  config.cert_pem = "OLD-CERT";
  config.key_pem = "OLD-KEY";
  auto creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  auto m = (*creds)->Current();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(*m, (AuthMaterial{"plugin-token", "PLUGIN-CERT", "PLUGIN-KEY", "", ""}));

  // A token set in the config wins over the plugin's, as in kubectl.
  config.bearer_token = "config-token";
  creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  m = (*creds)->Current();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->bearer_token, "config-token");
  EXPECT_EQ(m->cert_pem, "PLUGIN-CERT");
}

TEST(Credentials, ExecPluginFailuresAreClearErrors) {
  TempDir dir;
  struct Case {
    std::string name;
    std::string script;
    std::vector<std::string> want;  // substrings of the message
  };
  const std::string cred =
      R"({"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential")";
  const std::vector<Case> cases = {
      {"non-zero exit",
       "echo 'token expired, run login' >&2\nexit 3\n",
       {"failed with exit code 3", "token expired, run login", "brew install the-plugin"}},
      {"killed by a signal", "kill -9 $$\n", {"was killed by signal 9"}},
      {"bad JSON", "echo '{not json'\n", {"printed malformed ExecCredential JSON"}},
      {"JSON that is not an object", "echo '[1]'\n", {"not an ExecCredential object"}},
      {"wrong apiVersion",
       "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
       "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'\n",
       {"is configured to use API version client.authentication.k8s.io/v1, plugin returned "
        "version \"client.authentication.k8s.io/v1beta1\""}},
      {"wrong kind",
       "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"Pod\"}'\n",
       {"returned kind \"Pod\", expected \"ExecCredential\""}},
      {"no status", "echo '" + cred + "}'\n", {"didn't return a status field"}},
      {"no token or certificate",
       "echo '" + cred + ",\"status\":{}}'\n",
       {"didn't return a token or cert/key pair"}},
      {"certificate without key",
       "echo '" + cred + ",\"status\":{\"clientCertificateData\":\"C\"}}'\n",
       {"returned only certificate or key, not both"}},
      {"token of the wrong type",
       "echo '" + cred + ",\"status\":{\"token\":5}}'\n",
       {"non-string status.token"}},
      {"bad expiry",
       "echo '" + cred + ",\"status\":{\"token\":\"t\",\"expirationTimestamp\":\"soon\"}}'\n",
       {"invalid status.expirationTimestamp \"soon\""}},
  };
  int i = 0;
  for (const Case& c : cases) {
    RestConfig config;
    config.exec = Exec(dir.Script("p" + std::to_string(i++) + ".sh", c.script));
    config.exec->install_hint = "brew install the-plugin";
    auto creds = Credentials::For(config);
    ASSERT_TRUE(creds.ok()) << c.name;
    auto m = (*creds)->Current();
    ASSERT_FALSE(m.ok()) << c.name;
    EXPECT_EQ(m.status().reason(), core::Reason::kUnauthorized) << c.name;
    EXPECT_TRUE(m.status().message().starts_with("getting credentials: exec"))
        << m.status().message();
    for (const auto& want : c.want) {
      EXPECT_NE(m.status().message().find(want), std::string::npos)
          << c.name << "\n  got: " << m.status().message() << "\n  want: " << want;
    }
  }
}

TEST(Credentials, MissingExecutableSuggestsTheInstallHint) {
  TempDir dir;
  RestConfig config;
  config.exec = Exec("klutch-no-such-plugin-anywhere");
  config.exec->install_hint = "Install it with: apt install klutch-plugin";
  auto creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  auto m = (*creds)->Current();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().reason(), core::Reason::kUnauthorized);
  EXPECT_NE(m.status().message().find("executable \"klutch-no-such-plugin-anywhere\" not found"),
            std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("apt install klutch-plugin"), std::string::npos);

  // A file that exists but cannot be executed.
  config.exec = Exec(dir.Write("not-executable", "#!/bin/sh\n"));
  creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  m = (*creds)->Current();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("Permission denied"), std::string::npos)
      << m.status().message();
}

bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  // A killed process nobody has reaped yet is gone for our purposes.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  return close == std::string::npos || (close + 2 < line.size() && line[close + 2] == 'Z');
}

TEST(Credentials, SlowPluginIsKilledWithItsChildrenAtTheTimeout) {
  TempDir dir;
  std::string pid_file = (dir.path() / "child.pid").string();
  // The plugin's child keeps stdout open, so only killing the whole group ends the run.
  fs::path plugin = dir.Script("slow.sh", "sleep 300 &\necho $! > '" + pid_file + "'\nwait\n");
  RestConfig config;
  config.exec = Exec(plugin);
  config.exec->timeout = milliseconds(300);
  auto creds = Credentials::For(config);
  ASSERT_TRUE(creds.ok());
  auto m = (*creds)->Current();
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().reason(), core::Reason::kUnauthorized);
  EXPECT_NE(m.status().message().find("did not finish within 300ms and was killed"),
            std::string::npos)
      << m.status().message();
  std::string pid_text(core::Trim(dir.Read("child.pid")));
  auto pid = core::ParseInt64(pid_text);
  ASSERT_TRUE(pid.has_value()) << pid_text;
  auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (!ProcessGone(static_cast<pid_t>(*pid)) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(ProcessGone(static_cast<pid_t>(*pid))) << "the plugin's child survived";
}

TEST(Credentials, UnusableExecConfigIsRejectedUpFront) {
  struct Case {
    std::string name;
    std::function<void(ExecConfig&)> mutate;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"Always", [](ExecConfig& e) { e.interactive_mode = "Always"; },
       "interactiveMode Always needs a terminal"},
      {"unknown mode", [](ExecConfig& e) { e.interactive_mode = "Maybe"; },
       "exec.interactiveMode: Unsupported value: \"Maybe\""},
      {"old apiVersion",
       [](ExecConfig& e) { e.api_version = "client.authentication.k8s.io/v1alpha1"; },
       "exec.apiVersion: Unsupported value"},
      {"no command", [](ExecConfig& e) { e.command.clear(); }, "exec.command: Required value"},
      {"no timeout", [](ExecConfig& e) { e.timeout = milliseconds(0); }, "timeout"},
  };
  for (const Case& c : cases) {
    RestConfig config;
    config.exec = Exec("/bin/true");
    c.mutate(*config.exec);
    auto creds = Credentials::For(config);
    ASSERT_FALSE(creds.ok()) << c.name;
    EXPECT_EQ(creds.status().reason(), core::Reason::kInvalid) << c.name;
    EXPECT_NE(creds.status().message().find(c.want), std::string::npos)
        << c.name << ": " << creds.status().message();
  }
}

TEST(RunExecPlugin, ReturnsMaterialAndExpiry) {
  TempDir dir;
  fs::path plugin = dir.Script(
      "p.sh",
      "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
      "\"status\":{\"token\":\"abc\",\"expirationTimestamp\":\"2030-01-01T01:00:00+01:00\"}}'\n");
  auto r = RunExecPlugin(Exec(plugin), RestConfig{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->material.bearer_token, "abc");
  ASSERT_TRUE(r->expiry.has_value());
  EXPECT_EQ(*r->expiry, Start());
}

}  // namespace
}  // namespace klutch::client::credentials_test
