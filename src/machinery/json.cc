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

namespace {

// Parses the documents of a YAML stream; more than `max_documents` -> BadRequest.
core::Result<std::vector<Json>> ParseYamlStream(std::string_view text, size_t max_documents) {
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return core::Internal("YAML parser setup failed");
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> guard(&parser, yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                               text.size());
  std::vector<Json> documents;
  YamlBuilder builder(text.size());
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
        if (documents.empty()) documents.push_back(Json());
        return documents;
      case YAML_DOCUMENT_START_EVENT:
        if (documents.size() >= max_documents) {
          return core::BadRequest("expected one YAML document, found several");
        }
        builder = YamlBuilder(text.size());
        break;
      case YAML_DOCUMENT_END_EVENT:
        documents.push_back(builder.Result());
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

bool LooksLikeJson(std::string_view text) {
  std::string_view trimmed = core::Trim(text);
  return !trimmed.empty() && (trimmed.front() == '{' || trimmed.front() == '[');
}

// Whether a string must be quoted to read back as the same string.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  Json resolved = ResolvePlain(s);
  if (!resolved.is_string()) return true;  // would read back as null, bool or a number
  static constexpr std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`";
  if (kIndicators.find(s.front()) != std::string_view::npos &&
      !(s.front() == '-' && s.size() > 1 && s[1] != ' ') &&
      !(s.front() == '?' && s.size() > 1 && s[1] != ' ') &&
      !(s.front() == ':' && s.size() > 1 && s[1] != ' ')) {
    return true;
  }
  if (s.front() == ' ' || s.back() == ' ' || s.back() == ':') return true;
  // At the start of a line these mark a document's start or end: "---" alone reads back as an
  // empty document (null).
  if (s.starts_with("---") || s.starts_with("...")) return true;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return true;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  static const char* const kWords[] = {"y",  "Y",  "yes", "Yes", "YES", "n",   "N",   "no", "No",
                                       "NO", "on", "On",  "ON",  "off", "Off", "OFF", "~"};
  for (const char* w : kWords) {
    if (s == w) return true;
  }
  return false;
}

// A YAML double-quoted scalar: everything outside YAML's printable set escaped.
void EmitQuoted(std::string& out, const std::string& s) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    int32_t cp = core::DecodeUtf8(s, i);
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(s[start]));
    } else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x2028 || cp == 0x2029 ||
               (cp >= 0xd800 && cp < 0xe000) || cp == 0xfeff || cp == 0xfffe || cp == 0xffff) {
      // Control characters, and the line breaks YAML would fold (NEL, LS, PS).
      out += fmt::format("\\u{:04x}", cp);
    } else {
      out.append(s, start, i - start);
    }
  }
  out += '"';
}

bool IsPlainSafeUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    int32_t cp = core::DecodeUtf8(s, i);
    if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x2028 || cp == 0x2029 || cp == 0xfeff ||
        cp >= 0xfffe) {
      return false;
    }
  }
  return true;
}

void EmitScalar(std::string& out, const Json& v) {
  if (const auto* s = v.get_ptr<const std::string*>()) {
    if (NeedsQuotes(*s) || !IsPlainSafeUtf8(*s)) {
      EmitQuoted(out, *s);
    } else {
      out += *s;
    }
  } else {
    out += Dump(v);
  }
}

bool IsEmptyCollection(const Json& v) { return v.is_structured() && v.empty(); }

void EmitYaml(std::string& out, const Json& v, int indent);

// A value after "key:" or "- ": inline when scalar or empty, else on the next lines.
void EmitValue(std::string& out, const Json& v, int indent, bool in_list) {
  if (!v.is_structured() || IsEmptyCollection(v)) {
    out += " ";
    if (IsEmptyCollection(v)) {
      out += v.is_object() ? "{}" : "[]";
    } else {
      EmitScalar(out, v);
    }
    out += "\n";
    return;
  }
  out += "\n";
  // Lists under a key are not indented further, as kubectl prints them.
  EmitYaml(out, v, v.is_array() && !in_list ? indent : indent + 2);
}

void EmitYaml(std::string& out, const Json& v, int indent) {
  std::string pad(indent, ' ');
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      out += pad;
      Json k(key);
      EmitScalar(out, k);
      out += ":";
      EmitValue(out, value, indent, false);
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      out += pad + "-";
      if (item.is_object() && !item.empty()) {
        // The first key goes on the dash's line, the others line up under it.
        std::string nested;
        EmitYaml(nested, item, indent + 2);
        out += " " + nested.substr(indent + 2);
      } else {
        EmitValue(out, item, indent, true);
      }
    }
  } else {
    out += pad;
    EmitScalar(out, v);
    out += "\n";
  }
}

}  // namespace

core::Result<Json> ParseYaml(std::string_view text) {
  // JSON is the common case on the wire (kubectl sends JSON as apply-patch+yaml); parse it
  // exactly when it looks like JSON.
  if (LooksLikeJson(text)) {
    auto json = ParseJson(core::Trim(text));
    if (json.ok()) return json;
  }
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Json> documents, ParseYamlStream(text, 1));
  return std::move(documents.front());
}

core::Result<std::vector<Json>> ParseYamlDocuments(std::string_view text) {
  if (LooksLikeJson(text)) {
    auto json = ParseJson(core::Trim(text));
    if (json.ok()) return std::vector<Json>{std::move(*json)};
  }
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Json> documents, ParseYamlStream(text, SIZE_MAX));
  std::vector<Json> out;
  for (auto& d : documents) {
    if (!d.is_null()) out.push_back(std::move(d));
  }
  return out;
}

std::string ToYaml(const Json& value) {
  std::string out;
  if (IsEmptyCollection(value)) return value.is_object() ? "{}\n" : "[]\n";
  EmitYaml(out, value, 0);
  return out;
}

std::string Dump(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace klutch::machinery
