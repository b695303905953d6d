#include "client/kubeconfig.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::client {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

constexpr size_t kMaxConfigFileBytes = 64u << 20;

core::Status FieldError(std::string_view source, std::string_view field, std::string_view detail) {
  return core::Invalid(fmt::format("{}: {}: {}", source, field, detail));
}

std::string_view TypeName(const Json& v) {
  if (v.is_object()) return "a mapping";
  if (v.is_array()) return "a list";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  return "null";
}

// Reads the fields of one YAML mapping, turning type mismatches into errors that name the
// file and the field path. A null or absent field reads as its zero value, as in Go.
class FieldReader {
 public:
  FieldReader(const std::string& source, const fs::path& base_dir)
      : source_(source), base_dir_(base_dir) {}

  core::Status Error(std::string_view field, std::string_view detail) const {
    return FieldError(source_, field, detail);
  }

  // `obj[key]` when present and not null, else nullptr. `obj` must be an object.
  static const Json* Get(const Json& obj, std::string_view key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  core::Status Object(const Json& v, const std::string& field) const {
    if (!v.is_object() && !v.is_null()) {
      return Error(field, fmt::format("must be a mapping, not {}", TypeName(v)));
    }
    return core::Status::Ok();
  }

  core::Status String(const Json& obj, std::string_view key, const std::string& field,
                      std::string& out) const {
    const Json* v = Get(obj, key);
    if (v == nullptr) return core::Status::Ok();
    const auto* text = v->get_ptr<const std::string*>();
    if (text == nullptr) {
      return Error(Join(field, key), fmt::format("must be a string, not {}", TypeName(*v)));
    }
    out = *text;
    return core::Status::Ok();
  }

  core::Status Bool(const Json& obj, std::string_view key, const std::string& field,
                    bool& out) const {
    const Json* v = Get(obj, key);
    if (v == nullptr) return core::Status::Ok();
    const bool* value = v->get_ptr<const bool*>();
    if (value == nullptr) {
      return Error(Join(field, key), fmt::format("must be a boolean, not {}", TypeName(*v)));
    }
    out = *value;
    return core::Status::Ok();
  }

  // A []byte field: base64 in the file (line breaks ignored, as Go's decoder does).
  core::Status Base64(const Json& obj, std::string_view key, const std::string& field,
                      std::string& out) const {
    std::string text;
    KLUTCH_RETURN_IF_ERROR(String(obj, key, field, text));
    std::string compact;
    compact.reserve(text.size());
    for (char c : text) {
      if (c != '\n' && c != '\r') compact += c;
    }
    // Go's standard encoding insists on padding; so do we, to accept exactly what kubectl does.
    auto decoded = compact.size() % 4 == 0 ? core::Base64Decode(compact) : std::nullopt;
    if (!decoded) return Error(Join(field, key), "illegal base64 data");
    out = std::move(*decoded);
    return core::Status::Ok();
  }

  // A file reference: relative paths are relative to the directory of the defining file.
  core::Status Path(const Json& obj, std::string_view key, const std::string& field,
                    std::string& out) const {
    std::string text;
    KLUTCH_RETURN_IF_ERROR(String(obj, key, field, text));
    out = Resolve(text);
    return core::Status::Ok();
  }

  std::string Resolve(const std::string& path) const {
    if (path.empty() || fs::path(path).is_absolute() || base_dir_.empty()) return path;
    return (base_dir_ / path).lexically_normal().string();
  }

  core::Status StringList(const Json& obj, std::string_view key, const std::string& field,
                          std::vector<std::string>& out) const {
    const Json* v = Get(obj, key);
    if (v == nullptr) return core::Status::Ok();
    std::string path = Join(field, key);
    if (!v->is_array()) return Error(path, fmt::format("must be a list, not {}", TypeName(*v)));
    out.clear();
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& item = (*v)[i];
      const auto* text = item.get_ptr<const std::string*>();
      if (text == nullptr) {
        return Error(fmt::format("{}[{}]", path, i),
                     fmt::format("must be a string, not {}", TypeName(item)));
      }
      out.push_back(*text);
    }
    return core::Status::Ok();
  }

  static std::string Join(std::string_view field, std::string_view key) {
    return field.empty() ? std::string(key) : fmt::format("{}.{}", field, key);
  }

  const std::string& source() const { return source_; }

