// libFuzzer target for ParseKubeconfig and ResolveKubeconfig: any input either parses or is a
// BadRequest/Invalid naming the file, never a crash or an exception; a config that resolves
// has a usable server URL and namespace.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "client/kubeconfig.h"

namespace {

bool NamesFile(const klutch::core::Status& status, std::string_view source) {
  return status.message().starts_with(source);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using klutch::core::Reason;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::string source = "/fuzz/config";
  auto parsed = klutch::client::ParseKubeconfig(in, source, "/fuzz");
  if (!parsed.ok()) {
    Reason r = parsed.status().reason();
    if (r != Reason::kBadRequest && r != Reason::kInvalid) std::abort();
    if (!NamesFile(parsed.status(), source)) std::abort();
    return 0;
  }
  klutch::client::Kubeconfig config = *parsed;
  // Resolving reads referenced files; keep the fuzzer off the real file system (a path such as
  // /dev/stdin would block).
  for (auto& [name, cluster] : config.clusters) cluster.certificate_authority.clear();
  for (auto& [name, user] : config.users) {
    user.client_certificate.clear();
    user.client_key.clear();
    user.token_file.clear();
  }
  klutch::client::Kubeconfig merged = config;
  merged.Merge(config);  // merging a config with itself changes nothing
  if (merged.clusters.size() != config.clusters.size() ||
      merged.current_context != config.current_context) {
    std::abort();
  }
  auto resolved = klutch::client::ResolveKubeconfig(config);
  if (!resolved.ok()) {
    if (resolved.status().reason() != Reason::kInvalid) std::abort();
    return 0;
  }
  const std::string& server = resolved->server;
  if (!server.starts_with("https://") && !server.starts_with("http://")) std::abort();
  if (server.ends_with("/") || resolved->namespace_.empty()) std::abort();
  return 0;
}
