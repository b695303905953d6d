#include "core/ip.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/strings.h"

namespace klutch::core {
namespace {

std::string AddrError(std::string_view in, std::string_view msg, std::string_view at = {}) {
  std::string out = "ParseAddr(" + GoQuote(in) + "): " + std::string(msg);
  if (!at.empty()) out += " (at " + GoQuote(at) + ")";
  return out;
}

// Go's parseIPv4Fields over in[off, end): four decimal octets, no leading zeros.
bool ParseIPv4Fields(std::string_view in, size_t off, size_t end, uint8_t* fields,
                     std::string& error) {
  int val = 0;
  int pos = 0;
  int digits = 0;
  const std::string_view s = in.substr(off, end - off);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (digits == 1 && val == 0) {
        error = AddrError(in, "IPv4 field has octet with leading zero");
        return false;
      }
      val = val * 10 + (c - '0');
      ++digits;
      if (val > 255) {
        error = AddrError(in, "IPv4 field has value >255");
        return false;
      }
    } else if (c == '.') {
      if (i == 0 || i == s.size() - 1 || s[i - 1] == '.') {
        error = AddrError(in, "IPv4 field must have at least one digit", s.substr(i));
        return false;
      }
      if (pos == 3) {
        error = AddrError(in, "IPv4 address too long");
        return false;
      }
      fields[pos++] = static_cast<uint8_t>(val);
      val = 0;
      digits = 0;
    } else {
      error = AddrError(in, "unexpected character", s.substr(i));
      return false;
    }
  }
  if (pos < 3) {
    error = AddrError(in, "IPv4 address too short");
    return false;
  }
  fields[3] = static_cast<uint8_t>(val);
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Go's netip parseIPv6, zone included.
std::optional<IpAddress> ParseIPv6(std::string_view in, std::string& error) {
  std::string_view s = in;
  IpAddress addr;
  if (const size_t pct = s.find('%'); pct != std::string_view::npos) {
    addr.zone = std::string(s.substr(pct + 1));
    s = s.substr(0, pct);
    if (addr.zone.empty()) {
      error = AddrError(in, "zone must be a non-empty string");
      return std::nullopt;
    }
  }
  auto& ip = addr.bytes;
  int ellipsis = -1;
  if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = 0;
    s.remove_prefix(2);
    if (s.empty()) return addr;
  }
  int i = 0;
  while (i < 16) {
    size_t off = 0;
    uint32_t acc = 0;
    for (; off < s.size(); ++off) {
      const int h = HexValue(s[off]);
      if (h < 0) break;
      acc = (acc << 4) + static_cast<uint32_t>(h);
      if (off > 3) {
        error = AddrError(in, "each group must have 4 or less digits", s);
        return std::nullopt;
      }
    }
    if (off == 0) {
      error = AddrError(in, "each colon-separated field must have at least one digit", s);
      return std::nullopt;
    }
    if (off < s.size() && s[off] == '.') {
      if (ellipsis < 0 && i != 12) {
        error = AddrError(
            in, "embedded IPv4 address must replace the final 2 fields of the address", s);
        return std::nullopt;
      }
      if (i + 4 > 16) {
        error = AddrError(
            in, "too many hex fields to fit an embedded IPv4 at the end of the address", s);
        return std::nullopt;
      }
      size_t end = in.size();
      if (!addr.zone.empty()) end -= addr.zone.size() + 1;
      if (!ParseIPv4Fields(in, end - s.size(), end, &ip[i], error)) return std::nullopt;
      s = {};
      i += 4;
      break;
    }
    ip[i] = static_cast<uint8_t>(acc >> 8);
    ip[i + 1] = static_cast<uint8_t>(acc);
    i += 2;
    s.remove_prefix(off);
    if (s.empty()) break;
    if (s[0] != ':') {
      error = AddrError(in, "unexpected character, want colon", s);
      return std::nullopt;
    }
    if (s.size() == 1) {
      error = AddrError(in, "colon must be followed by more characters", s);
      return std::nullopt;
    }
    s.remove_prefix(1);
    if (s[0] == ':') {
      if (ellipsis >= 0) {
        error = AddrError(in, "multiple :: in address", s);
        return std::nullopt;
      }
      ellipsis = i;
      s.remove_prefix(1);
      if (s.empty()) break;
    }
  }
  if (!s.empty()) {
    error = AddrError(in, "trailing garbage after address", s);
    return std::nullopt;
  }
  if (i < 16) {
    if (ellipsis < 0) {
      error = AddrError(in, "address string too short");
      return std::nullopt;
    }
    const int n = 16 - i;
    for (int j = i - 1; j >= ellipsis; --j) ip[j + n] = ip[j];
    for (int j = ellipsis; j < ellipsis + n; ++j) ip[j] = 0;
  } else if (ellipsis >= 0) {
    error = AddrError(in, "the :: must expand to at least one field of zeros", s);
    return std::nullopt;
  }
  return addr;
}

// Go's netip.ParseAddr: the first '.', ':' or '%' decides the family.
std::optional<IpAddress> ParseAddr(std::string_view s, std::string& error) {
  for (char c : s) {
    if (c == '.') {
      IpAddress addr;
      addr.is4 = true;
      if (!ParseIPv4Fields(s, 0, s.size(), addr.bytes.data(), error)) return std::nullopt;
      return addr;
    }
    if (c == ':') return ParseIPv6(s, error);
    if (c == '%') {
      error = AddrError(s, "missing IPv6 address");
      return std::nullopt;
    }
  }
  error = AddrError(s, "unable to parse IP");
  return std::nullopt;
}

