#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cel/cel.h"
#include "cel/quantity.h"

namespace klutch::cel::k8s_library_test {
namespace {

// Calls the first overload of a global function registered under `name` directly (the
// parser does not resolve the "sets." and "ip." namespaces yet).
Value Call(std::string_view name, std::vector<Value> args) {
  FunctionRegistry registry;
  InstallKubernetesLibraries(registry);
  const auto* overloads = registry.Find(name);
  EXPECT_NE(overloads, nullptr) << name;
  if (overloads == nullptr) return Value::MakeError("missing");
  EvalContext ctx;
  return overloads->front().body(args, ctx);
}

Value Ints(std::vector<int64_t> items) {
  std::vector<Value> values;
  for (int64_t i : items) values.push_back(Value::Int(i));
  return Value::List(std::move(values));
}

Value Eval(std::string_view expr) {
  auto program = Env::Kubernetes()->Compile(expr, CompileOptions{});
  EXPECT_TRUE(program.ok()) << expr << ": " << program.status().message();
  if (!program.ok()) return Value::MakeError(program.status().message());
  return (*program)->Evaluate(MapActivation()).value;
}

// Each expression must evaluate to true.
void ExpectTrue(const std::vector<const char*>& exprs) {
  for (const char* expr : exprs) {
    const Value v = Eval(expr);
    EXPECT_TRUE(v.kind() == Kind::kBool && v.bool_value()) << expr << " = " << v.DebugString();
  }
}

struct ErrorCase {
  const char* expr;
  const char* want;
};

void ExpectErrors(const std::vector<ErrorCase>& cases) {
  for (const ErrorCase& c : cases) {
    const Value v = Eval(c.expr);
    ASSERT_TRUE(v.is_error()) << c.expr << " = " << v.DebugString();
    EXPECT_EQ(v.error_message(), c.want) << c.expr;
  }
}

TEST(KubernetesLists, AggregatesComparableElements) {
  ExpectTrue({
      "[1, 2, 3].sum() == 6",
      "[1.5, 2.5].sum() == 4.0",
      "[1u, 2u].sum() == 3u",
      "[duration('1m'), duration('1s')].sum() == duration('61s')",
      "[].sum() == 0",
      "[1, 2, 2, 3].isSorted() && ['a', 'b', 'b'].isSorted() && [].isSorted()",
      "![2.0, 1.0].isSorted()",
      "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3",
      "['b', 'a'].min() == 'a' && [b'b', b'a'].max() == b'b'",
      "[timestamp('2020-01-01T00:00:00Z'), timestamp('2019-01-01T00:00:00Z')].min() == "
      "timestamp('2019-01-01T00:00:00Z')",
      "[1, 2, 2, 3].indexOf(2) == 1 && [1, 2, 2, 3].lastIndexOf(2) == 2",
      "[1.0].indexOf(1.1) == -1 && [].indexOf('x') == -1",
  });
  ExpectErrors({
      {"[].min()", "min called on empty list"},
      {"[].max()", "max called on empty list"},
      {"[9223372036854775807, 1].sum()", "integer overflow"},
      {"[1, 'a'].max()", "no such overload"},
  });
}

TEST(KubernetesSets, ComparesListsAsSets) {
  EXPECT_EQ(Call("sets.contains", {Ints({1, 2, 3}), Ints({3, 1})}).DebugString(), "true");
  EXPECT_EQ(Call("sets.contains", {Ints({1}), Ints({2})}).DebugString(), "false");
  EXPECT_EQ(Call("sets.contains", {Ints({}), Ints({})}).DebugString(), "true");
  EXPECT_EQ(Call("sets.equivalent", {Ints({1, 2}), Ints({2, 1, 1})}).DebugString(), "true");
  EXPECT_EQ(Call("sets.equivalent", {Ints({1, 2}), Ints({1})}).DebugString(), "false");
  EXPECT_EQ(Call("sets.intersects", {Ints({1, 2}), Ints({2, 5})}).DebugString(), "true");
  EXPECT_EQ(Call("sets.intersects", {Ints({1, 2}), Ints({})}).DebugString(), "false");
}

TEST(KubernetesRegex, FindsLikeGoRegexp) {
  ExpectTrue({
      "'abc 123'.find('[0-9]+') == '123'",
      "'abc'.find('[0-9]+') == ''",
      "'1, 2, 3, 4'.findAll('[0-9]+') == ['1', '2', '3', '4']",
      "'1, 2, 3, 4'.findAll('[0-9]+', 2) == ['1', '2']",
      "'1, 2'.findAll('[0-9]+', 0) == []",
      "'abc'.findAll('') == ['', '', '', '']",
      "'a1b'.findAll('[0-9]*') == ['', '1', '']",
      "'ééa'.findAll('é') == ['é', 'é']",
  });
  ExpectErrors({
      {"'abc'.find('(a')", "Illegal regex: error parsing regexp: missing closing ): `(a`"},
  });
}

TEST(KubernetesURLs, ParsesLikeGoParseRequestURI) {
  ExpectTrue({
      "url('https://x.io:80/p').getPort() == '80'",
      "url('https://user:pass@example.com:80/path?query=val#fragment').getHost() == "
      "'example.com:80'",
      "url('https://example.com:80/').getHostname() == 'example.com'",
      "url('https://[::1]:80/').getHostname() == '::1' && url('https://[::1]:80/').getHost() == "
      "'[::1]:80'",
      "url('/path').getScheme() == '' && url('/path').getHost() == ''",
      "url('HTTPS://example.com/').getScheme() == 'https'",
      "url('https://example.com/path with spaces/').getEscapedPath() == "
      "'/path%20with%20spaces/'",
      "url('https://example.com').getEscapedPath() == ''",
      "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', "
      "'c']}",
      "url('https://example.com/path?key with spaces=value with spaces').getQuery() == {'key "
      "with spaces': ['value with spaces']}",
      "url('https://example.com/path?').getQuery() == {}",
      "url('https://example.com/p#frag').getEscapedPath() == '/p'",
      "isURL('https://example.com/') && isURL('/absolute-path')",
      "!isURL('https://a:b:c/') && !isURL('../relative-path') && !isURL('')",
      "url('https://example.com/') == url('https://example.com/')",
  });
  ExpectErrors({
      {"url('https://a:b:c/')",
       "URL parse error during conversion from string: parse \"https://a:b:c/\": invalid port "
       "\":c\" after host"},
      {"url('../relative-path')",
       "URL parse error during conversion from string: parse \"../relative-path\": invalid URI "
       "for request"},
      {"url('https://example.com/%zz')",
       "URL parse error during conversion from string: parse \"https://example.com/%zz\": "
       "invalid URL escape \"%zz\""},
  });
}

TEST(KubernetesQuantity, ComparesExactly) {
  ExpectTrue({
      "quantity('1Gi').isGreaterThan(quantity('1M'))",
      "quantity('1Gi') == quantity('1024Mi')",
      "quantity('1k') == quantity('1000') && quantity('1e3') == quantity('1000')",
      "quantity('500m').isLessThan(quantity('1'))",
      "quantity('1').compareTo(quantity('1000m')) == 0",
      "quantity('200M').compareTo(quantity('0.1G')) == 1",
      "quantity('9223372036854775807').isLessThan(quantity('9223372036854775808'))",
      "quantity('100000000000000000000001').isGreaterThan(quantity('100000000000000000000000'))",
      "quantity('1n').isGreaterThan(quantity('0'))",
      "quantity('0.0000000001').compareTo(quantity('1n')) == 0",  // rounded up to nano
      "quantity('-1.5').sign() == -1 && quantity('0').sign() == 0 && sign(quantity('2k')) == 1",
      "quantity('50k').isInteger() && quantity('50k').asInteger() == 50000",
      "!quantity('1.5').isInteger() && !quantity('9999999999999999999999').isInteger()",
      "quantity('50.703k').asInteger() == 50703",
      "quantity('1Ki').asInteger() == 1024",
      "quantity('1.5').asApproximateFloat() == 1.5",
      "quantity('1Gi').add(quantity('1Gi')) == quantity('2Gi')",
      "quantity('1').add(1) == quantity('2') && quantity('10').sub(3).asInteger() == 7",
      "quantity('1500m').sub(quantity('0.5')) == quantity('1')",
      "quantity('1E').add(quantity('1n')).isGreaterThan(quantity('1E'))",
      "isQuantity('1.5Gi') && isQuantity('+1e-3') && !isQuantity('1.5Gb') && !isQuantity('')",
      "!isQuantity('1e') && !isQuantity('1 Ki') && !isQuantity(' 1') && !isQuantity('1e1.5')",
      "!isQuantity('1.1.M') && !isQuantity('0.1mi') && !isQuantity('.5i') && "
      "!isQuantity('-3.01e-')",
  });
  ExpectErrors({
      {"quantity('1.5').asInteger()", "cannot convert value to integer"},
      {"quantity('abc')",
       "quantities must match the regular expression "
       "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
      {"quantity('1Qi')",
       "quantities must match the regular expression "
       "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"},
      {"quantity('1ki')", "unable to parse quantity's suffix"},
  });
}

// resource.ParseQuantity's corners, which the OpenAPI "quantity" format shares through
// cel::IsQuantity (schema/formats_test.cc): a sign or a point alone is zero; a binary suffix
// that needs big-number arithmetic needs a digit; a mantissa beyond quantity()'s exact range is
// still a quantity.
TEST(KubernetesQuantity, AcceptsWhatParseQuantityAccepts) {
  const std::string big = "1234567890123456789012345678901234567890123456789";
  struct Case {
    std::string text;
    bool valid;
  };
  const Case cases[] = {
      {"-", true}, {"+", true},        {".", true},   {"1.", true},   {"Ki", true},
      {"E", true}, {"0.Pi", true},     {"Pi", false}, {"-Ei", false}, {".Pi", false},
      {big, true}, {big + "Ki", true}, {"", false},   {"1e", false},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(IsQuantity(c.text), c.valid) << c.text;
    const Value v = Call("isQuantity", {Value::String(c.text)});
    EXPECT_EQ(v.DebugString(), c.valid ? "true" : "false") << c.text;
  }
  ExpectTrue({"quantity('-') == quantity('0')", "quantity('.') == quantity('0')"});
  ExpectErrors({
      {"quantity('Pi')", "unable to parse numeric part of quantity"},
      {"quantity('1234567890123456789012345678901234567890123456789')",
       "unable to parse numeric part of quantity"},
  });
}

TEST(KubernetesIP, ParsesStrictly) {
  ExpectTrue({
      "ip('192.168.0.1').family() == 4 && ip('::1').family() == 6",
      "isIP('192.168.0.1') && isIP('fe80::1') && !isIP('192.168.0.01')",
      "!isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0') && !isIP('1.2.3') && !isIP('')",
      "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified() && !ip('::1').isUnspecified()",
      "ip('127.0.0.1').isLoopback() && ip('::1').isLoopback()",
      "ip('224.0.0.1').isLinkLocalMulticast() && ip('ff02::1').isLinkLocalMulticast()",
      "!ip('224.0.1.1').isLinkLocalMulticast() && !ip('ff05::1').isLinkLocalMulticast()",
      "ip('169.254.169.254').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast()",
      "!ip('fd80::1').isLinkLocalUnicast()",
      "ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
      "ip('2001:db8::abcd').isGlobalUnicast() && !ip('ff00::1').isGlobalUnicast()",
      "string(ip('2001:DB8:0:0:0:0:0:1')) == '2001:db8::1'",
      "string(ip('1:0:0:1:0:0:0:1')) == '1:0:0:1::1'",
      "ip('127.0.0.1') == ip('127.0.0.1') && ip('127.0.0.1') != ip('127.0.0.2')",
  });
  ExpectErrors({
      {"ip('192.168.0.01')",
       "IP Address \"192.168.0.01\" parse error during conversion from string: "
       "ParseAddr(\"192.168.0.01\"): IPv4 field has octet with leading zero"},
      {"ip('::ffff:1.2.3.4')", "IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed"},
      {"ip('fe80::1%eth0')", "IP address \"fe80::1%eth0\" with zone value is not allowed"},
  });
}

TEST(KubernetesIP, ChecksCanonicalForm) {
  EXPECT_EQ(Call("ip.isCanonical", {Value::String("2001:db8::1")}).DebugString(), "true");
  EXPECT_EQ(Call("ip.isCanonical", {Value::String("2001:DB8::1")}).DebugString(), "false");
  EXPECT_EQ(Call("ip.isCanonical", {Value::String("127.0.0.1")}).DebugString(), "true");
  EXPECT_TRUE(Call("ip.isCanonical", {Value::String("x")}).is_error());
}

TEST(KubernetesCIDR, ContainsAddressesAndPrefixes) {
  ExpectTrue({
      "cidr('10.0.0.0/8').containsIP('10.1.2.3')",
      "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1'))",
      "!cidr('192.168.0.0/24').containsIP('192.168.1.1')",
      "!cidr('192.168.0.0/24').containsIP('::1')",
      "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24'))",
      "cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24')",
      "!cidr('192.168.1.0/24').containsCIDR('192.168.2.0/24')",
      "!cidr('192.168.1.0/24').containsCIDR('192.168.0.0/16')",
      "cidr('192.168.0.1/24').ip() == ip('192.168.0.1')",
      "cidr('::1/128').ip().family() == 6",
      "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24')",
      "cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()",
      "cidr('192.168.0.0/16').prefixLength() == 16 && cidr('::1/128').prefixLength() == 128",
      "string(cidr('2001:DB8::/32')) == '2001:db8::/32'",
      "cidr('10.0.0.0/9').masked() == cidr('10.0.0.0/9')",
      "cidr('10.255.0.0/9').masked() == cidr('10.128.0.0/9')",
      "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0') && !isCIDR('10.0.0.0/33')",
      "!isCIDR('10.0.0.0/08') && !isCIDR('::ffff:1.2.3.4/128')",
  });
  ExpectErrors({
      {"cidr('10.0.0.0')",
       "network address parse error during conversion from string: network address parse "
       "error during conversion from string: netip.ParsePrefix(\"10.0.0.0\"): no '/'"},
      {"cidr('10.0.0.0/33')",
       "network address parse error during conversion from string: network address parse "
       "error during conversion from string: netip.ParsePrefix(\"10.0.0.0/33\"): prefix length "
       "out of range"},
      {"cidr('10.0.0.0/8').containsIP('x')", "no such overload"},
  });
}

TEST(KubernetesLibraries, ChargeCostForInputSize) {
  FunctionRegistry registry;
  InstallKubernetesLibraries(registry);
  const auto* find = registry.Find("find");
  ASSERT_NE(find, nullptr);
  EvalContext ctx;
  const Value args[] = {Value::String(std::string(1000, 'a')), Value::String("a+b")};
  const Value v = (*find)[0].body(args, ctx);
  ASSERT_EQ(v.kind(), Kind::kString);
  EXPECT_EQ(ctx.cost, 101u);  // ceil(1001 * 0.1) * ceil(3 * 0.25)
}

}  // namespace
}  // namespace klutch::cel::k8s_library_test
