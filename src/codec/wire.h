// The protobuf wire format (protobuf.dev/programming-guides/encoding): base-128 varints, field
// keys (field number << 3 | wire type), the six wire types, and length-delimited values. The
// one layer both codecs of this module build on: WireReader takes a message apart with every
// read bounds-checked, the Append* functions put one together.
//
// Also the UTF-8 check both codecs apply to strings, since JSON cannot carry invalid text.
//
// Pure functions and value types; a WireReader is used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace klutch::codec {

enum class WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kStartGroup = 3,  // deprecated groups: WireReader reports them as unsupported
  kEndGroup = 4,
  kFixed32 = 5,
};

// "varint", "64-bit", "length-delimited", "start-group", "end-group", "32-bit"; "invalid" for
// the unused values 6 and 7.
std::string_view WireTypeName(uint32_t wire);

// The largest field number protobuf allows (2^29 - 1).
inline constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;

// One field occurrence as read from the wire. `wire` is the raw 3-bit wire type (0..7).
struct WireValue {
  uint32_t wire = 0;
  uint64_t varint = 0;     // kVarint; the raw bits for kFixed64 and kFixed32
  std::string_view bytes;  // kLengthDelimited: a view into the reader's data
  bool Is(WireType type) const { return wire == static_cast<uint32_t>(type); }
};

// Reads the fields of one message from a byte string it does not own (the bytes must outlive
// the reader and every WireValue it returns). Never reads past the end: any byte string yields
// fields and then either the end or a problem.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  // A base-128 varint of at most 10 bytes whose value fits in 64 bits; false when it is
  // truncated or longer (nothing sensible can follow then).
  bool ReadVarint(uint64_t& out);

  // Reads a key and the value that follows it. Returns "" on success, otherwise a problem for
  // the caller to put in context ("truncated length-delimited value (declares 16 bytes, 3
  // remain)"). `number` is set as soon as the key is read (0 before), so that callers can say
  // which field was malformed. Field number 0 and numbers above kMaxFieldNumber are problems,
  // as are the invalid wire types 6 and 7.
  std::string Next(uint32_t& number, WireValue& value);

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// Writing. Every function appends to `out`.
void AppendVarint(std::string& out, uint64_t value);
void AppendKey(std::string& out, uint32_t number, WireType type);
void AppendVarintField(std::string& out, uint32_t number, uint64_t value);
// A length-delimited field: key, length, then `bytes` (a string, bytes or an encoded message).
void AppendLengthDelimited(std::string& out, uint32_t number, std::string_view bytes);
// A 64-bit field: key, then `bits` little-endian (a double's IEEE 754 bits, fixed64).
void AppendFixed64Field(std::string& out, uint32_t number, uint64_t bits);
// Turns out[start:] (a message body just appended) into length-delimited field `number` by
// inserting its key and length in front of it: nested messages are written in place, without a
// temporary string each.
void WrapAsField(std::string& out, size_t start, uint32_t number);

// Whether `s` is well-formed UTF-8: no stray continuation bytes, no overlong forms, no
// surrogates, nothing above U+10FFFF (core::DecodeUtf8's rules, with an ASCII fast path).
bool IsValidUtf8(std::string_view s);

}  // namespace klutch::codec
