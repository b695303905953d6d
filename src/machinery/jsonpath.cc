#include "machinery/jsonpath.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/strings.h"

namespace klutch::machinery {

struct JsonPath::Step {
  enum class Kind { kField, kWildcard, kRecursive, kSlice, kUnion, kFilter };
  // One side of a filter comparison: a path from the element, or a literal.
  struct Operand {
    std::vector<Step> path;
    std::optional<Json> literal;
  };
  // A slice bound as client-go keeps it: given or not, and (for the end) derived from the
  // start when only an index was written.
  struct Bound {
    bool known = false;
    bool derived = false;
    int64_t value = 0;
  };

  Kind kind = Kind::kField;
  std::string field;                        // kField
  Bound start, end, step;                   // kSlice
  std::vector<std::vector<Step>> branches;  // kUnion
  Operand left, right;                      // kFilter
  std::string op;                           // kFilter; empty = `left` exists
};

namespace {

using Step = JsonPath::Step;

// Where a field name ends (client-go's isTerminator).
bool IsTerminator(char c) {
  switch (c) {
    case ' ':
    case '\t':
    case '\r':
    case '\n':
    case '.':
    case ',':
    case '[':
    case ']':
    case '$':
    case '@':
    case '{':
    case '}':
      return true;
    default:
      return false;
  }
}

// A letter, digit or '_' (bytes of multi-byte UTF-8 count as letters).
bool IsAlphaNumeric(char c) {
  auto u = static_cast<unsigned char>(c);
  return u == '_' || std::isalnum(u) || u >= 0x80;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

class Parser {
 public:
  // `text` is the action to parse; errors name positions in `whole` from `base` on.
  Parser(std::string_view whole, std::string_view text, size_t base, bool top_level)
      : whole_(whole), text_(text), base_(base), top_level_(top_level) {}

  core::Result<std::vector<Step>> Parse() {
    std::vector<Step> steps;
    while (pos_ < text_.size()) {
      const std::string_view rest = text_.substr(pos_);
      if (rest.starts_with("[?(")) {
        KLUTCH_RETURN_IF_ERROR(Filter(steps));
        continue;
      }
      if (rest.starts_with("..")) {
        if (!steps.empty() && steps.back().kind == Step::Kind::kRecursive) {
          return Error(pos_, "invalid multiple recursive descent");
        }
        pos_ += 2;
        steps.push_back({.kind = Step::Kind::kRecursive});
        if (pos_ < text_.size() && IsAlphaNumeric(text_[pos_])) Field(steps);
        continue;
      }
      const char c = text_[pos_];
      if (c == ' ' || c == '@' || c == '$') {
        ++pos_;
      } else if (c == '.') {
        ++pos_;
        Field(steps);
      } else if (c == '[') {
        KLUTCH_RETURN_IF_ERROR(Bracket(steps));
      } else if (c == '\r' || c == '\n') {
        return Error(pos_, "unclosed action");
      } else if (c == '"' || c == '\'') {
        return Error(pos_, "quoted text is only supported in filters");
      } else if (c == '+' || c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
        return Error(pos_, "numbers are only supported in filters");
      } else if (IsAlphaNumeric(c)) {
        return Error(pos_, "identifiers (range, end, true, false) are not supported");
      } else {
        return Error(pos_, fmt::format("unrecognized character in action: U+{:04X}",
                                       static_cast<unsigned char>(c)));
      }
    }
    return steps;
  }

 private:
  core::Status Error(size_t at, std::string_view what) const {
    return core::BadRequest(
        fmt::format("invalid JSONPath \"{}\" at {}: {}", whole_, base_ + at, what));
  }

  // A field name after '.': up to the next unescaped terminator; a backslash escapes the
  // next character and every backslash is dropped from the name.
  void Field(std::vector<Step>& steps) {
    const size_t start = pos_;
    while (pos_ < text_.size()) {
      if (text_[pos_] == '\\') {
        pos_ = std::min(pos_ + 2, text_.size());
      } else if (IsTerminator(text_[pos_])) {
        break;
      } else {
        ++pos_;
      }
    }
    std::string name;
    for (char c : text_.substr(start, pos_ - start)) {
      if (c != '\\') name += c;
    }
    if (name == "*") {
      steps.push_back({.kind = Step::Kind::kWildcard});
      return;
    }
    // A lone "." (kubectl's `{.}`) is the whole document.
    if (name.empty() && top_level_ && steps.empty() && pos_ == text_.size()) return;
    steps.push_back({.kind = Step::Kind::kField, .field = std::move(name)});
  }

  // [N], [a:b:s], [*], [x,y] and ['key'].
  core::Status Bracket(std::vector<Step>& steps) {
    const size_t open = pos_;
    const size_t close = text_.find_first_of("]\n", open + 1);
    if (close == std::string_view::npos || text_[close] == '\n') {
      return Error(open, "unterminated array");
    }
    std::string_view inner = text_.substr(open + 1, close - open - 1);
    pos_ = close + 1;
    if (inner == "*") inner = ":";
    if (inner.find(',') != std::string_view::npos) {
      Step u{.kind = Step::Kind::kUnion};
      for (auto part : core::Split(inner, ',')) {
        while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
        while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
        std::string sub = "[" + std::string(part) + "]";
        Parser p(whole_, sub, base_ + open, false);
        KLUTCH_ASSIGN_OR_RETURN(auto branch, p.Parse());
        u.branches.push_back(std::move(branch));
      }
      steps.push_back(std::move(u));
      return core::Status::Ok();
    }
    if (inner.size() >= 2 && inner.front() == '\'' && inner.back() == '\'' &&
        inner.substr(1, inner.size() - 2).find('\'') == std::string_view::npos) {
      // client-go reads the key as a field path.
      std::string sub = "." + std::string(inner.substr(1, inner.size() - 2));
      Parser p(whole_, sub, base_ + open, false);
      KLUTCH_ASSIGN_OR_RETURN(auto keyed, p.Parse());
      for (auto& s : keyed) steps.push_back(std::move(s));
      return core::Status::Ok();
    }
    // -?\d* (:-?\d*)? (:-?\d*)?
    std::string_view rest = inner;
    auto number = [&rest]() {
      size_t i = 0;
      if (i < rest.size() && rest[i] == '-') ++i;
      while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
      std::string_view n = rest.substr(0, i);
      rest.remove_prefix(i);
      return n;
    };
    std::string_view parts[3];
    bool present[3] = {true, false, false};
    parts[0] = number();
    for (int k = 1; k < 3; ++k) {
      if (!rest.empty() && rest.front() == ':') {
        rest.remove_prefix(1);
        present[k] = true;
        parts[k] = number();
      }
    }
    if (!rest.empty()) return Error(open, fmt::format("invalid array index {}", inner));
    Step s{.kind = Step::Kind::kSlice};
    Step::Bound* bounds[3] = {&s.start, &s.end, &s.step};
    for (int k = 0; k < 3; ++k) {
      if (!parts[k].empty()) {
        auto v = ParseInt(parts[k]);
        if (!v) return Error(open, fmt::format("array index {} is not a number", parts[k]));
        *bounds[k] = {.known = true, .value = *v};
      } else if (k == 1 && !present[1]) {
        // [N] is the slice [N:N+1].
        if (s.start.value == std::numeric_limits<int64_t>::max()) {
          return Error(open, fmt::format("array index {} is not a number", parts[0]));
        }
        s.end = {.known = true, .derived = true, .value = s.start.value + 1};
      }
    }
    steps.push_back(std::move(s));
    return core::Status::Ok();
  }

  // [?(<operand> <op> <operand>)] or [?(<path>)].
  core::Status Filter(std::vector<Step>& steps) {
    const size_t open = pos_;
    pos_ += 3;
    const size_t start = pos_;
    bool begin = false, end = false;
    char pair = 0;
    while (true) {
      if (pos_ >= text_.size() || text_[pos_] == '\n') return Error(open, "unterminated filter");
      const char c = text_[pos_++];
      if (c == '"' || c == '\'') {
        if (!begin) {
          begin = true;
          pair = c;
        } else if (text_[pos_ - 2] != '\\' && c == pair) {
          end = true;
        }
      } else if (c == ')' && begin == end) {
        break;
      }
    }
    if (pos_ >= text_.size() || text_[pos_] != ']') {
      return Error(pos_, "unclosed array expect ]");
    }
    ++pos_;
    const std::string_view text = text_.substr(start, pos_ - 2 - start);
    Step f{.kind = Step::Kind::kFilter};
    // ^([^!<>=]+)([!<>=]+)(.+?)$
    const size_t op_start = text.find_first_of("!<>=");
    size_t op_end = op_start == std::string_view::npos ? std::string_view::npos
                                                       : text.find_first_not_of("!<>=", op_start);
    if (op_start != std::string_view::npos && op_start > 0 && op_end == std::string_view::npos &&
        text.size() - op_start >= 2) {
      op_end = text.size() - 1;  // the right operand takes the last operator character
    }
    if (op_start == std::string_view::npos || op_start == 0 || op_end == std::string_view::npos) {
      KLUTCH_ASSIGN_OR_RETURN(f.left, ParseOperand(text, open));
    } else {
      KLUTCH_ASSIGN_OR_RETURN(f.left, ParseOperand(text.substr(0, op_start), open));
      f.op = std::string(text.substr(op_start, op_end - op_start));
      static const std::vector<std::string_view> kOps = {"==", "!=", "<", ">", "<=", ">="};
      if (std::find(kOps.begin(), kOps.end(), f.op) == kOps.end()) {
        return Error(open + 3 + op_start, fmt::format("unrecognized filter operator {}", f.op));
      }
      KLUTCH_ASSIGN_OR_RETURN(f.right, ParseOperand(text.substr(op_end), open));
    }
    steps.push_back(std::move(f));
    return core::Status::Ok();
  }

  core::Result<Step::Operand> ParseOperand(std::string_view text, size_t at) {
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
    Step::Operand out;
    if (text.empty()) return Error(at, "empty operand in filter");
    const char c = text.front();
    if (c == '"' || c == '\'') {
      auto s = Unquote(text);
      if (!s) return Error(at, fmt::format("bad quoted string {} in filter", text));
      out.literal = Json(std::move(*s));
      return out;
    }
    if (c == '+' || c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      std::string_view digits = text.front() == '+' ? text.substr(1) : text;
      if (auto i = ParseInt(digits)) {
        out.literal = Json(*i);
        return out;
      }
      double d = 0;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), d);
      if (ec != std::errc() || end != digits.data() + digits.size() ||
          digits.find_first_not_of("-0123456789.") != std::string_view::npos) {
        return Error(at, fmt::format("cannot parse number {}", text));
      }
      out.literal = Json(d);
      return out;
    }
    if (text == "true" || text == "false") {
      out.literal = Json(text == "true");
      return out;
    }
    Parser p(whole_, text, base_ + at, false);
    KLUTCH_ASSIGN_OR_RETURN(out.path, p.Parse());
    return out;
  }

