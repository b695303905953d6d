#include "machinery/json.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::machinery {

namespace {

// Deepest nesting of objects and arrays in JSON text (strings skipped). Bounding it keeps the
// recursive algorithms that later walk a document (copy, compare, dump) off the stack limit.
size_t NestingDepth(std::string_view text) {
  size_t depth = 0, max = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max = std::max(max, ++depth);
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return max;
}

}  // namespace

core::Result<Json> ParseJson(std::string_view text) {
  if (NestingDepth(text) > kMaxJsonDepth) {
    return core::BadRequest(
        fmt::format("invalid JSON: nesting deeper than {} levels", kMaxJsonDepth));
  }
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    return core::BadRequest(fmt::format("invalid JSON at byte {}: {}", e.byte,
                                        std::string_view(e.what()).substr(0, 200)));
  } catch (const Json::exception& e) {
    // Numbers out of range and similar: still the client's input, never a crash.
    return core::BadRequest(
        fmt::format("invalid JSON: {}", std::string_view(e.what()).substr(0, 200)));
  }
}

core::Result<Json> ParseJsonReportingDuplicates(std::string_view text,
                                                std::vector<std::string>& duplicates) {
  if (NestingDepth(text) > kMaxJsonDepth) return ParseJson(text);
  // A parser callback sees every key; a stack of (path, keys seen) per open object finds
  // repeats. Arrays push a frame too, so that depths line up.
  struct Frame {
    std::string path;
    std::vector<std::string> keys;
    bool object = false;
  };
  std::vector<Frame> stack;
  std::string pending_key;
  auto child_path = [&](const std::string& key) {
    return stack.empty() || stack.back().path.empty() ? key : stack.back().path + "." + key;
  };
  Json::parser_callback_t cb = [&](int, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        Frame f;
        f.object = event == Json::parse_event_t::object_start;
        f.path = stack.empty()
                     ? ""
                     : (stack.back().object ? child_path(pending_key) : stack.back().path);
        stack.push_back(std::move(f));
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case Json::parse_event_t::key: {
        pending_key = parsed.get<std::string>();
        if (!stack.empty()) {
          auto& keys = stack.back().keys;
          if (std::find(keys.begin(), keys.end(), pending_key) != keys.end()) {
            duplicates.push_back(child_path(pending_key));
          } else {
            keys.push_back(pending_key);
          }
        }
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text, cb);
  } catch (const Json::exception&) {
    return ParseJson(text);  // same input, for the error message
  }
}

namespace {

bool IsDecimalInt(std::string_view s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

// Resolves a plain (unquoted) scalar the way YAML 1.1 core resolution in Kubernetes does.
Json ResolvePlain(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (IsDecimalInt(s)) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (errno == 0 && end == s.c_str() + s.size()) return static_cast<int64_t>(v);
    double d = std::strtod(s.c_str(), nullptr);
    return d;
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    char* end = nullptr;
    long long v = std::strtoll(s.c_str() + 2, &end, 16);
    if (end == s.c_str() + s.size()) return static_cast<int64_t>(v);
  }
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf") return HUGE_VAL;
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -HUGE_VAL;
  // Floats: digits with a '.' or exponent, nothing else.
  bool has_digit = false, float_like = false;
  for (char c : s) {
    if (c >= '0' && c <= '9') {
      has_digit = true;
    } else if (c == '.' || c == 'e' || c == 'E') {
      float_like = true;
    } else if (c != '+' && c != '-') {
      return s;
    }
  }
  if (has_digit && float_like) {
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (end == s.c_str() + s.size()) return d;
  }
  return s;
}

core::Result<Json> Convert(const YAML::Node& node, int depth) {
  if (depth > 256) return core::BadRequest("YAML nesting is too deep");
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return Json(nullptr);
    case YAML::NodeType::Scalar: {
      const std::string& v = node.Scalar();
      // Tag "!" marks a quoted scalar; "?" a plain one subject to resolution.
      if (node.Tag() == "!" || node.Tag() == "tag:yaml.org,2002:str") return Json(v);
      return ResolvePlain(v);
    }
    case YAML::NodeType::Sequence: {
      Json arr = Json::array();
      for (const auto& item : node) {
        KLUTCH_ASSIGN_OR_RETURN(Json v, Convert(item, depth + 1));
        arr.push_back(std::move(v));
      }
      return arr;
    }
    case YAML::NodeType::Map: {
      Json obj = Json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return core::BadRequest(
              fmt::format("YAML line {}: map keys must be strings", kv.first.Mark().line + 1));
        }
        KLUTCH_ASSIGN_OR_RETURN(Json v, Convert(kv.second, depth + 1));
        obj[kv.first.Scalar()] = std::move(v);
      }
      return obj;
    }
  }
  return Json(nullptr);
}

}  // namespace

core::Result<Json> ParseYaml(std::string_view text) {
  // JSON is the common case on the wire (kubectl sends JSON as apply-patch+yaml); parse it
  // exactly when it looks like JSON.
  std::string_view trimmed = core::Trim(text);
  if (!trimmed.empty() && (trimmed.front() == '{' || trimmed.front() == '[')) {
    auto json = ParseJson(trimmed);
    if (json.ok()) return json;
  }
  try {
    std::vector<YAML::Node> docs = YAML::LoadAll(std::string(text));
    if (docs.empty()) return Json(nullptr);
    if (docs.size() > 1) return core::BadRequest("expected one YAML document, found several");
    return Convert(docs[0], 0);
  } catch (const YAML::Exception& e) {
    return core::BadRequest(
        fmt::format("error converting YAML to JSON: yaml: line {}: {}", e.mark.line + 1, e.msg));
  }
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace klutch::machinery