 private:
  const std::string& source_;
  const fs::path& base_dir_;
};

core::Status ParseCluster(const FieldReader& r, const Json& v, const std::string& field,
                          KubeconfigCluster& c) {
  KLUTCH_RETURN_IF_ERROR(r.Object(v, field));
  if (v.is_null()) return core::Status::Ok();
  KLUTCH_RETURN_IF_ERROR(r.String(v, "server", field, c.server));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "tls-server-name", field, c.tls_server_name));
  KLUTCH_RETURN_IF_ERROR(r.Bool(v, "insecure-skip-tls-verify", field, c.insecure_skip_tls_verify));
  KLUTCH_RETURN_IF_ERROR(r.Path(v, "certificate-authority", field, c.certificate_authority));
  KLUTCH_RETURN_IF_ERROR(
      r.Base64(v, "certificate-authority-data", field, c.certificate_authority_data));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "proxy-url", field, c.proxy_url));
  KLUTCH_RETURN_IF_ERROR(r.Bool(v, "disable-compression", field, c.disable_compression));
  return core::Status::Ok();
}

core::Status ParseExec(const FieldReader& r, const Json& v, const std::string& field,
                       ExecConfig& e) {
  KLUTCH_RETURN_IF_ERROR(r.Object(v, field));
  if (v.is_null()) return core::Status::Ok();
  KLUTCH_RETURN_IF_ERROR(r.String(v, "apiVersion", field, e.api_version));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "command", field, e.command));
  // A relative command with a path separator is relative to the kubeconfig, like any file
  // reference; a bare name is looked up in $PATH when it runs.
  if (e.command.find('/') != std::string::npos) e.command = r.Resolve(e.command);
  KLUTCH_RETURN_IF_ERROR(r.StringList(v, "args", field, e.args));
  if (const Json* env = FieldReader::Get(v, "env")) {
    std::string env_field = FieldReader::Join(field, "env");
    if (!env->is_array()) {
      return r.Error(env_field, fmt::format("must be a list, not {}", TypeName(*env)));
    }
    for (size_t i = 0; i < env->size(); ++i) {
      std::string item_field = fmt::format("{}[{}]", env_field, i);
      const Json& item = (*env)[i];
      if (!item.is_object()) {
        return r.Error(item_field, fmt::format("must be a mapping, not {}", TypeName(item)));
      }
      std::string name, value;
      KLUTCH_RETURN_IF_ERROR(r.String(item, "name", item_field, name));
      KLUTCH_RETURN_IF_ERROR(r.String(item, "value", item_field, value));
      e.env.emplace_back(std::move(name), std::move(value));
    }
  }
  KLUTCH_RETURN_IF_ERROR(r.Bool(v, "provideClusterInfo", field, e.provide_cluster_info));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "interactiveMode", field, e.interactive_mode));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "installHint", field, e.install_hint));
  return core::Status::Ok();
}

core::Status ParseUser(const FieldReader& r, const Json& v, const std::string& field,
                       KubeconfigUser& u) {
  KLUTCH_RETURN_IF_ERROR(r.Object(v, field));
  if (v.is_null()) return core::Status::Ok();
  KLUTCH_RETURN_IF_ERROR(r.Path(v, "client-certificate", field, u.client_certificate));
  KLUTCH_RETURN_IF_ERROR(r.Base64(v, "client-certificate-data", field, u.client_certificate_data));
  KLUTCH_RETURN_IF_ERROR(r.Path(v, "client-key", field, u.client_key));
  KLUTCH_RETURN_IF_ERROR(r.Base64(v, "client-key-data", field, u.client_key_data));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "token", field, u.token));
  KLUTCH_RETURN_IF_ERROR(r.Path(v, "tokenFile", field, u.token_file));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "username", field, u.username));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "password", field, u.password));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "as", field, u.impersonate));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "as-uid", field, u.impersonate_uid));
  KLUTCH_RETURN_IF_ERROR(r.StringList(v, "as-groups", field, u.impersonate_groups));
  if (const Json* extra = FieldReader::Get(v, "as-user-extra")) {
    KLUTCH_RETURN_IF_ERROR(r.Object(*extra, FieldReader::Join(field, "as-user-extra")));
    u.has_impersonate_user_extra = !extra->empty();
  }
  if (const Json* provider = FieldReader::Get(v, "auth-provider")) {
    std::string provider_field = FieldReader::Join(field, "auth-provider");
    KLUTCH_RETURN_IF_ERROR(r.Object(*provider, provider_field));
    KLUTCH_RETURN_IF_ERROR(r.String(*provider, "name", provider_field, u.auth_provider));
    u.has_auth_provider = true;
  }
  if (const Json* exec = FieldReader::Get(v, "exec")) {
    u.exec.emplace();
    KLUTCH_RETURN_IF_ERROR(ParseExec(r, *exec, FieldReader::Join(field, "exec"), *u.exec));
  }
  return core::Status::Ok();
}