  // A whole quoted string, with Go's escapes (strconv.UnquoteChar).
  static std::optional<std::string> Unquote(std::string_view s) {
    if (s.size() < 2 || s.back() != s.front()) return std::nullopt;
    const char quote = s.front();
    s = s.substr(1, s.size() - 2);
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const char c = s[i];
      if (c == quote) return std::nullopt;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (++i >= s.size()) return std::nullopt;
      const char e = s[i++];
      auto hex = [&](int n) -> std::optional<uint32_t> {
        if (i + n > s.size()) return std::nullopt;
        uint32_t v = 0;
        auto [end, ec] = std::from_chars(s.data() + i, s.data() + i + n, v, 16);
        if (ec != std::errc() || end != s.data() + i + n) return std::nullopt;
        i += n;
        return v;
      };
      if (auto simple = core::SimpleEscape(e)) {
        out += *simple;
        continue;
      }
      switch (e) {
        case '\'':
        case '"':
          if (e != quote) return std::nullopt;
          out += e;
          break;
        case 'x': {
          auto v = hex(2);
          if (!v) return std::nullopt;
          out += static_cast<char>(*v);
          break;
        }
        case 'u':
        case 'U': {
          auto v = hex(e == 'u' ? 4 : 8);
          if (!v || *v > 0x10FFFF || (*v >= 0xD800 && *v <= 0xDFFF)) return std::nullopt;
          core::AppendUtf8(out, *v);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            if (i + 2 > s.size()) return std::nullopt;
            uint32_t v = 0;
            auto [end, ec] = std::from_chars(s.data() + i - 1, s.data() + i + 2, v, 8);
            if (ec != std::errc() || end != s.data() + i + 2 || v > 255) return std::nullopt;
            i += 2;
            out += static_cast<char>(v);
            break;
          }
          return std::nullopt;
      }
    }
    return out;
  }

