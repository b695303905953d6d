#include "cel/library_util.h"

#include <cstdio>

#include "core/strings.h"

namespace klutch::cel::internal {

char32_t DecodeRune(std::string_view s, size_t* pos) {
  const auto b0 = static_cast<unsigned char>(s[*pos]);
  if (b0 < 0x80) {
    ++*pos;
    return b0;
  }
  int len = 0;
  char32_t r = 0;
  char32_t min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    r = b0 & 0x1F;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    r = b0 & 0x0F;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    r = b0 & 0x07;
    min = 0x10000;
  } else {
    ++*pos;
    return kReplacementChar;
  }
  if (*pos + len > s.size()) {
    ++*pos;
    return kReplacementChar;
  }
  for (int i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(s[*pos + i]);
    if ((b & 0xC0) != 0x80) {
      ++*pos;
      return kReplacementChar;
    }
    r = (r << 6) | (b & 0x3F);
  }
  if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) {
    ++*pos;
    return kReplacementChar;
  }
  *pos += len;
  return r;
}

std::vector<char32_t> ToRunes(std::string_view s) {
  std::vector<char32_t> runes;
  runes.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) runes.push_back(DecodeRune(s, &pos));
  return runes;
}

std::string FromRunes(const std::vector<char32_t>& runes, size_t begin, size_t end) {
  std::string out;
  out.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) core::AppendUtf8(out, runes[i]);
  return out;
}

int64_t RuneCount(std::string_view s, size_t byte_offset) {
  if (byte_offset > s.size()) byte_offset = s.size();
  int64_t n = 0;
  size_t pos = 0;
  while (pos < byte_offset) {
    DecodeRune(s, &pos);
    ++n;
  }
  return n;
}

}  // namespace klutch::cel::internal