core::Status ParseContext(const FieldReader& r, const Json& v, const std::string& field,
                          KubeconfigContext& c) {
  KLUTCH_RETURN_IF_ERROR(r.Object(v, field));
  if (v.is_null()) return core::Status::Ok();
  KLUTCH_RETURN_IF_ERROR(r.String(v, "cluster", field, c.cluster));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "user", field, c.user));
  KLUTCH_RETURN_IF_ERROR(r.String(v, "namespace", field, c.namespace_));
  return core::Status::Ok();
}

// Parses one of the named lists (clusters, users, contexts) into `out`, keyed by name.
// Entries must be named, and a name may appear once per file (Go's conversion refuses
// duplicates).
template <typename Entry, typename ParseFn>
core::Status ParseNamedList(const FieldReader& r, const Json& root, std::string_view list,
                            std::string_view inner, std::map<std::string, Entry>& out,
                            ParseFn parse) {
  const Json* items = FieldReader::Get(root, list);
  if (items == nullptr) return core::Status::Ok();
  if (!items->is_array()) {
    return r.Error(list, fmt::format("must be a list, not {}", TypeName(*items)));
  }
  for (size_t i = 0; i < items->size(); ++i) {
    std::string item_field = fmt::format("{}[{}]", list, i);
    const Json& item = (*items)[i];
    if (!item.is_object()) {
      return r.Error(item_field, fmt::format("must be a mapping, not {}", TypeName(item)));
    }
    std::string name;
    KLUTCH_RETURN_IF_ERROR(r.String(item, "name", item_field, name));
    if (name.empty()) return r.Error(item_field + ".name", "Required value");
    if (out.contains(name)) {
      return r.Error(item_field + ".name", fmt::format("Duplicate value: \"{}\"", name));
    }
    Entry entry;
    entry.source = r.source();
    entry.field = FieldReader::Join(item_field, inner);
    const Json* body = FieldReader::Get(item, inner);
    KLUTCH_RETURN_IF_ERROR(parse(r, body ? *body : Json(), entry.field, entry));
    out.emplace(std::move(name), std::move(entry));
  }
  return core::Status::Ok();
}

// A lowercase RFC 1123 label, as namespaces must be.
bool IsDns1123Label(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && !(c == '-' && i > 0 && i + 1 < s.size())) return false;
  }
  return true;
}

// kubectl accepts "host:port" without a scheme: https when TLS settings are present, else
// http. The result has no trailing slash, query or fragment. Empty result: `why` says why.
std::string NormalizeServer(std::string_view server, bool tls_configured, std::string& why) {
  std::string url(core::Trim(server));
  if (url.find("://") == std::string::npos) {
    url = (tls_configured ? "https://" : "http://") + url;
  }
  size_t scheme_end = url.find("://");
  std::string scheme = core::ToLower(std::string_view(url).substr(0, scheme_end));
  if (scheme != "https" && scheme != "http") {
    why = fmt::format("unsupported scheme \"{}\" (want https or http)", scheme);
    return "";
  }
  std::string_view rest = std::string_view(url).substr(scheme_end + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    why = "a query or fragment is not allowed";
    return "";
  }
  size_t path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  std::string_view path = path_start == std::string_view::npos ? "" : rest.substr(path_start);
  if (authority.find('@') != std::string_view::npos) {
    why = "user information is not allowed in the URL";
    return "";
  }
  std::string_view host = authority;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      why = "unterminated IPv6 address";
      return "";
    }
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') {
        why = "unexpected characters after the IPv6 address";
        return "";
      }
      port = after.substr(1);
      if (port.empty()) {
        why = "empty port";
        return "";
      }
    }
  } else if (size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) {
      why = "empty port";
      return "";
    }
  }
  if (host.empty() || host == "[]") {
    why = "no host";
    return "";
  }
  for (char c : host) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '\\' || c == '"') {
      why = "invalid character in host";
      return "";
    }
  }
  if (!port.empty()) {
    auto n = core::ParseInt64(port);
    if (!n || *n < 1 || *n > 65535) {
      why = fmt::format("invalid port \"{}\"", port);
      return "";
    }
  }
  for (char c : path) {
    if (static_cast<unsigned char>(c) <= ' ') {
      why = "invalid character in path";
      return "";
    }
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  return fmt::format("{}://{}{}", scheme, authority, path);
}