  std::string_view whole_;
  std::string_view text_;
  size_t base_ = 0;
  bool top_level_ = false;
  size_t pos_ = 0;
};

// ----------------------------------------------------------------------------------------
// Evaluation. Each step maps the current values to the next; false is an evaluation error
// as client-go reports one (the whole path then selects nothing).

bool Apply(const std::vector<Step>& steps, std::vector<const Json*>& values);

void CollectContainers(const Json* v, std::vector<const Json*>& out) {
  if ((v->is_object() || v->is_array()) && !v->empty()) {
    out.push_back(v);
    for (const auto& child : *v) CollectContainers(&child, out);
  }
}

bool Slice(const Step& st, const std::vector<const Json*>& in, std::vector<const Json*>& out) {
  for (const Json* v : in) {
    if (v->is_null()) continue;
    if (!v->is_array()) return false;
    const auto len = static_cast<int64_t>(v->size());
    int64_t start = st.start.known ? st.start.value : 0;
    if (start < 0) start += len;
    int64_t end = st.end.known ? st.end.value : len;
    if (end < 0 || (end == 0 && st.end.derived)) end += len;
    if (end == start) return true;  // client-go stops here with what it has
    if (start >= len || start < 0 || end > len || end < 0 || start > end) return false;
    int64_t step = 1;
    if (st.step.known) {
      if (st.step.value <= 0) return false;
      step = st.step.value;
    }
    for (int64_t i = start; i < end; i += step) out.push_back(&(*v)[static_cast<size_t>(i)]);
  }
  return true;
}

