#include "machinery/json.h"

#include <yaml.h>

#include <cmath>
#include <map>
#include <memory>
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

// Counts the nodes of a value (for the alias budget).
size_t NodeCount(const Json& v) {
  size_t n = 1;
  if (v.is_structured()) {
    for (const auto& child : v) n += NodeCount(child);
  }
  return n;
}

// Builds JSON from libyaml's event stream. Aliases copy their anchored value; a budget of
// nodes proportional to the input stops documents that expand without bound
// ("billion laughs").
class YamlBuilder {
 public:
  explicit YamlBuilder(size_t input_size) : budget_(2 * input_size + 1024) {}

  core::Status Scalar(const yaml_event_t& e) {
    std::string text(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
    if (ExpectingKey()) return Key(std::move(text));
    std::string_view tag =
        e.data.scalar.tag ? reinterpret_cast<const char*>(e.data.scalar.tag) : "";
    Json v = (e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && tag != "tag:yaml.org,2002:str")
                 ? ResolvePlain(text)
                 : Json(std::move(text));
    return Add(std::move(v), Anchor(e.data.scalar.anchor));
  }
  core::Status Start(bool mapping, const yaml_char_t* anchor) {
    if (ExpectingKey())
      return core::BadRequest("error converting YAML to JSON: map keys must be strings");
    if (stack_.size() >= 256) return core::BadRequest("YAML nesting is too deep");
    KLUTCH_RETURN_IF_ERROR(Spend(1));
    stack_.push_back(
        Frame{mapping ? Json::object() : Json::array(), mapping, "", false, Anchor(anchor)});
    return core::Status::Ok();
  }
  core::Status End() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return Add(std::move(f.value), f.anchor, /*counted=*/true);
  }
  core::Status Alias(const yaml_event_t& e) {
    std::string name = Anchor(e.data.alias.anchor);
    auto it = anchors_.find(name);
    if (it == anchors_.end()) {
      return core::BadRequest(
          fmt::format("error converting YAML to JSON: unknown anchor '{}'", name));
    }
    if (ExpectingKey()) {
      if (!it->second.first.is_string()) {
        return core::BadRequest("error converting YAML to JSON: map keys must be strings");
      }
      return Key(it->second.first.get<std::string>());
    }
    KLUTCH_RETURN_IF_ERROR(Spend(it->second.second));
    return Add(it->second.first, "", /*counted=*/true);
  }
  Json Result() { return std::move(result_); }

 private:
  struct Frame {
    Json value;
    bool mapping = false;
    std::string key;
    bool have_key = false;
    std::string anchor;
  };

  static std::string Anchor(const yaml_char_t* a) {
    return a ? std::string(reinterpret_cast<const char*>(a)) : std::string();
  }
  bool ExpectingKey() const {
    return !stack_.empty() && stack_.back().mapping && !stack_.back().have_key;
  }
  core::Status Spend(size_t n) {
    if (n > budget_) {
      return core::BadRequest("YAML document expands to too many nodes (aliases?)");
    }
    budget_ -= n;
    return core::Status::Ok();
  }
  core::Status Key(std::string key) {
    stack_.back().key = std::move(key);
    stack_.back().have_key = true;
    return core::Status::Ok();
  }
  core::Status Add(Json v, const std::string& anchor, bool counted = false) {
    if (!counted) KLUTCH_RETURN_IF_ERROR(Spend(1));
    if (!anchor.empty()) anchors_[anchor] = {v, NodeCount(v)};
    if (stack_.empty()) {
      result_ = std::move(v);
      return core::Status::Ok();
    }
    Frame& top = stack_.back();
    if (top.mapping) {
      top.value[top.key] = std::move(v);  // a repeated key keeps the last value
      top.have_key = false;
    } else {
      top.value.push_back(std::move(v));
    }
    return core::Status::Ok();
  }

  size_t budget_;
  std::vector<Frame> stack_;
  std::map<std::string, std::pair<Json, size_t>> anchors_;
  Json result_;
};

}  // namespace

core::Result<Json> ParseYaml(std::string_view text) {
  // JSON is the common case on the wire (kubectl sends JSON as apply-patch+yaml); parse it
  // exactly when it looks like JSON.
  std::string_view trimmed = core::Trim(text);
  if (!trimmed.empty() && (trimmed.front() == '{' || trimmed.front() == '[')) {
    auto json = ParseJson(trimmed);
    if (json.ok()) return json;
  }
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return core::Internal("YAML parser setup failed");
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> guard(&parser, yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  YamlBuilder builder(text.size());
  int documents = 0;
  while (true) {
    yaml_event_t event;
    if (!yaml_parser_parse(&parser, &event)) {
      return core::BadRequest(fmt::format("error converting YAML to JSON: yaml: line {}: {}",
                                          parser.problem_mark.line + 1,
                                          parser.problem ? parser.problem : "invalid YAML"));
    }
    std::unique_ptr<yaml_event_t, void (*)(yaml_event_t*)> ev(&event, yaml_event_delete);
    core::Status st;
    switch (event.type) {
      case YAML_STREAM_END_EVENT:
        return builder.Result();
      case YAML_DOCUMENT_START_EVENT:
        if (++documents > 1) return core::BadRequest("expected one YAML document, found several");
        break;
      case YAML_MAPPING_START_EVENT:
        st = builder.Start(true, event.data.mapping_start.anchor);
        break;
      case YAML_SEQUENCE_START_EVENT:
        st = builder.Start(false, event.data.sequence_start.anchor);
        break;
      case YAML_MAPPING_END_EVENT:
      case YAML_SEQUENCE_END_EVENT:
        st = builder.End();
        break;
      case YAML_SCALAR_EVENT:
        st = builder.Scalar(event);
        break;
      case YAML_ALIAS_EVENT:
        st = builder.Alias(event);
        break;
      default:
        break;
    }
    if (!st.ok()) return st;
  }
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace klutch::machinery