core::Result<std::string> ReadReferencedFile(const std::string& source, const std::string& field,
                                             const std::string& path) {
  auto content = ReadConfigFile(path);
  if (!content.ok()) return FieldError(source, field, content.status().message());
  return content;
}

core::Status ResolveCluster(const std::string& name, const KubeconfigCluster& c, RestConfig& out) {
  const std::string& src = c.source;
  if (c.server.empty()) {
    return FieldError(src, c.field + ".server",
                      fmt::format("Required value: cluster \"{}\" has no server", name));
  }
  if (!c.proxy_url.empty()) {
    return FieldError(src, c.field + ".proxy-url",
                      fmt::format("proxy-url is not supported (cluster \"{}\")", name));
  }
  if (!c.certificate_authority.empty() && !c.certificate_authority_data.empty()) {
    return FieldError(src, c.field,
                      "certificate-authority-data and certificate-authority are both specified");
  }
  bool has_ca = !c.certificate_authority.empty() || !c.certificate_authority_data.empty();
  if (c.insecure_skip_tls_verify && has_ca) {
    return FieldError(src, c.field + ".insecure-skip-tls-verify",
                      "specifying a root certificates file with the insecure flag is not allowed");
  }
  std::string why;
  out.server = NormalizeServer(c.server, has_ca || c.insecure_skip_tls_verify, why);
  if (out.server.empty()) {
    return FieldError(src, c.field + ".server",
                      fmt::format("Invalid value: \"{}\": {}", c.server, why));
  }
  out.tls_server_name = c.tls_server_name;
  out.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
  out.disable_compression = c.disable_compression;
  if (!c.certificate_authority_data.empty()) {
    out.ca_pem = c.certificate_authority_data;
  } else if (!c.certificate_authority.empty()) {
    KLUTCH_ASSIGN_OR_RETURN(out.ca_pem, ReadReferencedFile(src, c.field + ".certificate-authority",
                                                           c.certificate_authority));
  }
  return core::Status::Ok();
}

core::Status ValidateExec(const std::string& name, const KubeconfigUser& u, RestConfig& out) {
  const ExecConfig& e = *u.exec;
  const std::string field = u.field + ".exec";
  const std::string& src = u.source;
  if (u.has_auth_provider) {
    return FieldError(src, u.field,
                      "auth-provider cannot be provided in combination with an exec plugin");
  }
  if (e.command.empty()) {
    return FieldError(src, field + ".command",
                      fmt::format("Required value: user \"{}\" uses an exec plugin", name));
  }
  if (e.api_version.empty()) {
    return FieldError(src, field + ".apiVersion",
                      fmt::format("Required value: user \"{}\" uses an exec plugin", name));
  }
  if (e.api_version != kExecV1 && e.api_version != kExecV1Beta1) {
    return FieldError(src, field + ".apiVersion",
                      fmt::format("Unsupported value: \"{}\": supported values: \"{}\", \"{}\"",
                                  e.api_version, kExecV1, kExecV1Beta1));
  }
  for (size_t i = 0; i < e.env.size(); ++i) {
    if (e.env[i].first.empty()) {
      return FieldError(src, fmt::format("{}.env[{}].name", field, i), "Required value");
    }
  }
  out.exec = e;
  std::string& mode = out.exec->interactive_mode;
  if (mode.empty()) {
    // v1 made the field required; v1beta1 defaulted it.
    if (e.api_version == kExecV1) {
      return FieldError(src, field + ".interactiveMode",
                        "Required value: interactiveMode must be specified for "
                        "client.authentication.k8s.io/v1 (Never or IfAvailable)");
    }
    mode = "IfAvailable";
  }
  if (mode == "Always") {
    return FieldError(src, field + ".interactiveMode",
                      "interactiveMode Always needs a terminal for the plugin, and klutch never "
                      "gives plugins one; use Never or IfAvailable");
  }
  if (mode != "Never" && mode != "IfAvailable") {
    return FieldError(src, field + ".interactiveMode",
                      fmt::format("Unsupported value: \"{}\": supported values: \"Never\", "
                                  "\"IfAvailable\", \"Always\"",
                                  mode));
  }
  return core::Status::Ok();
}

