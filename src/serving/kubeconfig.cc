#include "serving/kubeconfig.h"

#include <fmt/format.h>

#include "core/file.h"
#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::serving {

std::string KubeconfigYaml(const KubeconfigSpec& spec) {
  // Values are written as JSON strings, which YAML reads as double-quoted scalars.
  auto q = [](const std::string& v) { return machinery::Dump(machinery::Json(v)); };
  std::string out = "apiVersion: v1\nkind: Config\nclusters:\n";
  out += fmt::format("- name: {}\n  cluster:\n    server: {}\n", q(spec.name), q(spec.server));
  if (!spec.ca_pem.empty()) {
    out += fmt::format("    certificate-authority-data: {}\n", core::Base64Encode(spec.ca_pem));
  }
  if (!spec.tls_server_name.empty()) {
    out += fmt::format("    tls-server-name: {}\n", q(spec.tls_server_name));
  }
  out += fmt::format("users:\n- name: {}\n  user:", q(spec.name));
  if (spec.client_certificate_pem.empty() && spec.token.empty() && spec.token_file.empty()) {
    out += " {}\n";
  } else {
    out += "\n";
    if (!spec.client_certificate_pem.empty()) {
      out += fmt::format("    client-certificate-data: {}\n    client-key-data: {}\n",
                         core::Base64Encode(spec.client_certificate_pem),
                         core::Base64Encode(spec.client_key_pem));
    }
    if (!spec.token.empty()) out += fmt::format("    token: {}\n", q(spec.token));
    if (!spec.token_file.empty()) out += fmt::format("    tokenFile: {}\n", q(spec.token_file));
  }
  out += fmt::format("contexts:\n- name: {}\n  context:\n    cluster: {}\n    user: {}\n",
                     q(spec.name), q(spec.name), q(spec.name));
  if (!spec.ns.empty()) out += fmt::format("    namespace: {}\n", q(spec.ns));
  out += fmt::format("current-context: {}\n", q(spec.name));
  return out;
}

core::Status WriteKubeconfig(const std::filesystem::path& path, const KubeconfigSpec& spec) {
  return core::WriteFileAtomic(path, KubeconfigYaml(spec));
}

}  // namespace klutch::serving
