#include "compose/transforms.h"

#include <openssl/evp.h>
#include <re2/re2.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cel/quantity.h"
#include "cel/regex.h"
#include "compose/json_fields.h"
#include "core/strings.h"
#include "core/sync.h"
#include "machinery/gofmt.h"
#include "machinery/object.h"

namespace klutch::compose {
namespace {

using machinery::GoSprint;

core::Status Fail(std::string message) { return core::BadRequest(std::move(message)); }

std::optional<int64_t> AsInt(const Json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = *v.get_ptr<const Json::number_unsigned_t*>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return *v.get_ptr<const Json::number_integer_t*>();
  return std::nullopt;
}

std::optional<double> AsDouble(const Json& v) {
  if (auto i = AsInt(v)) return static_cast<double>(*i);
  if (v.is_number_float()) return *v.get_ptr<const Json::number_float_t*>();
  if (v.is_number_unsigned()) {
    return static_cast<double>(*v.get_ptr<const Json::number_unsigned_t*>());
  }
  return std::nullopt;
}

// Whether `d` converts to int64 without overflow (the conversion is undefined otherwise).
bool FitsInt64(double d) {
  return std::isfinite(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
}

// A regexp compiled once per pattern; nullptr for an invalid one. RE2 is Go's regexp syntax
// and semantics (leftmost-first, linear time): std::regex differs in syntax ((?i), (?P<n>...))
// and recurses per input character, so a long field value overflowed the stack.
std::shared_ptr<const re2::RE2> Compile(const std::string& pattern) {
  static core::Mutex mu;
  static std::map<std::string, std::shared_ptr<const re2::RE2>>* cache =
      new std::map<std::string, std::shared_ptr<const re2::RE2>>();
  {
    core::MutexLock lock(mu);
    auto it = cache->find(pattern);
    if (it != cache->end()) return it->second;
  }
  re2::RE2::Options options;
  options.set_log_errors(false);
  auto re = std::make_shared<const re2::RE2>(pattern, options);
  if (!re->ok()) re = nullptr;
  core::MutexLock lock(mu);
  if (cache->size() > 1024) cache->clear();
  (*cache)[pattern] = re;
  return re;
}

// `text` for an error message, cut short when long (it lands in a status condition).
std::string Excerpt(const std::string& text) {
  constexpr size_t kMax = 256;
  return text.size() <= kMax ? text : text.substr(0, kMax) + "...";
}

core::Result<Json> MapTransform(const Json& t, const Json& input) {
  const Json* pairs = Member(t, "map");
  if (!pairs || !pairs->is_object()) return Fail("map transform has no map");
  if (!input.is_string()) {
    return Fail("input is required to be a string for map transform, got " + GoSprint(input));
  }
  const std::string& key = *input.get_ptr<const std::string*>();
  auto it = pairs->find(key);
  if (it == pairs->end()) return Fail("key " + key + " is not found");
  return *it;
}

core::Result<Json> MatchTransform(const Json& t, const Json& input) {
  const Json* m = Member(t, "match");
  if (!m || !m->is_object()) return Fail("match transform has no match");
  const Json* patterns = Member(*m, "patterns");
  if (patterns && patterns->is_array()) {
    size_t i = 0;
    for (const Json& p : *patterns) {
      std::string type = Str(p, "type");
      if (type.empty()) type = "literal";
      bool matched = false;
      if (type == "literal") {
        const Json* lit = Member(p, "literal");
        if (!lit) return Fail("match pattern " + std::to_string(i) + ": literal is required");
        matched = input.is_string() && lit->is_string() && *lit == input;
      } else if (type == "regexp") {
        std::string pattern = Str(p, "regexp");
        auto re = Compile(pattern);
        if (!re) {
          return Fail("match pattern " + std::to_string(i) + ": invalid regexp \"" + pattern +
                      "\": " + cel::GoRegexpError(pattern));
        }
        matched =
            input.is_string() && re2::RE2::PartialMatch(*input.get_ptr<const std::string*>(), *re);
      } else {
        return Fail("match pattern " + std::to_string(i) + ": unknown type \"" + type +
                    "\" (literal or regexp)");
      }
      if (matched) {
        const Json* result = Member(p, "result");
        return result ? *result : Json();
      }
      ++i;
    }
  }
  if (Str(*m, "fallbackTo") == "Input") return input;
  const Json* fallback = Member(*m, "fallbackValue");
  return fallback ? *fallback : Json();
}

core::Result<Json> MathTransform(const Json& t, const Json& input) {
  const Json* m = Member(t, "math");
  if (!m || !m->is_object()) return Fail("math transform has no math");
  std::string type = Str(*m, "type");
  if (type.empty()) type = "Multiply";
  auto in_int = AsInt(input);
  auto in_float = AsDouble(input);
  if (!in_float) {
    return Fail("input is required to be a number for math transformer, got " + GoSprint(input));
  }
  auto operand = [&](const char* key) -> std::optional<int64_t> {
    const Json* v = Member(*m, key);
    return v ? AsInt(*v) : std::nullopt;
  };
  if (type == "Multiply") {
    auto by = operand("multiply");
    if (!by) return Fail("math transform Multiply needs an integer multiply");
    // Go's int64 multiplication wraps around on overflow.
    if (in_int) {
      return Json(
          static_cast<int64_t>(static_cast<uint64_t>(*in_int) * static_cast<uint64_t>(*by)));
    }
    return Json(*in_float * static_cast<double>(*by));
  }
  if (type == "ClampMin" || type == "ClampMax") {
    const bool min = type == "ClampMin";
    auto bound = operand(min ? "clampMin" : "clampMax");
    if (!bound)
      return Fail("math transform " + type + " needs an integer " +
                  (min ? "clampMin" : "clampMax"));
    if (in_int) return Json(min ? std::max(*in_int, *bound) : std::min(*in_int, *bound));
    double b = static_cast<double>(*bound);
    return Json(min ? std::max(*in_float, b) : std::min(*in_float, b));
  }
  return Fail("math transform: unknown type \"" + type + "\" (Multiply, ClampMin or ClampMax)");
}

std::string Digest(const EVP_MD* md, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, md, nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[out[i] >> 4];
    s += hex[out[i] & 15];
  }
  return s;
}

uint32_t Adler32(const std::string& data) {
  uint32_t a = 1, b = 0;
  for (unsigned char c : data) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  return (b << 16) | a;
}

// A string transform's Convert (`how`) of `input` (`str`: its Go %v text).
core::Result<Json> StringConvert(const std::string& how, const Json& input,
                                 const std::string& str) {
  if (how == "ToUpper") {
    std::string out = str;
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return Json(out);
  }
  if (how == "ToLower") {
    std::string out = str;
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return Json(out);
  }
  if (how == "ToBase64") return Json(core::Base64Encode(str));
  if (how == "FromBase64") {
    auto decoded = core::Base64Decode(str);
    if (!decoded) return Fail("string transform FromBase64: the input is not valid base64");
    return Json(*decoded);
  }
  // Hashes and ToJson work on the JSON of non-string inputs.
  const std::string raw = input.is_string() ? str : machinery::Dump(input);
  if (how == "ToJson") return Json(machinery::Dump(input));
  if (how == "ToSha1") return Json(Digest(EVP_sha1(), raw));
  if (how == "ToSha256") return Json(Digest(EVP_sha256(), raw));
  if (how == "ToSha512") return Json(Digest(EVP_sha512(), raw));
  if (how == "ToAdler32") return Json(std::to_string(Adler32(raw)));
  return Fail("string transform Convert: unknown conversion \"" + how +
              "\" (ToUpper, ToLower, ToBase64, FromBase64, ToJson, ToSha1, ToSha256, ToSha512, "
              "ToAdler32)");
}

// A string transform's Regexp (`r`: its regexp object, may be null) over `str`.
core::Result<Json> StringRegexp(const Json* r, const std::string& str) {
  std::string pattern = r ? Str(*r, "match") : "";
  if (pattern.empty()) return Fail("string transform Regexp needs regexp.match");
  auto re = Compile(pattern);
  if (!re) {
    return Fail("string transform Regexp: invalid regexp \"" + pattern +
                "\": " + cel::GoRegexpError(pattern));
  }
  int64_t group = 0;
  if (r) {
    if (const Json* g = Member(*r, "group")) group = AsInt(*g).value_or(0);
  }
  // Group 0 is the whole match; a group that took no part in the match is "" (as Go's
  // FindStringSubmatch gives it).
  const int groups = re->NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> m(static_cast<size_t>(groups));
  if (!re->Match(str, 0, str.size(), re2::RE2::UNANCHORED, m.data(), groups)) {
    return Fail("regexp \"" + pattern + "\" had no matches in \"" + Excerpt(str) + "\"");
  }
  if (group < 0 || group >= groups) {
    return Fail("regexp \"" + pattern + "\" has no group " + std::to_string(group));
  }
  const re2::StringPiece& hit = m[static_cast<size_t>(group)];
  return Json(std::string(hit.data() ? hit.data() : "", hit.size()));
}

core::Result<Json> StringTransform(const Json& t, const Json& input) {
  const Json* s = Member(t, "string");
  if (!s || !s->is_object()) return Fail("string transform has no string");
  std::string type = Str(*s, "type");
  if (type.empty()) type = "Format";
  const std::string str = GoSprint(input);
  if (type == "Format") {
    const Json* fmt = Member(*s, "fmt");
    if (!fmt || !fmt->is_string()) return Fail("string transform Format needs fmt");
    return Json(machinery::GoSprintf(*fmt->get_ptr<const std::string*>(), {input}));
  }
  if (type == "Convert") return StringConvert(Str(*s, "convert"), input, str);
  if (type == "TrimPrefix" || type == "TrimSuffix") {
    std::string trim = Str(*s, "trim");
    std::string out = str;
    if (type == "TrimPrefix" && out.starts_with(trim)) out = out.substr(trim.size());
    if (type == "TrimSuffix" && out.ends_with(trim)) out = out.substr(0, out.size() - trim.size());
    return Json(out);
  }
  if (type == "Regexp") return StringRegexp(Member(*s, "regexp"), str);
  if (type == "Join") {
    if (!input.is_array()) return Fail("string transform Join: the input is not an array");
    const Json* j = Member(*s, "join");
    std::string sep = j ? Str(*j, "separator") : "";
    std::string out;
    bool first = true;
    for (const Json& e : input) {
      if (!first) out += sep;
      first = false;
      out += GoSprint(e);
    }
    return Json(out);
  }
  if (type == "Replace") {
    const Json* r = Member(*s, "replace");
    std::string search = r ? Str(*r, "search") : "";
    std::string replace = r ? Str(*r, "replace") : "";
    if (search.empty()) return Json(str);
    std::string out;
    size_t pos = 0;
    for (size_t hit; (hit = str.find(search, pos)) != std::string::npos;
         pos = hit + search.size()) {
      out += str.substr(pos, hit - pos) + replace;
    }
    return Json(out + str.substr(pos));
  }
  return Fail("string transform: unknown type \"" + type +
              "\" (Format, Convert, TrimPrefix, TrimSuffix, Regexp, Join or Replace)");
}

std::optional<bool> ParseGoBool(const std::string& s) {
  if (s == "1" || s == "t" || s == "T" || s == "TRUE" || s == "true" || s == "True") return true;
  if (s == "0" || s == "f" || s == "F" || s == "FALSE" || s == "false" || s == "False") {
    return false;
  }
  return std::nullopt;
}

std::string FloatToString(double d) {
  // strconv.FormatFloat(d, 'f', -1, 64).
  char buf[400];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

core::Result<Json> ConvertTransform(const Json& t, const Json& raw_input) {
  // An integer beyond int64 is a float64 to Go's JSON decoder.
  const Json input =
      raw_input.is_number_unsigned() && !AsInt(raw_input)
          ? Json(static_cast<double>(*raw_input.get_ptr<const Json::number_unsigned_t*>()))
          : raw_input;
  const Json* c = Member(t, "convert");
  if (!c || !c->is_object()) return Fail("convert transform has no convert");
  std::string to = Str(*c, "toType");
  std::string format = Str(*c, "format");
  if (to == "int") to = "int64";
  const std::string in_desc = GoSprint(input);
  auto bad = [&](std::string_view from) {
    return Fail("cannot convert " + std::string(from) + " \"" + in_desc + "\" to " + to);
  };
  if (to.empty()) return Fail("convert transform needs toType");
  if (input.is_string()) {
    const std::string& s = *input.get_ptr<const std::string*>();
    if (to == "string") return input;
    if (format == "quantity" && (to == "int64" || to == "float64")) {
      auto q = cel::QuantityAsDouble(s);
      if (!q) return Fail("cannot parse \"" + s + "\" as a quantity");
      if (to == "int64") {
        if (!FitsInt64(std::ceil(*q)))
          return Fail("quantity \"" + s + "\" is out of the int64 range");
        return Json(static_cast<int64_t>(std::ceil(*q)));
      }
      return Json(*q);
    }
    if (to == "int64") {
      int64_t v = 0;
      auto r = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) {
        size_t skip = !s.empty() && s[0] == '+' ? 1 : 0;
        r = std::from_chars(s.data() + skip, s.data() + s.size(), v);
        if (skip == 0 || r.ec != std::errc() || r.ptr != s.data() + s.size()) {
          return Fail("strconv.ParseInt: parsing \"" + s + "\": invalid syntax");
        }
      }
      return Json(v);
    }
    if (to == "float64") {
      // strconv.ParseFloat's decimal syntax: an optional sign, no surrounding space, no hex;
      // infinities and NaN could not be written as JSON anyway.
      size_t skip = s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+' ? 1 : 0;
      double d = 0;
      auto r = std::from_chars(s.data() + skip, s.data() + s.size(), d, std::chars_format::general);
      if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size() || !std::isfinite(d)) {
        return Fail("strconv.ParseFloat: parsing \"" + s + "\": invalid syntax");
      }
      return Json(d);
    }
    if (to == "bool") {
      auto b = ParseGoBool(s);
      if (!b) return Fail("strconv.ParseBool: parsing \"" + s + "\": invalid syntax");
      return Json(*b);
    }
    if (to == "object" || to == "array") {
      if (format != "json") return Fail("converting a string to " + to + " needs format: json");
      auto parsed = machinery::ParseJson(s);
      if (!parsed.ok())
        return Fail("cannot parse \"" + s + "\" as JSON: " + parsed.status().message());
      if ((to == "object") != parsed->is_object() || (to == "array") != parsed->is_array()) {
        return Fail("\"" + s + "\" is not a JSON " + to);
      }
      return *parsed;
    }
    return bad("string");
  }
  if (input.is_boolean()) {
    bool b = *input.get_ptr<const Json::boolean_t*>();
    if (to == "bool") return input;
    if (to == "string") return Json(b ? "true" : "false");
    if (to == "int64") return Json(static_cast<int64_t>(b ? 1 : 0));
    if (to == "float64") return Json(b ? 1.0 : 0.0);
    return bad("bool");
  }
  if (auto i = AsInt(input)) {
    if (to == "int64") return Json(*i);
    if (to == "string") return Json(std::to_string(*i));
    if (to == "float64") return Json(static_cast<double>(*i));
    if (to == "bool") return Json(*i == 1);
    return bad("int64");
  }
  if (input.is_number_float()) {
    double d = *input.get_ptr<const Json::number_float_t*>();
    if (to == "float64") return input;
    if (to == "string") return Json(FloatToString(d));
    if (to == "int64") {
      if (!FitsInt64(d))
        return Fail("cannot convert float64 " + in_desc + " to int64: out of range");
      return Json(static_cast<int64_t>(d));
    }
    if (to == "bool") return Json(d == 1.0);
    return bad("float64");
  }
  if ((input.is_object() && to == "object") || (input.is_array() && to == "array")) return input;
  return bad(input.is_null() ? "null" : input.is_object() ? "object" : "array");
}

}  // namespace

core::Result<Json> ApplyTransform(const Json& transform, const Json& input) {
  std::string type = Str(transform, "type");
  if (type == "map") return MapTransform(transform, input);
  if (type == "match") return MatchTransform(transform, input);
  if (type == "math") return MathTransform(transform, input);
  if (type == "string") return StringTransform(transform, input);
  if (type == "convert") return ConvertTransform(transform, input);
  return Fail("unknown transform type \"" + type + "\" (map, match, math, string or convert)");
}

core::Result<Json> ApplyTransforms(const Json& transforms, Json input) {
  if (transforms.is_null()) return input;
  if (!transforms.is_array()) return Fail("transforms must be a list");
  size_t i = 0;
  for (const Json& t : transforms) {
    auto out = ApplyTransform(t, input);
    if (!out.ok()) {
      std::string type = Str(t, "type");
      return Fail("transform " + std::to_string(i) + (type.empty() ? "" : " (" + type + ")") +
                  ": " + out.status().message());
    }
    input = *std::move(out);
    ++i;
  }
  return input;
}

}  // namespace klutch::compose
