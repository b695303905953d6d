#include "client/in_cluster.h"

#include <fmt/format.h>

#include <string>

#include "core/log.h"
#include "core/strings.h"

namespace klutch::client {

core::Result<RestConfig> InClusterConfig(const InClusterOptions& options) {
  try {
    auto env = [&](const char* name) -> std::string {
      const char* v = options.getenv ? options.getenv(name) : nullptr;
      return v ? std::string(v) : std::string();
    };
    std::string host = env("KUBERNETES_SERVICE_HOST");
    std::string port = env("KUBERNETES_SERVICE_PORT");
    if (host.empty() || port.empty()) {
      return core::NotFound(
          "unable to load in-cluster configuration, KUBERNETES_SERVICE_HOST and "
          "KUBERNETES_SERVICE_PORT must be defined");
    }
    auto port_number = core::ParseInt64(port);
    if (!port_number || *port_number < 1 || *port_number > 65535) {
      return core::Invalid(fmt::format(
          "unable to load in-cluster configuration: KUBERNETES_SERVICE_PORT \"{}\" is not a "
          "port number",
          port));
    }
    if (host.find_first_of("/[]@ ") != std::string::npos) {
      return core::Invalid(fmt::format(
          "unable to load in-cluster configuration: KUBERNETES_SERVICE_HOST \"{}\" is not a "
          "host name or IP address",
          host));
    }

    RestConfig config;
    // An IPv6 address needs brackets in a URL (what Go's net.JoinHostPort does).
    bool ipv6 = host.find(':') != std::string::npos;
    config.server =
        fmt::format("https://{}{}{}:{}", ipv6 ? "[" : "", host, ipv6 ? "]" : "", *port_number);

    auto token = ReadConfigFile(options.token_file);
    if (!token.ok()) {
      return core::Invalid(fmt::format("unable to load in-cluster configuration: token: {}",
                                       token.status().message()));
    }
    config.bearer_token = std::string(core::Trim(*token));
    config.bearer_token_file = options.token_file.string();

    auto ca = ReadConfigFile(options.ca_file);
    if (ca.ok()) {
      config.ca_pem = std::move(*ca);
    } else {
      KLUTCH_LOG(kWarn, "client", "expected to load root CA config from {}, but got: {}",
                 options.ca_file.string(), ca.status().message());
    }

    if (std::string ns = env("POD_NAMESPACE"); !ns.empty()) {
      config.namespace_ = ns;
    } else if (auto file = ReadConfigFile(options.namespace_file); file.ok()) {
      config.namespace_ = std::string(core::Trim(*file));
    }
    if (config.namespace_.empty()) config.namespace_ = "default";
    return config;
  } catch (const std::exception& e) {
    return core::Internal(fmt::format("loading in-cluster configuration: {}", e.what()));
  }
}

}  // namespace klutch::client
