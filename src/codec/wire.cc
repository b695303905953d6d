#include "codec/wire.h"

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::codec {

std::string_view WireTypeName(uint32_t wire) {
  switch (wire) {
    case 0:
      return "varint";
    case 1:
      return "64-bit";
    case 2:
      return "length-delimited";
    case 3:
      return "start-group";
    case 4:
      return "end-group";
    case 5:
      return "32-bit";
    default:
      return "invalid";
  }
}

bool WireReader::ReadVarint(uint64_t& out) {
  uint64_t value = 0;
  for (int i = 0; i < 10; ++i) {
    if (pos_ >= data_.size()) return false;
    auto byte = static_cast<uint8_t>(data_[pos_++]);
    // The tenth byte holds bit 63 only.
    if (i == 9 && byte > 1) return false;
    value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      out = value;
      return true;
    }
  }
  return false;
}

std::string WireReader::Next(uint32_t& number, WireValue& value) {
  number = 0;
  uint64_t key = 0;
  if (!ReadVarint(key)) return "malformed or truncated varint in field key";
  if ((key >> 3) == 0 || (key >> 3) > kMaxFieldNumber) {
    return fmt::format("invalid field number {}", key >> 3);
  }
  number = static_cast<uint32_t>(key >> 3);
  value = WireValue{static_cast<uint32_t>(key & 7), 0, {}};
  switch (static_cast<WireType>(value.wire)) {
    case WireType::kVarint:
      if (!ReadVarint(value.varint)) return "malformed or truncated varint";
      return "";
    case WireType::kFixed64:
    case WireType::kFixed32: {
      size_t size = value.Is(WireType::kFixed64) ? 8 : 4;
      if (data_.size() - pos_ < size) return "truncated fixed-size value";
      for (size_t i = 0; i < size; ++i) {
        value.varint |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + i])) << (8 * i);
      }
      pos_ += size;
      return "";
    }
    case WireType::kLengthDelimited: {
      uint64_t length = 0;
      if (!ReadVarint(length)) return "malformed or truncated length";
      if (length > data_.size() - pos_) {
        return fmt::format("truncated length-delimited value (declares {} bytes, {} remain)",
                           length, data_.size() - pos_);
      }
      value.bytes = data_.substr(pos_, static_cast<size_t>(length));
      pos_ += static_cast<size_t>(length);
      return "";
    }
    default:
      return fmt::format("unsupported wire type {} ({})", value.wire, WireTypeName(value.wire));
  }
}

namespace {

size_t PutVarint(char* out, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    out[n++] = static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out[n++] = static_cast<char>(v);
  return n;
}

uint64_t Key(uint32_t number, WireType type) {
  return (uint64_t{number} << 3) | static_cast<uint32_t>(type);
}

}  // namespace

void AppendVarint(std::string& out, uint64_t value) {
  char buf[10];
  out.append(buf, PutVarint(buf, value));
}

void AppendKey(std::string& out, uint32_t number, WireType type) {
  AppendVarint(out, Key(number, type));
}

void AppendVarintField(std::string& out, uint32_t number, uint64_t value) {
  AppendKey(out, number, WireType::kVarint);
  AppendVarint(out, value);
}

void AppendLengthDelimited(std::string& out, uint32_t number, std::string_view bytes) {
  AppendKey(out, number, WireType::kLengthDelimited);
  AppendVarint(out, bytes.size());
  out.append(bytes);
}

void AppendFixed64Field(std::string& out, uint32_t number, uint64_t bits) {
  AppendKey(out, number, WireType::kFixed64);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

void WrapAsField(std::string& out, size_t start, uint32_t number) {
  char prefix[20];
  size_t n = PutVarint(prefix, Key(number, WireType::kLengthDelimited));
  n += PutVarint(prefix + n, out.size() - start);
  out.insert(start, prefix, n);
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    if (core::DecodeUtf8(s, i) < 0) return false;
  }
  return true;
}

}  // namespace klutch::codec
