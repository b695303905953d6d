// Small string helpers the standard library lacks: splitting, trimming, base64, hex, escaping.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace klutch::core {

// Splits on every occurrence of `sep`; "a,,b" -> {"a", "", "b"}; "" -> {""}.
std::vector<std::string_view> Split(std::string_view s, char sep);
// Like Split, but drops empty parts.
std::vector<std::string_view> SplitNonEmpty(std::string_view s, char sep);
std::string_view Trim(std::string_view s);
std::string ToLower(std::string_view s);
std::string ToUpper(std::string_view s);
std::string Join(const std::vector<std::string>& parts, std::string_view sep);

// Standard base64 (RFC 4648 §4) with padding.
std::string Base64Encode(std::string_view data);
// Decodes standard base64; accepts missing padding; nullopt on any other malformation.
std::optional<std::string> Base64Decode(std::string_view text);
// Unpadded URL-safe base64 (RFC 4648 §5), as JWTs use.
std::string Base64UrlEncode(std::string_view data);
std::optional<std::string> Base64UrlDecode(std::string_view text);

std::string HexEncode(std::string_view data);

// Percent-decodes a URL component ("%2F" -> "/", and '+' -> ' ' when `plus_is_space`).
std::optional<std::string> PercentDecode(std::string_view s, bool plus_is_space);
// Percent-encodes everything but unreserved characters (RFC 3986).
std::string PercentEncode(std::string_view s);

// Parses a decimal int64 with no sign games or trailing junk.
std::optional<int64_t> ParseInt64(std::string_view s);

// The UTF-8 code point of `s` at byte `i`, advancing `i` past it; -1 (advancing one byte)
// for a malformed, overlong or surrogate sequence.
int32_t DecodeUtf8(std::string_view s, size_t& i);
// Appends the UTF-8 encoding of code point `cp`; surrogates and values past U+10FFFF become
// U+FFFD, as Go encodes them.
void AppendUtf8(std::string& out, uint32_t cp);
// `s` quoted as Go's strconv.Quote / %q does: Kubernetes quotes names and values in its
// messages this way. Invalid bytes become \xNN, non-printable code points \uNNNN.
std::string GoQuote(std::string_view s);
// The character that C's one-letter escape `\letter` stands for (a b f n r t v and the
// backslash itself), as Go, CEL and protobuf text read them; nullopt for any other letter.
std::optional<char> SimpleEscape(char letter);

}  // namespace klutch::core
