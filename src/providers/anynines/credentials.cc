#include "providers/anynines/credentials.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "core/strings.h"
#include "machinery/gofmt.h"

namespace klutch::providers::anynines {
namespace {

bool Allowed(uint32_t c) {
  return c == '-' || c == '.' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9');
}

// One key segment with every character (code point) outside [-._a-zA-Z0-9] replaced by '_'.
std::string Sanitize(std::string_view key) {
  std::string out;
  size_t i = 0;
  while (i < key.size()) {
    int32_t c = core::DecodeUtf8(key, i);
    if (c >= 0 && Allowed(static_cast<uint32_t>(c))) {
      out += static_cast<char>(c);
    } else {
      out += '_';
    }
  }
  return out;
}

// The value as Go's encoding/json decodes it into interface{}: every number a float64.
Json AsGoDecoded(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (const auto* u = v.get_ptr<const uint64_t*>()) return Json(static_cast<double>(*u));
    if (const auto* i = v.get_ptr<const int64_t*>()) return Json(static_cast<double>(*i));
  }
  if (v.is_array()) {
    Json out = Json::array();
    for (const Json& e : v) out.push_back(AsGoDecoded(e));
    return out;
  }
  if (v.is_object()) {
    Json out = Json::object();
    for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = AsGoDecoded(it.value());
    return out;
  }
  return v;
}

void Flatten(const Json& node, const std::string& prefix, SecretData& out) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string key = Sanitize(it.key());
    if (!prefix.empty()) key = prefix + "." + key;
    if (it.value().is_object()) {
      Flatten(it.value(), key, out);
    } else {
      out[key] = machinery::GoSprint(AsGoDecoded(it.value()));
    }
  }
}

// --- endpoint parsing -------------------------------------------------------------------------

Json Entry(std::string host_url, std::string port, std::string_view label) {
  return Json{{"hostURL", std::move(host_url)}, {"port", std::move(port)}, {"label", label}};
}

core::Result<std::string> Field(const SecretData& data, const std::string& key) {
  auto it = data.find(key);
  if (it == data.end()) return core::Invalid(fmt::format("\"{}\" field not found in secret", key));
  return it->second;
}

// "[a b]" -> {a, b}.
core::Result<std::vector<std::string>> ListField(const SecretData& data, const std::string& key) {
  KLUTCH_ASSIGN_OR_RETURN(std::string value, Field(data, key));
  std::string_view v = core::Trim(value);
  if (v.size() < 2 || v.front() != '[' || v.back() != ']') {
    return core::Invalid(fmt::format("\"{}\" field is not a list: \"{}\"", key, value));
  }
  std::vector<std::string> out;
  for (std::string_view e : core::SplitNonEmpty(v.substr(1, v.size() - 2), ' ')) {
    out.emplace_back(e);
  }
  if (out.empty()) return core::Invalid(fmt::format("\"{}\" field is an empty list", key));
  return out;
}

// "host:port" split at the last ':'; the port is "" when there is none.
std::pair<std::string, std::string> SplitHostPort(std::string_view s) {
  auto colon = s.rfind(':');
  // A ':' inside "[v6]" or right after the scheme ("https://h") is not a port separator.
  if (colon == std::string_view::npos || s.find(']', colon) != std::string_view::npos ||
      s.substr(colon).starts_with("://")) {
    return {std::string(s), ""};
  }
  return {std::string(s.substr(0, colon)), std::string(s.substr(colon + 1))};
}

// scheme://[user@]host[:port][/...] -> ("scheme://host", "port").
core::Result<std::pair<std::string, std::string>> UrlHostPort(std::string_view url,
                                                              std::string_view key) {
  auto sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    return core::Invalid(fmt::format("\"{}\" field is not a URL: \"{}\"", key, url));
  }
  std::string_view scheme = url.substr(0, sep);
  std::string_view rest = url.substr(sep + 3);
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  auto at = authority.rfind('@');
  if (at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string host, port;
  if (authority.starts_with('[')) {
    auto close = authority.find(']');
    if (close == std::string_view::npos) {
      return core::Invalid(fmt::format("\"{}\" field is not a URL: \"{}\"", key, url));
    }
    host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (after.starts_with(':')) port = std::string(after.substr(1));
  } else {
    auto [h, p] = SplitHostPort(authority);
    host = std::move(h);
    port = std::move(p);
  }
  if (host.empty()) {
    return core::Invalid(fmt::format("\"{}\" field has no host: \"{}\"", key, url));
  }
  return std::make_pair(std::string(scheme) + "://" + host, port);
}