// The operand's values for one element: a literal is one value.
bool EvalOperand(const Step::Operand& o, const Json* element, std::vector<const Json*>& out) {
  if (o.literal) {
    out = {&*o.literal};
    return true;
  }
  out = {element};
  return Apply(o.path, out);
}

enum class Kind { kBool, kInt, kFloat, kString, kNull, kOther };

Kind KindOf(const Json& v) {
  if (v.is_boolean()) return Kind::kBool;
  if (v.is_number_float()) return Kind::kFloat;
  if (v.is_number()) return Kind::kInt;
  if (v.is_string()) return Kind::kString;
  if (v.is_null()) return Kind::kNull;
  return Kind::kOther;
}

// Go text/template's comparison functions, as client-go's filters use them: values of
// different kinds (or of kinds without an order, for < and >) do not compare.
std::optional<bool> Compare(const Json& a, const std::string& op, const Json& b) {
  const Kind ka = KindOf(a), kb = KindOf(b);
  auto equal = [&]() -> std::optional<bool> {
    if (ka == Kind::kNull || kb == Kind::kNull) return ka == kb;
    if (ka != kb || ka == Kind::kOther) return std::nullopt;
    return a == b;
  };
  auto less = [&]() -> std::optional<bool> {
    if (ka != kb || ka == Kind::kBool || ka == Kind::kNull || ka == Kind::kOther) {
      return std::nullopt;
    }
    return a < b;
  };
  if (op == "==") return equal();
  if (op == "!=") {
    auto e = equal();
    if (!e) return std::nullopt;
    return !*e;
  }
  auto lt = less();
  if (!lt) return std::nullopt;
  if (op == "<") return *lt;
  if (op == ">=") return !*lt;
  auto eq = equal();
  if (!eq) return std::nullopt;
  if (op == "<=") return *lt || *eq;
  return !(*lt || *eq);  // ">"
}

