#include "core/ip.h"

#include <gtest/gtest.h>

#include <string>

namespace klutch::core::ip_test {
namespace {

constexpr IpParseOptions kNetip = {.allow_zone = true, .allow_ipv4_mapped = true};
constexpr IpParseOptions kNet = {.allow_zone = false, .allow_ipv4_mapped = true};
constexpr IpParseOptions kKubernetesCel = {.allow_zone = false, .allow_ipv4_mapped = false};

// Where Go's two parsers and Kubernetes' CEL rules agree and where they differ, in one table:
// netip.ParseAddr, net.ParseIP, and Kubernetes' CEL ip().
TEST(ParseIp, EachFlavourAcceptsWhatItsUpstreamAccepts) {
  struct Case {
    std::string text;
    bool netip, net, cel;
    std::string canonical;  // ToString() when netip accepts
  };
  const Case cases[] = {
      {"192.168.0.1", true, true, true, "192.168.0.1"},
      {"0.0.0.0", true, true, true, "0.0.0.0"},
      {"255.255.255.255", true, true, true, "255.255.255.255"},
      {"2001:DB8::1", true, true, true, "2001:db8::1"},
      {"2001:db8:0:0:1:0:0:1", true, true, true, "2001:db8::1:0:0:1"},
      {"::", true, true, true, "::"},
      {"::1", true, true, true, "::1"},
      {"1::", true, true, true, "1::"},
      {"::1.2.3.4", true, true, true, "::102:304"},
      {"1:2:3:4:5:6:1.2.3.4", true, true, true, "1:2:3:4:5:6:102:304"},
      // Zones: netip keeps them; net.ParseIP and Kubernetes refuse them.
      {"fe80::1%eth0", true, false, false, "fe80::1%eth0"},
      // IPv4-mapped IPv6: Go accepts it; Kubernetes' CEL refuses it.
      {"::ffff:1.2.3.4", true, true, false, "::ffff:1.2.3.4"},
      {"::FFFF:0102:0304", true, true, false, "::ffff:1.2.3.4"},
      // Every flavour refuses leading zeros in an octet (Go since 1.17).
      {"010.0.0.1", false, false, false, ""},
      {"1.2.3.04", false, false, false, ""},
      {"::ffff:1.2.3.04", false, false, false, ""},
      {"1.2.3", false, false, false, ""},
      {"1.2.3.4.5", false, false, false, ""},
      {"256.0.0.1", false, false, false, ""},
      {"1.2.3.4 ", false, false, false, ""},
      {"1:2:3:4:5:6:7", false, false, false, ""},
      {"1:2:3:4:5:6:7:8:9", false, false, false, ""},
      {"1::2::3", false, false, false, ""},
      {"12345::1", false, false, false, ""},
      {"1:2:3:4:5:6:7:8::", false, false, false, ""},
      {"1.2.3.4::", false, false, false, ""},
      {"fe80::1%", false, false, false, ""},
      {"%eth0", false, false, false, ""},
      {"", false, false, false, ""},
      {"localhost", false, false, false, ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    std::optional<IpAddress> netip = ParseIp(c.text, kNetip);
    EXPECT_EQ(netip.has_value(), c.netip);
    EXPECT_EQ(ParseIp(c.text, kNet).has_value(), c.net);
    EXPECT_EQ(ParseIp(c.text, kKubernetesCel).has_value(), c.cel);
    if (netip) {
      EXPECT_EQ(netip->ToString(), c.canonical);
    }
  }
}

TEST(ParseIp, SaysWhyInGoWording) {
  struct Case {
    std::string text;
    IpParseOptions options;
    IpParseError::Kind kind;
    std::string message;
  };
  using Kind = IpParseError::Kind;
  const Case cases[] = {
      {"1.2.3", kNetip, Kind::kSyntax, "ParseAddr(\"1.2.3\"): IPv4 address too short"},
      {"01.2.3.4", kNetip, Kind::kSyntax,
       "ParseAddr(\"01.2.3.4\"): IPv4 field has octet with leading zero"},
      {"1.2.3.256", kNetip, Kind::kSyntax, "ParseAddr(\"1.2.3.256\"): IPv4 field has value >255"},
      {"1::2::3", kNetip, Kind::kSyntax,
       "ParseAddr(\"1::2::3\"): multiple :: in address (at \":3\")"},
      {"abc", kNetip, Kind::kSyntax, "ParseAddr(\"abc\"): unable to parse IP"},
      {"fe80::1%eth0", kNet, Kind::kZone,
       "IP address \"fe80::1%eth0\" with zone value is not allowed"},
      {"::ffff:1.2.3.4", kKubernetesCel, Kind::kIpv4Mapped,
       "IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed"},
  };
  for (const Case& c : cases) {
    IpParseError error;
    EXPECT_FALSE(ParseIp(c.text, c.options, &error).has_value()) << c.text;
    EXPECT_EQ(error.kind, c.kind) << c.text;
    EXPECT_EQ(error.message, c.message);
  }
  EXPECT_FALSE(ParseIp("x", kNet).has_value());  // no error requested
}

constexpr PrefixParseOptions kParsePrefix = {.allow_length_leading_zeros = false,
                                             .allow_ipv4_mapped = true};
constexpr PrefixParseOptions kParseCidr = {.allow_length_leading_zeros = true,
                                           .allow_ipv4_mapped = true};
constexpr PrefixParseOptions kCelCidr = {.allow_length_leading_zeros = false,
                                         .allow_ipv4_mapped = false};

// netip.ParsePrefix, net.ParseCIDR (the OpenAPI "cidr" format) and Kubernetes' CEL cidr().
TEST(ParseIpPrefix, EachFlavourAcceptsWhatItsUpstreamAccepts) {
  struct Case {
    std::string text;
    bool netip, net, cel;
  };
  const Case cases[] = {
      {"10.0.0.0/8", true, true, true},
      {"10.1.2.3/8", true, true, true},  // host bits may be set
      {"0.0.0.0/0", true, true, true},
      {"192.168.0.1/32", true, true, true},
      {"2001:db8::/32", true, true, true},
      {"::/0", true, true, true},
      {"::1/128", true, true, true},
      // Leading zeros in the length: net.ParseCIDR reads them, netip.ParsePrefix does not.
      {"10.0.0.0/08", false, true, false},
      {"10.0.0.0/0032", false, true, false},
      {"10.0.0.0/00", false, true, false},
      // IPv4-mapped: Go accepts them (up to 128 bits); Kubernetes' CEL refuses them.
      {"::ffff:1.2.3.4/120", true, true, false},
      {"10.0.0.0/33", false, false, false},
      {"::/129", false, false, false},
      {"10.0.0.0", false, false, false},
      {"10.0.0.0/", false, false, false},
      {"10.0.0.0/+8", false, false, false},
      {"10.0.0.0/-1", false, false, false},
      {"10.0.0.0/8/8", false, false, false},
      {"10.0.0.0/8 ", false, false, false},
      {"fe80::%eth0/64", false, false, false},
      {"010.0.0.0/8", false, false, false},
      {"10.0.0.0/99999999999999999999", false, false, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_EQ(ParseIpPrefix(c.text, kParsePrefix).has_value(), c.netip);
    EXPECT_EQ(ParseIpPrefix(c.text, kParseCidr).has_value(), c.net);
    EXPECT_EQ(ParseIpPrefix(c.text, kCelCidr).has_value(), c.cel);
  }
  std::optional<IpPrefix> p = ParseIpPrefix("10.1.2.3/8", kParsePrefix);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->bits, 8);
  EXPECT_EQ(p->ToString(), "10.1.2.3/8");
  EXPECT_EQ(ParseIpPrefix("10.0.0.0/0008", kParseCidr)->bits, 8);
}

TEST(ParseIpPrefix, SaysWhyInGoWording) {
  struct Case {
    std::string text;
    PrefixParseOptions options;
    IpParseError::Kind kind;
    std::string message;
  };
  using Kind = IpParseError::Kind;
  const Case cases[] = {
      {"10.0.0.0", kParsePrefix, Kind::kSyntax, "netip.ParsePrefix(\"10.0.0.0\"): no '/'"},
      {"10.0.0/8", kParsePrefix, Kind::kSyntax,
       "netip.ParsePrefix(\"10.0.0/8\"): ParseAddr(\"10.0.0\"): IPv4 address too short"},
      {"fe80::%eth0/64", kParsePrefix, Kind::kSyntax,
       "netip.ParsePrefix(\"fe80::%eth0/64\"): IPv6 zones cannot be present in a prefix"},
      {"10.0.0.0/08", kParsePrefix, Kind::kSyntax,
       "netip.ParsePrefix(\"10.0.0.0/08\"): bad bits after slash: \"08\""},
      {"10.0.0.0/33", kParsePrefix, Kind::kSyntax,
       "netip.ParsePrefix(\"10.0.0.0/33\"): prefix length out of range"},
      {"10.0.0.0/99999999999999999999", kParsePrefix, Kind::kSyntax,
       "netip.ParsePrefix(\"10.0.0.0/99999999999999999999\"): bad bits after slash: "
       "\"99999999999999999999\""},
      {"10.0.0.0/33", kParseCidr, Kind::kSyntax, "invalid CIDR address: 10.0.0.0/33"},
      {"::ffff:1.2.3.4/120", kCelCidr, Kind::kIpv4Mapped,
       "IPv4-mapped IPv6 address \"::ffff:1.2.3.4/120\" is not allowed"},
  };
  for (const Case& c : cases) {
    IpParseError error;
    EXPECT_FALSE(ParseIpPrefix(c.text, c.options, &error).has_value()) << c.text;
    EXPECT_EQ(error.kind, c.kind) << c.text;
    EXPECT_EQ(error.message, c.message);
  }
}

}  // namespace
}  // namespace klutch::core::ip_test