core::Status AddUrls(const SecretData& data, const std::string& key, std::string_view label,
                     Json& out) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<std::string> urls, ListField(data, key));
  for (const std::string& u : urls) {
    KLUTCH_ASSIGN_OR_RETURN(auto hp, UrlHostPort(u, key));
    out.push_back(Entry(hp.first, hp.second, label));
  }
  return core::Status::Ok();
}

core::Status AddUrl(const SecretData& data, const std::string& key, std::string_view label,
                    Json& out) {
  KLUTCH_ASSIGN_OR_RETURN(std::string value, Field(data, key));
  KLUTCH_ASSIGN_OR_RETURN(auto hp, UrlHostPort(value, key));
  out.push_back(Entry(hp.first, hp.second, label));
  return core::Status::Ok();
}

core::Status AddHostPorts(const SecretData& data, const std::string& key, std::string_view label,
                          Json& out) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<std::string> hosts, ListField(data, key));
  for (const std::string& h : hosts) {
    auto [host, port] = SplitHostPort(h);
    out.push_back(Entry(host, port, label));
  }
  return core::Status::Ok();
}

core::Status AddPlain(const SecretData& data, const std::string& host_key,
                      const std::string& port_key, std::string_view label, Json& out) {
  KLUTCH_ASSIGN_OR_RETURN(std::string host, Field(data, host_key));
  KLUTCH_ASSIGN_OR_RETURN(std::string port, Field(data, port_key));
  out.push_back(Entry(host, port, label));
  return core::Status::Ok();
}

}  // namespace

SecretData FlattenCredentials(const Json& credentials) {
  SecretData out;
  if (!credentials.is_object()) return out;
  Flatten(credentials, "", out);
  std::set<std::string> drop;
  for (const auto& [key, value] : out) {
    auto dot = key.rfind('.');
    if (dot == std::string::npos) continue;
    auto top = out.find(key.substr(dot + 1));
    if (top != out.end() && top->second == value) drop.insert(top->first);
  }
  for (const std::string& k : drop) out.erase(k);
  return out;
}

core::Result<Json> ParseConnectionDetails(std::string_view type, const SecretData& data) {
  Json out = Json::array();
  auto has = [&](std::string_view s) { return type.find(s) != std::string_view::npos; };
  if (has("search")) {
    KLUTCH_RETURN_IF_ERROR(AddHostPorts(data, "host", "Search", out));
  } else if (has("logme2")) {
    KLUTCH_RETURN_IF_ERROR(AddUrl(data, "host", "Logme2", out));
  } else if (has("mongodb")) {
    KLUTCH_RETURN_IF_ERROR(AddHostPorts(data, "hosts", "MongoDB", out));
  } else if (has("prometheus")) {
    KLUTCH_RETURN_IF_ERROR(AddUrls(data, "prometheus_urls", "Prometheus", out));
    KLUTCH_RETURN_IF_ERROR(AddUrls(data, "alertmanager_urls", "Alertmanager", out));
    KLUTCH_RETURN_IF_ERROR(AddUrls(data, "grafana_urls", "Grafana", out));
    KLUTCH_ASSIGN_OR_RETURN(std::vector<std::string> exporters,
                            ListField(data, "graphite_exporters"));
    KLUTCH_ASSIGN_OR_RETURN(std::string port, Field(data, "graphite_exporter_port"));
    for (const std::string& host : exporters) out.push_back(Entry(host, port, "Graphite Exporter"));
  } else if (has("messaging")) {
    const std::pair<const char*, const char*> keys[] = {{"http_api_uri", "HTTP API"},
                                                        {"protocols.amqp_ssl.uri", "AMQP SSL"},
                                                        {"protocols.management.uri", "Management"}};
    for (const auto& [key, label] : keys) {
      if (data.count(key)) KLUTCH_RETURN_IF_ERROR(AddUrl(data, key, label, out));
    }
  } else if (has("keyvalue")) {
    KLUTCH_RETURN_IF_ERROR(AddPlain(data, "host", "valkey.port", "KeyValue", out));
  } else if (has("postgresql") || has("mariadb")) {
    KLUTCH_RETURN_IF_ERROR(AddPlain(data, "host", "port", "SQL", out));
  } else {
    return core::Invalid("referenced data service not found.");
  }
  return out;
}

}  // namespace klutch::providers::anynines
