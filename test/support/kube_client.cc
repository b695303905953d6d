#include "test/support/kube_client.h"

#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/process.h"

namespace klutch::testing {

core::Result<ServerCredentials> ReadKubeconfig(const std::filesystem::path& path) {
  std::string text = ReadFileOrEmpty(path);
  if (text.empty()) return core::NotFound("kubeconfig " + path.string() + " is missing or empty");
  KLUTCH_ASSIGN_OR_RETURN(machinery::Json cfg, machinery::ParseYaml(text));
  ServerCredentials c;
  const machinery::Json& cluster = cfg["clusters"][0]["cluster"];
  const machinery::Json& user = cfg["users"][0]["user"];
  std::string server = cluster.value("server", "");
  // https://host:port
  auto scheme = server.find("://");
  std::string hostport = scheme == std::string::npos ? server : server.substr(scheme + 3);
  auto colon = hostport.rfind(':');
  c.host = hostport.substr(0, colon);
  c.port = static_cast<uint16_t>(std::stoi(hostport.substr(colon + 1)));
  auto decode = [](const machinery::Json& j, const char* key) {
    auto d = core::Base64Decode(j.value(key, ""));
    return d ? *d : std::string();
  };
  c.ca_pem = decode(cluster, "certificate-authority-data");
  c.cert_pem = decode(user, "client-certificate-data");
  c.key_pem = decode(user, "client-key-data");
  return c;
}

std::unique_ptr<http::Client> NewClient(const ServerCredentials& creds) {
  http::ClientOptions o;
  o.host = creds.host;
  o.port = creds.port;
  o.tls = true;
  o.ca_pem = creds.ca_pem;
  o.cert_pem = creds.cert_pem;
  o.key_pem = creds.key_pem;
  return std::make_unique<http::Client>(o);
}

core::Result<http::ClientResponse> Call(http::Client& client, std::string_view method,
                                        std::string_view path, std::string body,
                                        std::string_view content_type) {
  http::Headers h;
  h.Set("Accept", "application/json");
  if (!body.empty()) h.Set("Content-Type", std::string(content_type));
  return client.Do(method, path, h, std::move(body));
}

}  // namespace klutch::testing