core::Status ResolveUser(const std::string& name, const KubeconfigUser& u, RestConfig& out) {
  const std::string& src = u.source;
  if (u.has_auth_provider && !u.exec) {
    return FieldError(
        src, u.field + ".auth-provider",
        fmt::format("auth-provider \"{}\" is not supported; use an exec credential plugin",
                    u.auth_provider));
  }
  if (!u.token.empty() && (!u.username.empty() || !u.password.empty())) {
    return FieldError(src, u.field,
                      fmt::format("more than one authentication method found for user \"{}\"; "
                                  "found [token basicAuth], only one is allowed",
                                  name));
  }
  if ((!u.impersonate_groups.empty() || u.has_impersonate_user_extra) && u.impersonate.empty()) {
    return FieldError(src, u.field,
                      "requesting groups or user-extra without impersonating a user (as)");
  }
  bool has_cert = !u.client_certificate.empty() || !u.client_certificate_data.empty();
  if (has_cert) {
    if (!u.client_certificate.empty() && !u.client_certificate_data.empty()) {
      return FieldError(src, u.field,
                        "client-certificate-data and client-certificate are both specified");
    }
    if (!u.client_key.empty() && !u.client_key_data.empty()) {
      return FieldError(src, u.field, "client-key-data and client-key are both specified");
    }
    if (u.client_key.empty() && u.client_key_data.empty()) {
      return FieldError(src, u.field + ".client-key",
                        "Required value: client-key-data or client-key must be specified to "
                        "use the client certificate");
    }
    if (!u.client_certificate_data.empty()) {
      out.cert_pem = u.client_certificate_data;
    } else {
      KLUTCH_ASSIGN_OR_RETURN(out.cert_pem, ReadReferencedFile(src, u.field + ".client-certificate",
                                                               u.client_certificate));
    }
    if (!u.client_key_data.empty()) {
      out.key_pem = u.client_key_data;
    } else {
      KLUTCH_ASSIGN_OR_RETURN(out.key_pem,
                              ReadReferencedFile(src, u.field + ".client-key", u.client_key));
    }
  }
  out.bearer_token = u.token;
  if (!u.token_file.empty()) {
    out.bearer_token_file = u.token_file;
    // kubectl reads the file up front: an unreadable one is a configuration error now rather
    // than a 401 later. The value read backs up the file while it rotates.
    KLUTCH_ASSIGN_OR_RETURN(std::string token,
                            ReadReferencedFile(src, u.field + ".tokenFile", u.token_file));
    if (out.bearer_token.empty()) out.bearer_token = std::string(core::Trim(token));
  }
  out.username = u.username;
  out.password = u.password;
  out.impersonate_user = u.impersonate;
  out.impersonate_uid = u.impersonate_uid;
  out.impersonate_groups = u.impersonate_groups;
  if (u.exec) KLUTCH_RETURN_IF_ERROR(ValidateExec(name, u, out));
  return core::Status::Ok();
}

std::string FileList(const std::vector<std::string>& files) {
  return files.empty() ? std::string("(no files)") : core::Join(files, ", ");
}

}  // namespace

void Kubeconfig::Merge(const Kubeconfig& later) {
  for (const auto& [name, c] : later.clusters) clusters.emplace(name, c);
  for (const auto& [name, u] : later.users) users.emplace(name, u);
  for (const auto& [name, c] : later.contexts) contexts.emplace(name, c);
  if (current_context.empty() && !later.current_context.empty()) {
    current_context = later.current_context;
    current_context_source = later.current_context_source;
  }
  files.insert(files.end(), later.files.begin(), later.files.end());
}