template <typename T>
std::optional<T> Fail(IpParseError* error, IpParseError::Kind kind, std::string message) {
  if (error != nullptr) *error = IpParseError{kind, std::move(message)};
  return std::nullopt;
}

std::string Ipv4MappedError(std::string_view text) {
  return "IPv4-mapped IPv6 address " + GoQuote(text) + " is not allowed";
}

}  // namespace

bool IpAddress::Is4In6() const {
  if (is4) return false;
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(bytes.data(), kPrefix, 12) == 0;
}

bool IpAddress::operator==(const IpAddress& other) const {
  return is4 == other.is4 && zone == other.zone &&
         std::memcmp(bytes.data(), other.bytes.data(), is4 ? 4 : 16) == 0;
}

std::string IpAddress::ToString() const {
  char buf[64];
  auto dotted = [&](const uint8_t* b) {
    std::snprintf(buf, sizeof(buf), "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
    return std::string(buf);
  };
  if (is4) return dotted(bytes.data());
  std::string out;
  if (Is4In6()) {
    out = "::ffff:" + dotted(bytes.data() + 12);
  } else {
    uint16_t groups[8];
    for (int i = 0; i < 8; ++i) {
      groups[i] = static_cast<uint16_t>(bytes[2 * i] << 8 | bytes[2 * i + 1]);
    }
    // RFC 5952: the first longest run of two or more zero groups becomes "::".
    int best_start = -1;
    int best_len = 0;
    for (int i = 0; i < 8;) {
      if (groups[i] != 0) {
        ++i;
        continue;
      }
      int j = i;
      while (j < 8 && groups[j] == 0) ++j;
      if (j - i >= 2 && j - i > best_len) {
        best_start = i;
        best_len = j - i;
      }
      i = j;
    }
    for (int i = 0; i < 8; ++i) {
      if (i == best_start) {
        out += "::";
        i += best_len - 1;
        continue;
      }
      if (!out.empty() && out.back() != ':') out += ':';
      std::snprintf(buf, sizeof(buf), "%x", groups[i]);
      out += buf;
    }
  }
  if (!zone.empty()) out += "%" + zone;
  return out;
}

std::optional<IpAddress> ParseIp(std::string_view text, const IpParseOptions& options,
                                 IpParseError* error) {
  using Kind = IpParseError::Kind;
  std::string problem;
  std::optional<IpAddress> addr = ParseAddr(text, problem);
  if (!addr) return Fail<IpAddress>(error, Kind::kSyntax, std::move(problem));
  if (!addr->zone.empty() && !options.allow_zone) {
    return Fail<IpAddress>(error, Kind::kZone,
                           "IP address " + GoQuote(text) + " with zone value is not allowed");
  }
  if (addr->Is4In6() && !options.allow_ipv4_mapped) {
    return Fail<IpAddress>(error, Kind::kIpv4Mapped, Ipv4MappedError(text));
  }
  return addr;
}

std::optional<IpPrefix> ParseIpPrefix(std::string_view text, const PrefixParseOptions& options,
                                      IpParseError* error) {
  using Kind = IpParseError::Kind;
  // net.ParseCIDR splits at the first '/' and says only which text it refused; netip splits at
  // the last one and says why.
  const bool net = options.allow_length_leading_zeros;
  auto syntax = [&](std::string_view why) {
    std::string message = net ? "invalid CIDR address: " + std::string(text)
                              : "netip.ParsePrefix(" + GoQuote(text) + "): " + std::string(why);
    return Fail<IpPrefix>(error, Kind::kSyntax, std::move(message));
  };
  const size_t slash = net ? text.find('/') : text.rfind('/');
  if (slash == std::string_view::npos) return syntax("no '/'");
  std::string problem;
  std::optional<IpAddress> addr = ParseAddr(text.substr(0, slash), problem);
  if (!addr) return syntax(problem);
  if (!addr->zone.empty()) return syntax("IPv6 zones cannot be present in a prefix");
  const std::string_view length = text.substr(slash + 1);
  const std::string bad_length = "bad bits after slash: " + GoQuote(length);
  if (length.empty()) return syntax(bad_length);
  if (!net && length.size() > 1 && (length[0] < '1' || length[0] > '9')) {
    return syntax(bad_length);
  }
  // netip reads the length with strconv.Atoi, which fails past int64; net's dtoi gives up at
  // 0xFFFFFF.
  int64_t bits = 0;
  for (char c : length) {
    if (c < '0' || c > '9') return syntax(bad_length);
    const int digit = c - '0';
    if (bits > (INT64_MAX - digit) / 10) return syntax(bad_length);
    bits = bits * 10 + digit;
    if (net && bits >= 0xFFFFFF) return syntax(bad_length);
  }
  if (bits > addr->BitLength()) return syntax("prefix length out of range");
  if (addr->Is4In6() && !options.allow_ipv4_mapped) {
    return Fail<IpPrefix>(error, Kind::kIpv4Mapped, Ipv4MappedError(text));
  }
  return IpPrefix{std::move(*addr), static_cast<int>(bits)};
}

}  // namespace klutch::core
