// Kubernetes' IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go, cidr.go) on
// opaque "net.IP" and "net.CIDR" values. Parsing is core::ParseIp / ParseIpPrefix in Go's
// netip.ParseAddr and netip.ParsePrefix flavour (no leading zeros in IPv4 octets or prefix
// lengths, no zones in prefixes) plus Kubernetes' own rejections of zones and IPv4-mapped IPv6
// addresses; error messages are worded as kube-apiserver words them.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cel/cel.h"
#include "cel/library_util.h"
#include "cel/value.h"
#include "core/ip.h"
#include "core/strings.h"

namespace klutch::cel {
namespace {

constexpr std::string_view kIPType = "net.IP";
constexpr std::string_view kCIDRType = "net.CIDR";

using Addr = core::IpAddress;
using Prefix = core::IpPrefix;

// Kubernetes' parseIPAddr: netip.ParseAddr, then no zone and no IPv4-mapped address.
std::optional<Addr> ParseKubernetesIP(std::string_view raw, std::string* error) {
  core::IpParseError problem;
  auto addr = core::ParseIp(raw, {.allow_zone = false, .allow_ipv4_mapped = false}, &problem);
  if (!addr) {
    *error = problem.kind == core::IpParseError::Kind::kSyntax
                 ? "IP Address " + core::GoQuote(raw) +
                       " parse error during conversion from string: " + problem.message
                 : problem.message;
  }
  return addr;
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

// Kubernetes' parseCIDR: netip.ParsePrefix, then no IPv4-mapped address.
std::optional<Prefix> ParseKubernetesCIDR(std::string_view raw, std::string* error) {
  core::IpParseError problem;
  auto prefix = core::ParseIpPrefix(
      raw, {.allow_length_leading_zeros = false, .allow_ipv4_mapped = false}, &problem);
  if (!prefix) {
    *error = problem.kind == core::IpParseError::Kind::kSyntax
                 ? "network address parse error during conversion from string: " + problem.message
                 : problem.message;
  }
  return prefix;
}

class IPValue final : public OpaqueValue {
 public:
  explicit IPValue(Addr addr) : addr_(std::move(addr)) {}
  std::string_view type_name() const override { return kIPType; }
  bool Equals(const OpaqueValue& other) const override {
    const auto* o = dynamic_cast<const IPValue*>(&other);
    return o != nullptr && o->addr_ == addr_;
  }
  std::string DebugString() const override { return "ip(\"" + addr_.ToString() + "\")"; }
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
  std::string String() const { return prefix_.ToString(); }
  const Prefix& prefix() const { return prefix_; }

 private:
  Prefix prefix_;
};

const Addr& AddrOf(const Value& v) { return static_cast<const IPValue&>(v.opaque()).addr(); }
const CIDRValue& CIDROf(const Value& v) { return static_cast<const CIDRValue&>(v.opaque()); }

Value MakeIP(Addr a) { return Value::Opaque(std::make_shared<IPValue>(std::move(a))); }
Value MakeCIDR(Prefix p) { return Value::Opaque(std::make_shared<CIDRValue>(std::move(p))); }

using internal::CostExceeded;

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
    return Value::Bool(addr->ToString() == a[0].string_value());
  });
  registry.Add("string", false, {ip}, [](std::span<const Value> a, EvalContext&) {
    return Value::String(AddrOf(a[0]).ToString());
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