core::Result<std::string> ReadConfigFile(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = fmt::format("unable to read \"{}\": {}", path.string(), std::strerror(err));
    return err == ENOENT ? core::NotFound(std::move(msg)) : core::Invalid(std::move(msg));
  }
  std::string out;
  struct stat st {};
  core::Status status;
  if (::fstat(fd, &st) != 0) {
    status = core::Invalid(
        fmt::format("unable to read \"{}\": {}", path.string(), std::strerror(errno)));
  } else if (S_ISDIR(st.st_mode)) {
    status = core::Invalid(fmt::format("unable to read \"{}\": is a directory", path.string()));
  } else {
    char buf[16384];
    while (true) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        status = core::Invalid(
            fmt::format("unable to read \"{}\": {}", path.string(), std::strerror(errno)));
        break;
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > kMaxConfigFileBytes) {
        status = core::Invalid(fmt::format("unable to read \"{}\": larger than {} bytes",
                                           path.string(), kMaxConfigFileBytes));
        break;
      }
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return out;
}

core::Result<Kubeconfig> ParseKubeconfig(std::string_view text, const std::string& source,
                                         const std::filesystem::path& base_dir) {
  try {
    auto parsed = machinery::ParseYaml(text);
    if (!parsed.ok()) {
      core::Status status = parsed.status();
      status.Annotate(source);
      return status;
    }
    const Json& root = *parsed;
    Kubeconfig config;
    config.files.push_back(source);
    if (root.is_null()) return config;  // an empty file is an empty config, as for kubectl
    FieldReader r(source, base_dir);
    if (!root.is_object()) {
      return core::Invalid(fmt::format("{}: not a kubeconfig: the document is {}, not a mapping",
                                       source, TypeName(root)));
    }
    std::string kind, api_version;
    KLUTCH_RETURN_IF_ERROR(r.String(root, "kind", "", kind));
    KLUTCH_RETURN_IF_ERROR(r.String(root, "apiVersion", "", api_version));
    if (!kind.empty() && kind != "Config") {
      return r.Error("kind", fmt::format("Unsupported value: \"{}\": must be \"Config\"", kind));
    }
    if (!api_version.empty() && api_version != "v1") {
      return r.Error("apiVersion",
                     fmt::format("Unsupported value: \"{}\": must be \"v1\"", api_version));
    }
    KLUTCH_RETURN_IF_ERROR(
        ParseNamedList(r, root, "clusters", "cluster", config.clusters, ParseCluster));
    KLUTCH_RETURN_IF_ERROR(ParseNamedList(r, root, "users", "user", config.users, ParseUser));
    KLUTCH_RETURN_IF_ERROR(
        ParseNamedList(r, root, "contexts", "context", config.contexts, ParseContext));
    KLUTCH_RETURN_IF_ERROR(r.String(root, "current-context", "", config.current_context));
    if (!config.current_context.empty()) config.current_context_source = source;
    return config;
  } catch (const std::exception& e) {
    // Json accessors are type-checked above; this is a last line of defence.
    return core::Invalid(fmt::format("{}: unable to read kubeconfig: {}", source, e.what()));
  }
}

