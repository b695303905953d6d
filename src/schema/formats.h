// String formats as kube-apiserver checks them on custom resources: the formats CRD schemas
// may use (apiextensions' supported list; others are ignored, as kube-apiserver strips them)
// and the checks of kube-openapi's strfmt registry (uuid, date-time, byte, ipv4, ...). ipv4,
// ipv6 and cidr use core::ParseIp / ParseIpPrefix in Go's net flavour (IPv4-mapped addresses
// allowed, prefix lengths with leading zeros read), duration core::ParseGoDuration, and
// quantity cel::IsQuantity: the parsers CEL's ip(), cidr(), duration() and quantity() use.
//
// Numeric formats (int32, int64, float, double) are accepted but, exactly as in
// kube-openapi, not range-checked. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace klutch::schema {

// The registry's name for a format: dashes removed ("date-time" -> "datetime").
std::string NormalizeFormat(std::string_view format);

// Whether kube-apiserver validates `format` on a schema of `type` ("" or "string"); false
// for formats it strips (unknown names, numeric formats, formats on other types).
bool IsValidatedFormat(std::string_view type, std::string_view format);

// Whether `value` is valid for the (validated) `format`.
bool MatchesFormat(std::string_view format, const std::string& value);

}  // namespace klutch::schema
