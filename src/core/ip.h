// IP addresses and prefixes in Go's syntax: the one parser behind the OpenAPI "ipv4", "ipv6"
// and "cidr" formats and CEL's ip() and cidr().
//
// Go has two parsers that differ in small ways, and Kubernetes uses both: net/netip
// (ParseAddr, ParsePrefix; used by Kubernetes' CEL libraries) and the older net (ParseIP,
// ParseCIDR; used by the OpenAPI formats). Both read IPv4 as four decimal octets without leading
// zeros ("010.0.0.1" is refused) and IPv6 with "::" and an optional dotted IPv4 tail. Where they
// differ, the options below choose:
//  - zones ("fe80::1%eth0"): netip.ParseAddr keeps them, net.ParseIP refuses them; neither
//    prefix parser accepts one;
//  - the prefix length: netip.ParsePrefix refuses a leading zero ("10.0.0.0/08"),
//    net.ParseCIDR reads any run of decimal digits ("/08", "/0032").
// Kubernetes' CEL libraries also refuse IPv4-mapped IPv6 addresses ("::ffff:1.2.3.4"), which
// both Go parsers accept.
//
// Value types and pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace klutch::core {

struct IpAddress {
  bool is4 = false;
  std::array<uint8_t, 16> bytes{};  // network order; an IPv4 address uses the first 4
  std::string zone;                 // IPv6 zone, without the '%'

  int BitLength() const { return is4 ? 32 : 128; }
  // An IPv6 address of the form ::ffff:a.b.c.d.
  bool Is4In6() const;
  // Go's Addr.String: dotted IPv4; IPv6 as RFC 5952 (lower case, the longest run of two or more
  // zero groups as "::"), "::ffff:a.b.c.d" for IPv4-mapped addresses; then "%zone".
  std::string ToString() const;
  bool operator==(const IpAddress& other) const;
};

struct IpPrefix {
  IpAddress addr;  // as written, not masked
  int bits = 0;
  std::string ToString() const { return addr.ToString() + "/" + std::to_string(bits); }
  bool operator==(const IpPrefix&) const = default;
};

struct IpParseOptions {
  bool allow_zone = true;         // netip.ParseAddr: true; net.ParseIP: false
  bool allow_ipv4_mapped = true;  // Go: true; Kubernetes' CEL ip(): false
};

struct PrefixParseOptions {
  bool allow_length_leading_zeros = false;  // netip.ParsePrefix: false; net.ParseCIDR: true
  bool allow_ipv4_mapped = true;            // Go: true; Kubernetes' CEL cidr(): false
};

// Why a parse failed.
struct IpParseError {
  enum class Kind {
    kSyntax,      // malformed; `message` is Go's wording, such as
                  // `ParseAddr("1.2.3"): IPv4 address too short` or
                  // `netip.ParsePrefix("1.2.3.4"): no '/'` (`invalid CIDR address: ...` with
                  // allow_length_leading_zeros, as net.ParseCIDR words it)
    kZone,        // a zone where options refuse it
    kIpv4Mapped,  // an IPv4-mapped address where options refuse it
  };
  Kind kind = Kind::kSyntax;
  std::string message;
};

// Parses an IPv4 or IPv6 address. On failure returns nullopt and, when `error` is given, says
// why.
std::optional<IpAddress> ParseIp(std::string_view text, const IpParseOptions& options,
                                 IpParseError* error = nullptr);

// Parses "<address>/<length>" (no zone allowed, length at most the address's bit length).
std::optional<IpPrefix> ParseIpPrefix(std::string_view text, const PrefixParseOptions& options,
                                      IpParseError* error = nullptr);

}  // namespace klutch::core
