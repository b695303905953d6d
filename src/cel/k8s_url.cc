// Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library/urls.go): url, isURL and the
// URL accessors. Validation follows Go's url.ParseRequestURI (absolute URI or absolute
// path); the value is then parsed with url.Parse (which splits off the fragment), exactly as
// kube-apiserver does. Values are opaque "kubernetes.URL".
#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cel/cel.h"
#include "cel/library_util.h"
#include "cel/value.h"
#include "core/strings.h"

namespace klutch::cel {
namespace {

constexpr std::string_view kURLType = "kubernetes.URL";

// The parts of Go's url.URL the accessors need.
struct ParsedURL {
  std::string scheme;
  std::string opaque;
  std::optional<std::string> user;  // raw userinfo, unescaped
  std::string host;
  std::string path;
  std::string raw_path;
  std::string raw_query;
  std::string fragment;
  bool operator==(const ParsedURL&) const = default;
};

enum class Encoding {
  kPath,
  kPathSegment,
  kHost,
  kZone,
  kUserPassword,
  kQueryComponent,
  kFragment
};

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

int Unhex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// Go's net/url shouldEscape.
bool ShouldEscape(unsigned char c, Encoding mode) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return false;
  if (mode == Encoding::kHost || mode == Encoding::kZone) {
    switch (c) {
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case ':':
      case '[':
      case ']':
      case '<':
      case '>':
      case '"':
        return false;
      default:
        break;
    }
  }
  switch (c) {
    case '-':
    case '_':
    case '.':
    case '~':
      return false;
    case '$':
    case '&':
    case '+':
    case ',':
    case '/':
    case ':':
    case ';':
    case '=':
    case '?':
    case '@':
      switch (mode) {
        case Encoding::kPath:
          return c == '?';
        case Encoding::kPathSegment:
          return c == '/' || c == ';' || c == ',' || c == '?';
        case Encoding::kUserPassword:
          return c == '@' || c == '/' || c == '?' || c == ':';
        case Encoding::kQueryComponent:
          return true;
        case Encoding::kFragment:
          return false;
        default:
          break;
      }
      break;
    default:
      break;
  }
  if (mode == Encoding::kFragment) {
    switch (c) {
      case '!':
      case '(':
      case ')':
      case '*':
        return false;
      default:
        break;
    }
  }
  return true;
}

// Go's net/url unescape; returns nullopt with `*error` set on failure.
std::optional<std::string> Unescape(std::string_view s, Encoding mode, std::string* error) {
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || !IsHex(s[i + 1]) || !IsHex(s[i + 2])) {
        std::string_view bad = s.substr(i, 3);
        *error = "invalid URL escape " + core::GoQuote(bad);
        return std::nullopt;
      }
      if (mode == Encoding::kHost && Unhex(s[i + 1]) < 8 && s.substr(i, 3) != "%25") {
        *error = "invalid URL escape " + core::GoQuote(s.substr(i, 3));
        return std::nullopt;
      }
      if (mode == Encoding::kZone) {
        const auto v = static_cast<unsigned char>(Unhex(s[i + 1]) << 4 | Unhex(s[i + 2]));
        if (s.substr(i, 3) != "%25" && v != ' ' && ShouldEscape(v, Encoding::kHost)) {
          *error = "invalid URL escape " + core::GoQuote(s.substr(i, 3));
          return std::nullopt;
        }
      }
      i += 3;
    } else {
      if ((mode == Encoding::kHost || mode == Encoding::kZone) &&
          static_cast<unsigned char>(c) < 0x80 && ShouldEscape(c, mode)) {
        *error = "invalid character " + core::GoQuote(s.substr(i, 1)) + " in host name";
        return std::nullopt;
      }
      ++i;
    }
  }
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      out += static_cast<char>(Unhex(s[i + 1]) << 4 | Unhex(s[i + 2]));
      i += 2;
    } else if (s[i] == '+' && mode == Encoding::kQueryComponent) {
      out += ' ';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string Escape(std::string_view s, Encoding mode) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (!ShouldEscape(c, mode)) {
      out += static_cast<char>(c);
    } else if (c == ' ' && mode == Encoding::kQueryComponent) {
      out += '+';
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

bool ValidOptionalPort(std::string_view port) {
  if (port.empty()) return true;
  if (port[0] != ':') return false;
  return std::all_of(port.begin() + 1, port.end(), [](char b) { return b >= '0' && b <= '9'; });
}

std::optional<std::string> ParseHost(std::string_view host, std::string* error) {
  if (!host.empty() && host[0] == '[') {
    const size_t i = host.rfind(']');
    if (i == std::string_view::npos) {
      *error = "missing ']' in host";
      return std::nullopt;
    }
    const std::string_view colon_port = host.substr(i + 1);
    if (!ValidOptionalPort(colon_port)) {
      *error = "invalid port " + core::GoQuote(colon_port) + " after host";
      return std::nullopt;
    }
    const size_t zone = host.substr(0, i).find("%25");
    if (zone != std::string_view::npos) {
      auto h1 = Unescape(host.substr(0, zone), Encoding::kHost, error);
      if (!h1) return std::nullopt;
      auto h2 = Unescape(host.substr(zone, i - zone), Encoding::kZone, error);
      if (!h2) return std::nullopt;
      auto h3 = Unescape(host.substr(i), Encoding::kHost, error);
      if (!h3) return std::nullopt;
      return *h1 + *h2 + *h3;
    }
  } else if (const size_t i = host.rfind(':'); i != std::string_view::npos) {
    const std::string_view colon_port = host.substr(i);
    if (!ValidOptionalPort(colon_port)) {
      *error = "invalid port " + core::GoQuote(colon_port) + " after host";
      return std::nullopt;
    }
  }
  return Unescape(host, Encoding::kHost, error);
}

// Go's validUserinfo: RFC 3986 userinfo characters.
bool ValidUserinfo(std::string_view s) {
  for (char r : s) {
    if ((r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9')) continue;
    switch (r) {
      case '-':
      case '.':
      case '_':
      case ':':
      case '~':
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case '%':
      case '@':
        continue;
      default:
        return false;
    }
  }
  return true;
}

bool ParseAuthority(std::string_view authority, ParsedURL* url, std::string* error) {
  const size_t at = authority.rfind('@');
  auto host = ParseHost(at == std::string_view::npos ? authority : authority.substr(at + 1), error);
  if (!host) return false;
  url->host = *host;
  if (at == std::string_view::npos) return true;
  const std::string_view userinfo = authority.substr(0, at);
  if (!ValidUserinfo(userinfo)) {
    *error = "net/url: invalid userinfo";
    return false;
  }
  const size_t colon = userinfo.find(':');
  auto user = Unescape(userinfo.substr(0, colon), Encoding::kUserPassword, error);
  if (!user) return false;
  if (colon != std::string_view::npos) {
    if (!Unescape(userinfo.substr(colon + 1), Encoding::kUserPassword, error)) return false;
  }
  url->user = std::string(userinfo);
  return true;
}

bool SetPath(std::string_view p, ParsedURL* url, std::string* error) {
  auto path = Unescape(p, Encoding::kPath, error);
  if (!path) return false;
  url->path = *path;
  url->raw_path = Escape(*path, Encoding::kPath) == p ? "" : std::string(p);
  return true;
}

// Go's url.parse(rawURL, viaRequest) without the outer error wrapping.
std::optional<ParsedURL> Parse(std::string_view raw, bool via_request, std::string* error) {
  if (std::any_of(raw.begin(), raw.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
    *error = "net/url: invalid control character in URL";
    return std::nullopt;
  }
  if (raw.empty() && via_request) {
    *error = "empty url";
    return std::nullopt;
  }
  ParsedURL url;
  if (raw == "*") {
    url.path = "*";
    return url;
  }
  // Scheme.
  std::string_view rest = raw;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
    if ((c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.') {
      if (i == 0) break;
      continue;
    }
    if (c == ':') {
      if (i == 0) {
        *error = "missing protocol scheme";
        return std::nullopt;
      }
      url.scheme = std::string(raw.substr(0, i));
      for (char& s : url.scheme) s = static_cast<char>(std::tolower(static_cast<unsigned char>(s)));
      rest = raw.substr(i + 1);
    }
    break;
  }
  // Query.
  if (!rest.empty() && rest.back() == '?' && std::count(rest.begin(), rest.end(), '?') == 1) {
    rest.remove_suffix(1);
  } else if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    url.raw_query = std::string(rest.substr(q + 1));
    rest = rest.substr(0, q);
  }
  if (rest.empty() || rest[0] != '/') {
    if (!url.scheme.empty()) {
      url.opaque = std::string(rest);
      return url;
    }
    if (via_request) {
      *error = "invalid URI for request";
      return std::nullopt;
    }
    const std::string_view segment = rest.substr(0, rest.find('/'));
    if (segment.find(':') != std::string_view::npos) {
      *error = "first path segment in URL cannot contain colon";
      return std::nullopt;
    }
  }
  const bool has_authority = rest.size() >= 2 && rest[0] == '/' && rest[1] == '/';
  const bool triple_slash = rest.size() >= 3 && rest.substr(0, 3) == "///";
  if ((!url.scheme.empty() || (!via_request && !triple_slash)) && has_authority) {
    std::string_view authority = rest.substr(2);
    rest = {};
    if (const size_t i = authority.find('/'); i != std::string_view::npos) {
      rest = authority.substr(i);
      authority = authority.substr(0, i);
    }
    if (!ParseAuthority(authority, &url, error)) return std::nullopt;
  }
  if (!SetPath(rest, &url, error)) return std::nullopt;
  return url;
}

// Go's url.Parse: the fragment is split off first.
std::optional<ParsedURL> ParseWithFragment(std::string_view raw, std::string* error) {
  const size_t hash = raw.find('#');
  const std::string_view u = raw.substr(0, hash);
  auto url = Parse(u, false, error);
  if (!url) {
    *error = "parse " + core::GoQuote(u) + ": " + *error;
    return std::nullopt;
  }
  if (hash != std::string_view::npos) {
    auto frag = Unescape(raw.substr(hash + 1), Encoding::kFragment, error);
    if (!frag) {
      *error = "parse " + core::GoQuote(raw) + ": " + *error;
      return std::nullopt;
    }
    url->fragment = *frag;
  }
  return url;
}

bool ParseRequestURI(std::string_view raw, std::string* error) {
  if (Parse(raw, true, error)) return true;
  *error = "parse " + core::GoQuote(raw) + ": " + *error;
  return false;
}

std::string EscapedPath(const ParsedURL& u) {
  if (!u.raw_path.empty()) {
    bool valid = true;
    for (char c : u.raw_path) {
      switch (c) {
        case '!':
        case '$':
        case '&':
        case '\'':
        case '(':
        case ')':
        case '*':
        case '+':
        case ',':
        case ';':
        case '=':
        case ':':
        case '@':
        case '[':
        case ']':
        case '%':
          break;
        default:
          if (ShouldEscape(c, Encoding::kPath)) valid = false;
      }
    }
    std::string ignored;
    if (valid) {
      auto p = Unescape(u.raw_path, Encoding::kPath, &ignored);
      if (p && *p == u.path) return u.raw_path;
    }
  }
  if (u.path == "*") return "*";
  return Escape(u.path, Encoding::kPath);
}

// Go's splitHostPort (for Hostname and Port).
std::pair<std::string, std::string> SplitHostPort(std::string_view host_port) {
  std::string_view host = host_port;
  std::string_view port;
  if (const size_t colon = host.rfind(':');
      colon != std::string_view::npos && ValidOptionalPort(host.substr(colon))) {
    port = host.substr(colon + 1);
    host = host.substr(0, colon);
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {std::string(host), std::string(port)};
}

// Go's url.ParseQuery, ignoring malformed pairs as URL.Query() does.
Value Query(const ParsedURL& u) {
  std::map<std::string, std::vector<Value>> values;
  std::vector<std::string> order;
  std::string_view query = u.raw_query;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view key = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (key.find(';') != std::string_view::npos || key.empty()) continue;
    const size_t eq = key.find('=');
    std::string_view value = eq == std::string_view::npos ? std::string_view() : key.substr(eq + 1);
    key = key.substr(0, eq);
    std::string ignored;
    auto k = Unescape(key, Encoding::kQueryComponent, &ignored);
    if (!k) continue;
    auto v = Unescape(value, Encoding::kQueryComponent, &ignored);
    if (!v) continue;
    if (!values.contains(*k)) order.push_back(*k);
    values[*k].push_back(Value::String(*v));
  }
  std::vector<std::pair<Value, Value>> entries;
  for (const std::string& k : order) {
    entries.emplace_back(Value::String(k), Value::List(std::move(values[k])));
  }
  return Value::Map(std::move(entries));
}

class URLValue final : public OpaqueValue {
 public:
  URLValue(std::string source, ParsedURL url) : source_(std::move(source)), url_(std::move(url)) {}
  std::string_view type_name() const override { return kURLType; }
  bool Equals(const OpaqueValue& other) const override {
    const auto* o = dynamic_cast<const URLValue*>(&other);
    return o != nullptr && o->url_ == url_;
  }
  std::string DebugString() const override { return "url(" + core::GoQuote(source_) + ")"; }
  const ParsedURL& url() const { return url_; }

 private:
  std::string source_;
  ParsedURL url_;
};

const ParsedURL& URLOf(const Value& v) { return static_cast<const URLValue&>(v.opaque()).url(); }

using internal::CostExceeded;

}  // namespace

void internal::InstallURLLibrary(FunctionRegistry& registry) {
  const Param str = Param::Of(Kind::kString);
  const Param url = Param::OfOpaque(kURLType);
  registry.Add("url", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    const std::string& s = a[0].string_value();
    if (!ctx.Charge(internal::TraversalCost(s.size()))) return CostExceeded();
    std::string error;
    if (!ParseRequestURI(s, &error)) {
      return Value::MakeError("URL parse error during conversion from string: " + error);
    }
    auto parsed = ParseWithFragment(s, &error);
    if (!parsed) {
      return Value::MakeError("URL parse error during conversion from string: " + error);
    }
    return Value::Opaque(std::make_shared<URLValue>(s, std::move(*parsed)));
  });
  registry.Add("isURL", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    const std::string& s = a[0].string_value();
    if (!ctx.Charge(internal::TraversalCost(s.size()))) return CostExceeded();
    std::string error;
    return Value::Bool(ParseRequestURI(s, &error));
  });
  registry.Add("getScheme", true, {url}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(URLOf(a[0]).scheme);
  });
  registry.Add("getHost", true, {url}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(URLOf(a[0]).host);
  });
  registry.Add("getHostname", true, {url}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(SplitHostPort(URLOf(a[0]).host).first);
  });
  registry.Add("getPort", true, {url}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(SplitHostPort(URLOf(a[0]).host).second);
  });
  registry.Add("getEscapedPath", true, {url}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(EscapedPath(URLOf(a[0])));
  });
  registry.Add("getQuery", true, {url},
               [](std::span<const Value> a, EvalContext&) { return Query(URLOf(a[0])); });
}

}  // namespace klutch::cel