bool Filter(const Step& st, const std::vector<const Json*>& in, std::vector<const Json*>& out) {
  for (const Json* v : in) {
    if (!v->is_array()) return false;
    for (const Json& element : *v) {
      std::vector<const Json*> lefts;
      const bool left_ok = EvalOperand(st.left, &element, lefts);
      if (st.op.empty()) {
        if (left_ok && !lefts.empty()) out.push_back(&element);
        continue;
      }
      if (!left_ok || lefts.size() > 1) return false;
      if (lefts.empty()) continue;
      std::vector<const Json*> rights;
      if (!EvalOperand(st.right, &element, rights) || rights.size() > 1) return false;
      if (rights.empty()) continue;
      auto pass = Compare(*lefts[0], st.op, *rights[0]);
      if (!pass) return false;
      if (*pass) out.push_back(&element);
    }
  }
  return true;
}

bool Apply(const std::vector<Step>& steps, std::vector<const Json*>& values) {
  for (const Step& st : steps) {
    std::vector<const Json*> next;
    switch (st.kind) {
      case Step::Kind::kField:
        for (const Json* v : values) {
          if (!v->is_object()) continue;
          if (auto it = v->find(st.field); it != v->end()) next.push_back(&*it);
        }
        break;
      case Step::Kind::kWildcard:
        for (const Json* v : values) {
          if (!v->is_object() && !v->is_array()) continue;
          for (const auto& child : *v) next.push_back(&child);
        }
        break;
      case Step::Kind::kRecursive:
        for (const Json* v : values) CollectContainers(v, next);
        break;
      case Step::Kind::kSlice:
        if (!Slice(st, values, next)) return false;
        break;
      case Step::Kind::kUnion:
        for (const auto& branch : st.branches) {
          std::vector<const Json*> part = values;
          if (!Apply(branch, part)) return false;
          next.insert(next.end(), part.begin(), part.end());
        }
        break;
      case Step::Kind::kFilter:
        if (!Filter(st, values, next)) return false;
        break;
    }
    values = std::move(next);
  }
  return true;
}

}  // namespace

core::Result<JsonPath> JsonPath::Compile(std::string_view expression) {
  std::string_view s = expression;
  size_t base = 0;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) {
    s.remove_prefix(1);
    ++base;
  }
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (!s.empty() && s.front() == '{') {
    if (s.back() != '}' || s.size() < 2) {
      return core::BadRequest(
          fmt::format("invalid JSONPath \"{}\" at {}: unclosed action", expression, base));
    }
    s = s.substr(1, s.size() - 2);
    ++base;
  }
  Parser p(expression, s, base, true);
  KLUTCH_ASSIGN_OR_RETURN(auto steps, p.Parse());
  JsonPath path;
  path.steps_ = std::make_shared<const std::vector<Step>>(std::move(steps));
  return path;
}

std::vector<const Json*> JsonPath::Evaluate(const Json& root) const {
  std::vector<const Json*> values{&root};
  if (!Apply(*steps_, values)) return {};
  return values;
}

}  // namespace klutch::machinery
