// Kubernetes' IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go) on
// opaque "net.IP" and "net.CIDR" values. Parsing follows Go's netip.ParseAddr and
// netip.ParsePrefix (no leading zeros in IPv4 octets, no zones in prefixes) plus
// Kubernetes' own rejections of zones and IPv4-mapped IPv6 addresses; error messages are
// worded as kube-apiserver words them.
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cel/cel.h"
#include "cel/library_util.h"
#include "cel/value.h"
#include "core/strings.h"

namespace klutch::cel {
namespace {

constexpr std::string_view kIPType = "net.IP";
constexpr std::string_view kCIDRType = "net.CIDR";

struct Addr {
  bool is4 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 uses the first 4
  std::string zone;
  bool operator==(const Addr& o) const {
    return is4 == o.is4 && zone == o.zone &&
           std::memcmp(bytes.data(), o.bytes.data(), is4 ? 4 : 16) == 0;
  }
  int bit_len() const { return is4 ? 32 : 128; }
  bool Is4In6() const {
    if (is4) return false;
    static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return std::memcmp(bytes.data(), kPrefix, 12) == 0;
  }
};

std::string ParseAddrError(std::string_view in, std::string_view msg, std::string_view at = {}) {
  std::string out = "ParseAddr(" + core::GoQuote(in) + "): " + std::string(msg);
  if (!at.empty()) out += " (at " + core::GoQuote(at) + ")";
  return out;
}

// Go's parseIPv4Fields over in[off, end).
bool ParseIPv4Fields(std::string_view in, size_t off, size_t end, uint8_t* fields,
                     std::string* error) {
  int val = 0;
  int pos = 0;
  int dig_len = 0;
  const std::string_view s = in.substr(off, end - off);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (dig_len == 1 && val == 0) {
        *error = ParseAddrError(in, "IPv4 field has octet with leading zero");
        return false;
      }
      val = val * 10 + (c - '0');
      ++dig_len;
      if (val > 255) {
        *error = ParseAddrError(in, "IPv4 field has value >255");
        return false;
      }
    } else if (c == '.') {
      if (i == 0 || i == s.size() - 1 || s[i - 1] == '.') {
        *error = ParseAddrError(in, "IPv4 field must have at least one digit", s.substr(i));
        return false;
      }
      if (pos == 3) {
        *error = ParseAddrError(in, "IPv4 address too long");
        return false;
      }
      fields[pos++] = static_cast<uint8_t>(val);
      val = 0;
      dig_len = 0;
    } else {
      *error = ParseAddrError(in, "unexpected character", s.substr(i));
      return false;
    }
  }
  if (pos < 3) {
    *error = ParseAddrError(in, "IPv4 address too short");
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

// Go's netip parseIPv6.
std::optional<Addr> ParseIPv6(std::string_view in, std::string* error) {
  std::string_view s = in;
  Addr addr;
  if (const size_t pct = s.find('%'); pct != std::string_view::npos) {
    addr.zone = std::string(s.substr(pct + 1));
    s = s.substr(0, pct);
    if (addr.zone.empty()) {
      *error = ParseAddrError(in, "zone must be a non-empty string");
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
        *error = ParseAddrError(in, "each group must have 4 or less digits", s);
        return std::nullopt;
      }
    }
    if (off == 0) {
      *error = ParseAddrError(in, "each colon-separated field must have at least one digit", s);
      return std::nullopt;
    }
    if (off < s.size() && s[off] == '.') {
      if (ellipsis < 0 && i != 12) {
        *error = ParseAddrError(
            in, "embedded IPv4 address must replace the final 2 fields of the address", s);
        return std::nullopt;
      }
      if (i + 4 > 16) {
        *error = ParseAddrError(
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
      *error = ParseAddrError(in, "unexpected character, want colon", s);
      return std::nullopt;
    }
    if (s.size() == 1) {
      *error = ParseAddrError(in, "colon must be followed by more characters", s);
      return std::nullopt;
    }
    s.remove_prefix(1);
    if (s[0] == ':') {
      if (ellipsis >= 0) {
        *error = ParseAddrError(in, "multiple :: in address", s);
        return std::nullopt;
      }
      ellipsis = i;
      s.remove_prefix(1);
      if (s.empty()) break;
    }
  }
  if (!s.empty()) {
    *error = ParseAddrError(in, "trailing garbage after address", s);
    return std::nullopt;
  }
  if (i < 16) {
    if (ellipsis < 0) {
      *error = ParseAddrError(in, "address string too short");
      return std::nullopt;
    }
    const int n = 16 - i;
    for (int j = i - 1; j >= ellipsis; --j) ip[j + n] = ip[j];
    for (int j = ellipsis; j < ellipsis + n; ++j) ip[j] = 0;
  } else if (ellipsis >= 0) {
    *error = ParseAddrError(in, "the :: must expand to at least one field of zeros", s);
    return std::nullopt;
  }
  return addr;
}

// Go's netip.ParseAddr.
std::optional<Addr> ParseAddr(std::string_view s, std::string* error) {
  for (char c : s) {
    if (c == '.') {
      Addr addr;
      addr.is4 = true;
      if (!ParseIPv4Fields(s, 0, s.size(), addr.bytes.data(), error)) return std::nullopt;
      return addr;
    }
    if (c == ':') return ParseIPv6(s, error);
    if (c == '%') {
      *error = ParseAddrError(s, "missing IPv6 address");
      return std::nullopt;
    }
  }
  *error = ParseAddrError(s, "unable to parse IP");
  return std::nullopt;
}

// Kubernetes' parseIPAddr.
std::optional<Addr> ParseKubernetesIP(std::string_view raw, std::string* error) {
  std::string err;
  auto addr = ParseAddr(raw, &err);
  if (!addr) {
    *error =
        "IP Address " + core::GoQuote(raw) + " parse error during conversion from string: " + err;
    return std::nullopt;
  }
  if (!addr->zone.empty()) {
    *error = "IP address " + core::GoQuote(raw) + " with zone value is not allowed";
    return std::nullopt;
  }
  if (addr->Is4In6()) {
    *error = "IPv4-mapped IPv6 address " + core::GoQuote(raw) + " is not allowed";
    return std::nullopt;
  }
  return addr;
}

// Go's Addr.String (RFC 5952 for IPv6: lowercase, longest zero run of >= 2 groups as ::).
std::string AddrString(const Addr& a) {
  char buf[64];
  if (a.is4) {
    std::snprintf(buf, sizeof(buf), "%u.%u.%u.%u", a.bytes[0], a.bytes[1], a.bytes[2], a.bytes[3]);
    return buf;
  }
  uint16_t groups[8];
  for (int i = 0; i < 8; ++i)
    groups[i] = static_cast<uint16_t>(a.bytes[2 * i] << 8 | a.bytes[2 * i + 1]);
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
  std::string out;
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
  if (!a.zone.empty()) out += "%" + a.zone;
  return out;
}

bool IsUnspecified(const Addr& a) {
  const int n = a.is4 ? 4 : 16;
  for (int i = 0; i < n; ++i) {
    if (a.bytes[i] != 0) return false;
  }
  return true;
}

bool IsLoopback(const Addr& a) {
  if (a.is4) return a.bytes[0] == 127;
  for (int i = 0; i < 15; ++i) {
    if (a.bytes[i] != 0) return false;
  }
  return a.bytes[15] == 1;
}

bool IsMulticast(const Addr& a) { return a.is4 ? (a.bytes[0] & 0xF0) == 0xE0 : a.bytes[0] == 0xFF; }

bool IsLinkLocalMulticast(const Addr& a) {
  if (a.is4) return a.bytes[0] == 224 && a.bytes[1] == 0 && a.bytes[2] == 0;
  return a.bytes[0] == 0xFF && (a.bytes[1] & 0x0F) == 0x02;
}

bool IsLinkLocalUnicast(const Addr& a) {
  if (a.is4) return a.bytes[0] == 169 && a.bytes[1] == 254;
  return a.bytes[0] == 0xFE && (a.bytes[1] & 0xC0) == 0x80;
}

bool IsGlobalUnicast(const Addr& a) {
  if (a.is4 && (IsUnspecified(a) || (a.bytes[0] == 255 && a.bytes[1] == 255 && a.bytes[2] == 255 &&
                                     a.bytes[3] == 255))) {
    return false;
  }
  return !IsUnspecified(a) && !IsLoopback(a) && !IsMulticast(a) && !IsLinkLocalUnicast(a);
}

struct Prefix {
  Addr addr;
  int bits = 0;
  bool operator==(const Prefix&) const = default;
};

Addr MaskAddr(const Addr& a, int bits) {
  Addr out = a;
  const int n = a.is4 ? 4 : 16;
  for (int i = 0; i < n; ++i) {
    const int keep = bits - 8 * i;
    if (keep >= 8) continue;
    out.bytes[i] = keep <= 0 ? 0 : static_cast<uint8_t>(a.bytes[i] & (0xFF << (8 - keep)));
  }
  return out;
}

bool PrefixContains(const Prefix& p, const Addr& a) {
  if (!a.zone.empty() || p.addr.is4 != a.is4) return false;
  return MaskAddr(a, p.bits) == MaskAddr(p.addr, p.bits);
}

// Go's netip.ParsePrefix plus Kubernetes' parseCIDR.
std::optional<Prefix> ParseKubernetesCIDR(std::string_view raw, std::string* error) {
  auto fail = [&](std::string msg) {
    *error = "network address parse error during conversion from string: netip.ParsePrefix(" +
             core::GoQuote(raw) + "): " + msg;
    return std::nullopt;
  };
  const size_t slash = raw.rfind('/');
  if (slash == std::string_view::npos) return fail("no '/'");
  std::string err;
  auto addr = ParseAddr(raw.substr(0, slash), &err);
  if (!addr) return fail(err);
  if (!addr->is4 && !addr->zone.empty()) return fail("IPv6 zones cannot be present in a prefix");
  const std::string_view bits_str = raw.substr(slash + 1);
  const std::string bad_bits = "bad bits after slash: " + core::GoQuote(bits_str);
  if (bits_str.empty() || (bits_str.size() > 1 && (bits_str[0] < '1' || bits_str[0] > '9'))) {
    return fail(bad_bits);
  }
  for (char c : bits_str) {
    if (c < '0' || c > '9') return fail(bad_bits);
  }
  if (bits_str.size() > 3 || std::stoi(std::string(bits_str)) > addr->bit_len()) {
    return fail("prefix length out of range");
  }
  const int bits = std::stoi(std::string(bits_str));
  if (addr->Is4In6()) {
    *error = "IPv4-mapped IPv6 address " + core::GoQuote(raw) + " is not allowed";
    return std::nullopt;
  }
  return Prefix{*addr, bits};
}

class IPValue final : public OpaqueValue {
 public:
  explicit IPValue(Addr addr) : addr_(std::move(addr)) {}
  std::string_view type_name() const override { return kIPType; }
  bool Equals(const OpaqueValue& other) const override {
    const auto* o = dynamic_cast<const IPValue*>(&other);
    return o != nullptr && o->addr_ == addr_;
  }
  std::string DebugString() const override { return "ip(\"" + AddrString(addr_) + "\")"; }
  const Addr& addr() const { return addr_; }

 private:
  Addr addr_;
};

class CIDRValue final : public OpaqueValue {
 public:
  explicit CIDRValue(Prefix prefix) : prefix_(std::move(prefix)) {}
  std::string_view type_name() const override { return kCIDRType; }
  bool Equals(const OpaqueValue& other) const override {
    const auto* o = dynamic_cast<const CIDRValue*>(&other);
    return o != nullptr && o->prefix_ == prefix_;
  }
  std::string DebugString() const override { return "cidr(\"" + String() + "\")"; }
  std::string String() const {
    return AddrString(prefix_.addr) + "/" + std::to_string(prefix_.bits);
  }
  const Prefix& prefix() const { return prefix_; }

 private:
  Prefix prefix_;
};

const Addr& AddrOf(const Value& v) { return static_cast<const IPValue&>(v.opaque()).addr(); }
const CIDRValue& CIDROf(const Value& v) { return static_cast<const CIDRValue&>(v.opaque()); }

Value MakeIP(Addr a) { return Value::Opaque(std::make_shared<IPValue>(std::move(a))); }
Value MakeCIDR(Prefix p) { return Value::Opaque(std::make_shared<CIDRValue>(std::move(p))); }

Value CostExceeded() { return Value::MakeError("operation cancelled: actual cost limit exceeded"); }

// Charges the string traversal of args[0] (or args[1] for member calls on a CIDR).
bool ChargeString(const Value& s, EvalContext& ctx, double factor = 0.1) {
  return ctx.Charge(internal::TraversalCost(s.string_value().size(), factor));
}

bool ContainsCIDR(const Prefix& outer, const Prefix& inner) {
  if (outer.addr.is4 != inner.addr.is4) return false;
  const bool equal_masked = MaskAddr(outer.addr, outer.bits) == MaskAddr(inner.addr, outer.bits);
  return equal_masked && outer.bits <= inner.bits;
}

}  // namespace

void internal::InstallIPLibrary(FunctionRegistry& registry) {
  const Param str = Param::Of(Kind::kString);
  const Param ip = Param::OfOpaque(kIPType);
  const Param cidr = Param::OfOpaque(kCIDRType);

  registry.Add("ip", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[0], ctx)) return CostExceeded();
    std::string error;
    auto addr = ParseKubernetesIP(a[0].string_value(), &error);
    if (!addr) return Value::MakeError(error);
    return MakeIP(std::move(*addr));
  });
  registry.Add("isIP", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[0], ctx)) return CostExceeded();
    std::string error;
    return Value::Bool(ParseKubernetesIP(a[0].string_value(), &error).has_value());
  });
  registry.Add("ip.isCanonical", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[0], ctx, 0.2)) return CostExceeded();
    std::string error;
    auto addr = ParseKubernetesIP(a[0].string_value(), &error);
    if (!addr) return Value::MakeError(error);
    return Value::Bool(AddrString(*addr) == a[0].string_value());
  });
  registry.Add("string", false, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(AddrString(AddrOf(a[0])));
  });
  registry.Add("family", true, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::Int(AddrOf(a[0]).is4 ? 4 : 6);
  });
  registry.Add("isUnspecified", true, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::Bool(IsUnspecified(AddrOf(a[0])));
  });
  registry.Add("isLoopback", true, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::Bool(IsLoopback(AddrOf(a[0])));
  });
  registry.Add("isLinkLocalMulticast", true, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::Bool(IsLinkLocalMulticast(AddrOf(a[0])));
  });
  registry.Add("isLinkLocalUnicast", true, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::Bool(IsLinkLocalUnicast(AddrOf(a[0])));
  });
  registry.Add("isGlobalUnicast", true, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::Bool(IsGlobalUnicast(AddrOf(a[0])));
  });

  registry.Add("cidr", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[0], ctx)) return CostExceeded();
    std::string error;
    auto prefix = ParseKubernetesCIDR(a[0].string_value(), &error);
    if (!prefix) {
      return Value::MakeError("network address parse error during conversion from string: " +
                              error);
    }
    return MakeCIDR(std::move(*prefix));
  });
  registry.Add("isCIDR", false, {str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[0], ctx)) return CostExceeded();
    std::string error;
    return Value::Bool(ParseKubernetesCIDR(a[0].string_value(), &error).has_value());
  });
  registry.Add("string", false, {cidr}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(CIDROf(a[0]).String());
  });
  registry.Add("containsIP", true, {cidr, str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[1], ctx)) return CostExceeded();
    std::string error;
    auto addr = ParseKubernetesIP(a[1].string_value(), &error);
    // kube-apiserver reports an unparsable string here as a missing overload.
    if (!addr) return internal::NoSuchOverload();
    return Value::Bool(PrefixContains(CIDROf(a[0]).prefix(), *addr));
  });
  registry.Add("containsIP", true, {cidr, ip}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ctx.Charge(4)) return CostExceeded();
    return Value::Bool(PrefixContains(CIDROf(a[0]).prefix(), AddrOf(a[1])));
  });
  registry.Add("containsCIDR", true, {cidr, str}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ChargeString(a[1], ctx)) return CostExceeded();
    std::string error;
    auto inner = ParseKubernetesCIDR(a[1].string_value(), &error);
    if (!inner) {
      return Value::MakeError("network address parse error during conversion from string: " +
                              error);
    }
    return Value::Bool(ContainsCIDR(CIDROf(a[0]).prefix(), *inner));
  });
  registry.Add("containsCIDR", true, {cidr, cidr}, [](std::span<const Value> a, EvalContext& ctx) {
    if (!ctx.Charge(5)) return CostExceeded();
    return Value::Bool(ContainsCIDR(CIDROf(a[0]).prefix(), CIDROf(a[1]).prefix()));
  });
  registry.Add("ip", true, {cidr}, [](std::span<const Value> a, EvalContext&) {
    return MakeIP(CIDROf(a[0]).prefix().addr);
  });
  registry.Add("masked", true, {cidr}, [](std::span<const Value> a, EvalContext&) {
    const Prefix& p = CIDROf(a[0]).prefix();
    return MakeCIDR(Prefix{MaskAddr(p.addr, p.bits), p.bits});
  });
  registry.Add("prefixLength", true, {cidr}, [](std::span<const Value> a, EvalContext&) {
    return Value::Int(CIDROf(a[0]).prefix().bits);
  });
}

}  // namespace klutch::cel
