#include "core/strings.h"

#include <gtest/gtest.h>

#include "core/random.h"

namespace klutch::core::strings_test {
namespace {

TEST(Strings, SplitKeepsEmptyParts) {
  auto parts = Split("a,,b", ',');
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[1], "");
  EXPECT_EQ(SplitNonEmpty("a,,b", ',').size(), 2u);
}

TEST(Strings, Base64RoundTripsEveryLength) {
  std::string data;
  for (int i = 0; i < 40; ++i) {
    auto enc = Base64Encode(data);
    auto dec = Base64Decode(enc);
    ASSERT_TRUE(dec) << enc;
    EXPECT_EQ(*dec, data);
    auto url = Base64UrlDecode(Base64UrlEncode(data));
    ASSERT_TRUE(url);
    EXPECT_EQ(*url, data);
    data += static_cast<char>(i * 37);
  }
  EXPECT_EQ(Base64Encode("hello"), "aGVsbG8=");
}

TEST(Strings, Base64RejectsGarbage) {
  EXPECT_FALSE(Base64Decode("a"));
  EXPECT_FALSE(Base64Decode("aGV$bG8="));
  EXPECT_FALSE(Base64Decode("aGVsbG8==="));
  EXPECT_FALSE(Base64Decode("aGVsbG9="));  // non-zero trailing bits
}

TEST(Strings, PercentDecoding) {
  EXPECT_EQ(*PercentDecode("a%2Fb+c", true), "a/b c");
  EXPECT_EQ(*PercentDecode("a+c", false), "a+c");
  EXPECT_FALSE(PercentDecode("%2", false));
  EXPECT_FALSE(PercentDecode("%zz", false));
  EXPECT_EQ(PercentEncode("a b/c"), "a%20b%2Fc");
}

TEST(Strings, SimpleEscapesAreTheOneLetterCEscapes) {
  EXPECT_EQ(SimpleEscape('n'), '\n');
  EXPECT_EQ(SimpleEscape('a'), '\a');
  EXPECT_EQ(SimpleEscape('v'), '\v');
  EXPECT_EQ(SimpleEscape('\\'), '\\');
  // Quotes, numeric and Unicode escapes are each reader's own business.
  EXPECT_EQ(SimpleEscape('"'), std::nullopt);
  EXPECT_EQ(SimpleEscape('x'), std::nullopt);
  EXPECT_EQ(SimpleEscape('u'), std::nullopt);
  EXPECT_EQ(SimpleEscape('0'), std::nullopt);
}

TEST(Random, UuidAndSuffixShapes) {
  std::string u = NewUuid();
  ASSERT_EQ(u.size(), 36u);
  EXPECT_EQ(u[14], '4');
  EXPECT_NE(NewUuid(), u);
  std::string s = RandomSuffix(5);
  ASSERT_EQ(s.size(), 5u);
  EXPECT_EQ(s.find_first_not_of("bcdfghjklmnpqrstvwxz2456789"), std::string::npos);
}

}  // namespace
}  // namespace klutch::core::strings_test