core::Result<RestConfig> ResolveKubeconfig(const Kubeconfig& config,
                                           const KubeconfigOptions& options) {
  try {
    RestConfig out;
    const KubeconfigContext* context = nullptr;
    std::string context_name = options.context.empty() ? config.current_context : options.context;
    if (!context_name.empty()) {
      auto it = config.contexts.find(context_name);
      if (it == config.contexts.end()) {
        if (!options.context.empty()) {
          return core::Invalid(fmt::format("context \"{}\" does not exist in {}", context_name,
                                           FileList(config.files)));
        }
        return FieldError(config.current_context_source, "current-context",
                          fmt::format("context \"{}\" does not exist", context_name));
      }
      context = &it->second;
      out.context_name = context_name;
    } else if (options.cluster.empty()) {
      if (config.clusters.empty() && config.contexts.empty() && config.users.empty()) {
        return core::Invalid(
            fmt::format("invalid configuration: no configuration has been provided (read {})",
                        FileList(config.files)));
      }
      return core::Invalid(
          fmt::format("no context chosen: current-context is not set in {} and no context "
                      "was given",
                      FileList(config.files)));
    }

    // Cluster: the override, else the context's.
    std::string cluster_name =
        options.cluster.empty() && context ? context->cluster : options.cluster;
    if (cluster_name.empty()) {
      return FieldError(
          context->source, context->field + ".cluster",
          fmt::format("Required value: context \"{}\" names no cluster", context_name));
    }
    auto cluster = config.clusters.find(cluster_name);
    if (cluster == config.clusters.end()) {
      if (!options.cluster.empty()) {
        return core::Invalid(
            fmt::format("cluster \"{}\" (given as an override) does not exist "
                        "in {}",
                        cluster_name, FileList(config.files)));
      }
      return FieldError(
          context->source, context->field + ".cluster",
          fmt::format("cluster \"{}\" not found for context \"{}\"", cluster_name, context_name));
    }
    KLUTCH_RETURN_IF_ERROR(ResolveCluster(cluster_name, cluster->second, out));

    // User: the override, else the context's; none at all means anonymous.
    std::string user_name = options.user.empty() && context ? context->user : options.user;
    if (!user_name.empty()) {
      auto user = config.users.find(user_name);
      if (user == config.users.end()) {
        if (!options.user.empty()) {
          return core::Invalid(
              fmt::format("user \"{}\" (given as an override) does not exist in {}", user_name,
                          FileList(config.files)));
        }
        return FieldError(
            context->source, context->field + ".user",
            fmt::format("user \"{}\" not found for context \"{}\"", user_name, context_name));
      }
      KLUTCH_RETURN_IF_ERROR(ResolveUser(user_name, user->second, out));
    }

    if (!options.namespace_.empty()) {
      if (!IsDns1123Label(options.namespace_)) {
        return core::Invalid(
            fmt::format("namespace override \"{}\" is not a valid namespace "
                        "name (a lowercase RFC 1123 label)",
                        options.namespace_));
      }
      out.namespace_ = options.namespace_;
    } else if (context && !context->namespace_.empty()) {
      if (!IsDns1123Label(context->namespace_)) {
        return FieldError(context->source, context->field + ".namespace",
                          fmt::format("Invalid value: \"{}\": a lowercase RFC 1123 label must "
                                      "consist of lower case alphanumeric characters or '-'",
                                      context->namespace_));
      }
      out.namespace_ = context->namespace_;
    } else {
      out.namespace_ = "default";
    }
    return out;
  } catch (const std::exception& e) {
    return core::Internal(fmt::format("resolving kubeconfig: {}", e.what()));
  }
}

core::Result<RestConfig> LoadKubeconfig(const KubeconfigOptions& options) {
  try {
    const bool explicit_paths = !options.paths.empty();
    std::vector<fs::path> paths = options.paths;
    auto env = [&](const char* name) -> std::string {
      const char* v = options.getenv ? options.getenv(name) : nullptr;
      return v ? std::string(v) : std::string();
    };
    if (!explicit_paths) {
      if (std::string list = env("KUBECONFIG"); !list.empty()) {
        for (std::string_view p : core::SplitNonEmpty(list, ':')) paths.emplace_back(p);
      } else if (std::string home = env("HOME"); !home.empty()) {
        paths.push_back(fs::path(home) / ".kube" / "config");
      }
    }
    Kubeconfig merged;
    std::vector<std::string> looked;
    for (const fs::path& path : paths) {
      if (path.empty()) continue;
      looked.push_back(path.string());
      auto text = ReadConfigFile(path);
      if (!text.ok()) {
        // kubectl skips missing files in $KUBECONFIG; a file named explicitly must exist.
        if (!explicit_paths && core::IsNotFound(text.status())) continue;
        return text.status();
      }
      std::error_code ec;
      fs::path absolute = fs::absolute(path, ec);
      fs::path base_dir = ec ? path.parent_path() : absolute.parent_path();
      KLUTCH_ASSIGN_OR_RETURN(Kubeconfig parsed, ParseKubeconfig(*text, path.string(), base_dir));
      merged.Merge(parsed);
    }
    if (merged.files.empty()) {
      return core::Invalid(fmt::format(
          "invalid configuration: no configuration has been provided: no kubeconfig file found "
          "(looked for {}; set KUBECONFIG or create ~/.kube/config)",
          looked.empty() ? std::string("nothing: neither KUBECONFIG nor HOME is set")
                         : core::Join(looked, ", ")));
    }
    return ResolveKubeconfig(merged, options);
  } catch (const std::exception& e) {
    return core::Internal(fmt::format("loading kubeconfig: {}", e.what()));
  }
}

}  // namespace klutch::client
