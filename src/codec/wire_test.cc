#include "codec/wire.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace klutch::codec::wire_test {
namespace {

std::string Varint(uint64_t v) {
  std::string out;
  AppendVarint(out, v);
  return out;
}

TEST(WireVarint, EncodesBase128LittleEndianGroups) {
  EXPECT_EQ(Varint(0), std::string(1, '\0'));
  EXPECT_EQ(Varint(1), "\x01");
  EXPECT_EQ(Varint(127), "\x7f");
  EXPECT_EQ(Varint(128), "\x80\x01");
  EXPECT_EQ(Varint(300), "\xac\x02");
  EXPECT_EQ(Varint(UINT64_MAX), std::string(9, '\xff') + "\x01");
}

TEST(WireVarint, ReadsWhatItWritesAndRejectsOverlongOrTruncated) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{16384},
                     uint64_t{1} << 35, UINT64_MAX - 1, UINT64_MAX}) {
    std::string bytes = Varint(v);
    WireReader reader(bytes);
    uint64_t got = 0;
    ASSERT_TRUE(reader.ReadVarint(got)) << v;
    EXPECT_EQ(got, v);
    EXPECT_TRUE(reader.done());
  }
  uint64_t got = 0;
  // An eleventh byte, and a tenth byte carrying more than bit 63.
  std::string eleven = std::string(10, '\xff') + "\x01";
  EXPECT_FALSE(WireReader(eleven).ReadVarint(got));
  std::string too_big = std::string(9, '\xff') + "\x02";
  EXPECT_FALSE(WireReader(too_big).ReadVarint(got));
  EXPECT_FALSE(WireReader("\x80\x80").ReadVarint(got));
  EXPECT_FALSE(WireReader("").ReadVarint(got));
}

TEST(WireReader, ReadsEveryWireTypeItSupports) {
  std::string message;
  AppendVarintField(message, 1, 150);
  AppendLengthDelimited(message, 2, "testing");
  AppendFixed64Field(message, 3, 0x0102030405060708);
  AppendKey(message, 4, WireType::kFixed32);
  message += std::string("\x04\x03\x02\x01", 4);
  AppendLengthDelimited(message, kMaxFieldNumber, "");

  WireReader reader(message);
  uint32_t number = 0;
  WireValue value;
  ASSERT_EQ(reader.Next(number, value), "");
  EXPECT_EQ(number, 1u);
  EXPECT_TRUE(value.Is(WireType::kVarint));
  EXPECT_EQ(value.varint, 150u);
  ASSERT_EQ(reader.Next(number, value), "");
  EXPECT_EQ(number, 2u);
  EXPECT_TRUE(value.Is(WireType::kLengthDelimited));
  EXPECT_EQ(value.bytes, "testing");
  ASSERT_EQ(reader.Next(number, value), "");
  EXPECT_EQ(number, 3u);
  EXPECT_TRUE(value.Is(WireType::kFixed64));
  EXPECT_EQ(value.varint, 0x0102030405060708u);
  ASSERT_EQ(reader.Next(number, value), "");
  EXPECT_EQ(number, 4u);
  EXPECT_TRUE(value.Is(WireType::kFixed32));
  EXPECT_EQ(value.varint, 0x01020304u);
  ASSERT_EQ(reader.Next(number, value), "");
  EXPECT_EQ(number, kMaxFieldNumber);
  EXPECT_EQ(value.bytes, "");
  EXPECT_TRUE(reader.done());
}

TEST(WireReader, ReportsProblemsWithoutReadingPastTheEnd) {
  struct Case {
    std::string bytes;
    uint32_t number;  // what Next reports as the field being read
    std::string problem;
  };
  const Case cases[] = {
      {"\x80", 0, "malformed or truncated varint in field key"},
      {std::string(1, '\x00') + "\x01", 0, "invalid field number 0"},
      {Varint((uint64_t{kMaxFieldNumber} + 1) << 3), 0, "invalid field number 536870912"},
      {"\x08", 1, "malformed or truncated varint"},
      {"\x08\xff", 1, "malformed or truncated varint"},
      {"\x12", 2, "malformed or truncated length"},
      {"\x12\x10"
       "abc",
       2, "truncated length-delimited value (declares 16 bytes, 3 remain)"},
      {"\x19"
       "1234567",
       3, "truncated fixed-size value"},
      {"\x25"
       "123",
       4, "truncated fixed-size value"},
      {"\x0e", 1, "unsupported wire type 6 (invalid)"},
      {"\x0f", 1, "unsupported wire type 7 (invalid)"},
  };
  for (const Case& c : cases) {
    WireReader reader(c.bytes);
    uint32_t number = 99;
    WireValue value;
    EXPECT_EQ(reader.Next(number, value), c.problem);
    EXPECT_EQ(number, c.number) << c.problem;
  }
  // Groups (deprecated, absent from Kubernetes' messages) are reported with their field.
  WireReader groups("\x0b\x0c");
  uint32_t number = 0;
  WireValue value;
  EXPECT_EQ(groups.Next(number, value), "unsupported wire type 3 (start-group)");
  EXPECT_EQ(number, 1u);
}

TEST(WireWriter, WrapAsFieldPrefixesKeyAndLength) {
  std::string out = "head";
  size_t start = out.size();
  AppendLengthDelimited(out, 1, std::string(200, 'x'));
  WrapAsField(out, start, 7);
  // Field 7, length 203 (= key 1 + length varint 2 + 200 bytes) as a two-byte varint.
  EXPECT_EQ(out.substr(0, 7), "head\x3a\xcb\x01");
  WireReader reader(std::string_view(out).substr(4));
  uint32_t number = 0;
  WireValue value;
  ASSERT_EQ(reader.Next(number, value), "");
  EXPECT_EQ(number, 7u);
  WireReader inner(value.bytes);
  ASSERT_EQ(inner.Next(number, value), "");
  EXPECT_EQ(number, 1u);
  EXPECT_EQ(value.bytes, std::string(200, 'x'));
}

TEST(IsValidUtf8, AcceptsWellFormedTextOnly) {
  struct Case {
    std::string text;
    bool valid;
  };
  const Case cases[] = {
      {"", true},
      {"plain ascii", true},
      {"caf\xc3\xa9", true},                   // U+00E9
      {"\xe2\x82\xac", true},                  // U+20AC
      {"\xf0\x9f\x98\x80", true},              // U+1F600
      {"\xf4\x8f\xbf\xbf", true},              // U+10FFFF
      {std::string("nul\0inside", 10), true},  // U+0000 is valid UTF-8
      {"\xff", false},                         // never a UTF-8 byte
      {"\x80", false},                         // stray continuation byte
      {"\xc0\xaf", false},                     // overlong '/'
      {"\xe0\x80\xaf", false},                 // overlong '/'
      {"\xed\xa0\x80", false},                 // surrogate U+D800
      {"\xf4\x90\x80\x80", false},             // U+110000
      {"\xf5\x80\x80\x80", false},             // lead byte past U+10FFFF
      {"\xc3", false},                         // truncated
      {"ok\xe2\x82", false},                   // truncated at the end
      {"\xe2\x28\xa1", false},                 // bad continuation
  };
  for (const Case& c : cases) {
    EXPECT_EQ(IsValidUtf8(c.text), c.valid) << testing::PrintToString(c.text);
  }
}

}  // namespace
}  // namespace klutch::codec::wire_test
