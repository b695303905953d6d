// Client configuration: kubectl's kubeconfig files, loaded and merged by kubectl's rules and
// resolved, for one context, into a RestConfig (everything needed to reach and authenticate to
// one API server).
//
// ParseKubeconfig turns one file's text into a Kubeconfig, checking structure (types, base64)
// and remembering for every entry which file and list index defined it, so later errors read
// "/home/me/.kube/config: users[0].user.client-key: ...". LoadKubeconfig finds the files
// ($KUBECONFIG or ~/.kube/config), merges them (the first file to define a name wins) and
// resolves the chosen context: files it references are read then, and only the chosen
// cluster/user/context are validated, as kubectl does. Errors are Statuses (kInvalid for
// configuration problems, kBadRequest for malformed YAML, kNotFound for a named file that is
// missing); nothing here throws. All functions are thread-safe; the structs are plain values.
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace klutch::client {

// The apiVersions of client.authentication.k8s.io an exec plugin may speak.
inline constexpr std::string_view kExecV1 = "client.authentication.k8s.io/v1";
inline constexpr std::string_view kExecV1Beta1 = "client.authentication.k8s.io/v1beta1";

// users[].user.exec of a kubeconfig: a credential plugin (client.authentication.k8s.io).
struct ExecConfig {
  std::string api_version;  // client.authentication.k8s.io/v1 (v1beta1 accepted too)
  std::string command;      // looked up in $PATH unless it contains a '/'
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  bool provide_cluster_info = false;
  std::string interactive_mode;  // Never | IfAvailable | Always (we never have a TTY: Always fails)
  std::string install_hint;
  // How long one run may take before the plugin (and its process group) is killed.
  std::chrono::milliseconds timeout{60000};
};

// Everything needed to reach and authenticate to one API server.
struct RestConfig {
  std::string server;  // "https://host:port" (optional path prefix, never a trailing '/')
  std::string tls_server_name;
  bool insecure_skip_tls_verify = false;
  std::string ca_pem;              // from certificate-authority-data or the file
  std::string cert_pem, key_pem;   // from client-certificate(-data)/client-key(-data)
  std::string bearer_token;        // from token
  std::string bearer_token_file;   // from tokenFile; re-read as it rotates
  std::optional<ExecConfig> exec;  // credentials come from this plugin when set
  std::string username, password;  // basic auth, passed through
  std::string namespace_;          // the context's namespace, "default" when unset
  std::string context_name;        // which context this came from ("" for in-cluster)
  std::string user_agent = "klutch";
  double qps = 20;
  int burst = 30;
  std::chrono::milliseconds timeout{30000};
  // Passed through from the kubeconfig for the REST client to honour.
  bool disable_compression = false;
  std::string impersonate_user;                 // users[].user.as: sent as Impersonate-User
  std::string impersonate_uid;                  // as-uid: Impersonate-Uid
  std::vector<std::string> impersonate_groups;  // as-groups: Impersonate-Group (repeated)
};

// Which kubeconfig files to read and which parts of them to use.
struct KubeconfigOptions {
  // Empty: $KUBECONFIG (split on ':', empty entries and missing files skipped), else
  // ~/.kube/config (skipped when missing). Given explicitly, every path must exist.
  std::vector<std::filesystem::path> paths;
  std::string context;                    // override current-context
  std::string cluster, user, namespace_;  // overrides, like kubectl --cluster/--user/--namespace
  // Environment lookup for KUBECONFIG and HOME (tests inject a fake).
  std::function<const char*(const char*)> getenv = ::getenv;
};

// clusters[].cluster, with file references already made absolute and *-data decoded.
struct KubeconfigCluster {
  std::string server;
  std::string tls_server_name;
  bool insecure_skip_tls_verify = false;
  std::string certificate_authority;       // a path
  std::string certificate_authority_data;  // PEM bytes
  std::string proxy_url;
  bool disable_compression = false;
  std::string source;  // the file that defined it
  std::string field;   // its place in that file: "clusters[2].cluster"
};

// users[].user (Go calls these AuthInfos).
struct KubeconfigUser {
  std::string client_certificate, client_certificate_data;  // path; PEM bytes
  std::string client_key, client_key_data;                  // path; PEM bytes
  std::string token;
  std::string token_file;  // a path
  std::string username, password;
  std::string impersonate, impersonate_uid;  // as, as-uid
  std::vector<std::string> impersonate_groups;
  bool has_impersonate_user_extra = false;
  std::optional<ExecConfig> exec;  // command made absolute when it is a relative path with '/'
  std::string auth_provider;       // auth-provider.name when set (not supported)
  bool has_auth_provider = false;
  std::string source;
  std::string field;  // "users[0].user"
};

// contexts[].context.
struct KubeconfigContext {
  std::string cluster;
  std::string user;
  std::string namespace_;
  std::string source;
  std::string field;  // "contexts[1].context"
};

// One kubeconfig file, or several merged.
struct Kubeconfig {
  std::map<std::string, KubeconfigCluster> clusters;
  std::map<std::string, KubeconfigUser> users;  // authInfos
  std::map<std::string, KubeconfigContext> contexts;
  std::string current_context;
  std::string current_context_source;  // the file that set current-context
  std::vector<std::string> files;      // every file merged in, in order

  // Merges `later` into this config by kubectl's rule: a name already defined here keeps its
  // definition, and current-context stays as it is unless it is still unset.
  void Merge(const Kubeconfig& later);
};

// Loads and merges kubeconfig files the way kubectl does, resolves one context to a RestConfig.
// No usable file, no context chosen, a missing context/cluster/user, a cluster without a
// server, unreadable referenced files, conflicting settings -> kInvalid naming the file and
// field; an explicitly given path that does not exist -> kNotFound.
core::Result<RestConfig> LoadKubeconfig(const KubeconfigOptions& options = {});

// Parses one file's text; `source` names the file in errors. Relative file references are
// resolved against `base_dir`. Malformed YAML -> kBadRequest; wrong field types, bad base64,
// duplicate or missing names -> kInvalid naming `source` and the field.
core::Result<Kubeconfig> ParseKubeconfig(std::string_view text, const std::string& source,
                                         const std::filesystem::path& base_dir);

// Resolves the context chosen by `options` (context/cluster/user/namespace_ overrides; paths
// and getenv are not used) in an already merged config into a RestConfig, reading the
// certificate, key and CA files it references. Errors as LoadKubeconfig.
core::Result<RestConfig> ResolveKubeconfig(const Kubeconfig& config,
                                           const KubeconfigOptions& options = {});

// Reads a whole (small, at most 64 MiB) file the config references. Missing -> kNotFound,
// other failures -> kInvalid; the message names the path and the OS error.
core::Result<std::string> ReadConfigFile(const std::filesystem::path& path);

}  // namespace klutch::client
