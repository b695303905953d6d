#include "schema/formats.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace klutch::schema::formats_test {
namespace {

struct Case {
  std::string format;
  std::string value;
  bool valid;
};

void ExpectFormats(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    ASSERT_TRUE(IsValidatedFormat("string", c.format)) << c.format;
    EXPECT_EQ(MatchesFormat(c.format, c.value), c.valid) << c.format << ": \"" << c.value << "\"";
  }
}

// kube-openapi checks ipv4 and ipv6 with govalidator: net.ParseIP, told apart by the separator
// the text contains. Unlike Kubernetes' CEL ip() (cel/k8s_library_test.cc), IPv4-mapped IPv6
// addresses pass, even as "ipv4".
TEST(MatchesFormat, IpAddressesAsNetParseIpReadsThem) {
  ExpectFormats({
      {"ipv4", "192.168.0.1", true},
      {"ipv4", "::ffff:192.168.0.1", true},
      {"ipv4", "010.0.0.1", false},
      {"ipv4", "256.0.0.1", false},
      {"ipv4", "2001:db8::1", false},
      {"ipv4", "1.2.3", false},
      {"ipv6", "2001:db8::1", true},
      {"ipv6", "::ffff:192.168.0.1", true},
      {"ipv6", "::1.2.3.4", true},
      {"ipv6", "fe80::1%eth0", false},
      {"ipv6", "192.168.0.1", false},
      {"ipv6", "1::2::3", false},
  });
}

// cidr is net.ParseCIDR: the prefix length may have leading zeros, which CEL's cidr() (and
// netip.ParsePrefix) refuse.
TEST(MatchesFormat, CidrAsNetParseCidrReadsIt) {
  ExpectFormats({
      {"cidr", "10.0.0.0/8", true},
      {"cidr", "10.1.2.3/8", true},
      {"cidr", "10.0.0.0/08", true},
      {"cidr", "10.0.0.0/0032", true},
      {"cidr", "2001:db8::/32", true},
      {"cidr", "::ffff:10.0.0.0/104", true},
      {"cidr", "10.0.0.0/33", false},
      {"cidr", "10.0.0.0", false},
      {"cidr", "10.0.0.0/+8", false},
      {"cidr", "fe80::%eth0/64", false},
      {"cidr", "010.0.0.0/8", false},
  });
}

// strfmt.ParseDuration: Go's time.ParseDuration (within its int64 nanoseconds), else a run of
// "<digits> <unit>" pairs with longer unit names.
TEST(MatchesFormat, DurationAsStrfmtReadsIt) {
  ExpectFormats({
      {"duration", "1h30m", true},
      {"duration", "-1.5s", true},
      {"duration", "0", true},
      {"duration", "3 days", true},
      {"duration", "2w", true},
      {"duration", "5 Hours", true},
      {"duration", "9999999999h", true},  // overflows Go's parser, not the fallback
      {"duration", "9223372036854775807ns", true},
      {"duration", "9223372036854775808ns", false},  // too large for either
      {"duration", "1", false},
      {"duration", "1 fortnight", false},
      {"duration", "", false},
  });
}

// quantity is resource.ParseQuantity, the same parser as CEL's quantity().
TEST(MatchesFormat, QuantityAsParseQuantityReadsIt) {
  ExpectFormats({
      {"quantity", "500m", true},
      {"quantity", "2Gi", true},
      {"quantity", "1.5", true},
      {"quantity", "1e3", true},
      {"quantity", "1E-3", true},
      {"quantity", "+.5Ki", true},
      {"quantity", "1.", true},
      {"quantity", "-", true},  // zero, as Go reads it
      {"quantity", ".", true},
      {"quantity", "Ki", true},
      {"quantity", "1234567890123456789012345678901234567890123456789Ki", true},
      {"quantity", "Pi", false},  // no digits where Go needs big-number arithmetic
      {"quantity", "", false},
      {"quantity", "1e", false},
      {"quantity", "1Kib", false},
      {"quantity", "1.5.5", false},
      {"quantity", "1 Gi", false},
      {"quantity", "10Z", false},
  });
}

}  // namespace
}  // namespace klutch::schema::formats_test
