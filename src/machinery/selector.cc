#include "machinery/selector.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "core/strings.h"
#include "fmt/format.h"
#include "machinery/validation.h"

namespace klutch::machinery {

namespace {

// Label syntax and quoting come from validation.h and core/strings.h, as upstream's
// selector parsing uses k8s.io/apimachinery/pkg/util/validation.

// Go's %#v of a []string.
std::string QuoteList(const std::vector<std::string>& values) {
  std::string out = "[]string{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i) out += ", ";
    out += core::GoQuote(values[i]);
  }
  return out + "}";
}

// Go's strconv.ParseInt(s, 10, 64).
std::optional<int64_t> ParseGoInt64(std::string_view s) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

using Op = LabelSelector::Operator;
using LabelRequirement = LabelSelector::Requirement;

std::string KeyError(std::string_view key) {
  std::vector<std::string> errs = IsQualifiedName(key);
  if (errs.empty()) return "";
  return fmt::format("key: Invalid value: {}: {}", core::GoQuote(key), core::Join(errs, "; "));
}

// labels.NewRequirement: validates and normalizes one requirement.
core::Result<LabelRequirement> NewRequirement(std::string key, Op op,
                                              std::vector<std::string> values) {
  std::vector<std::string> errs;
  if (std::string e = KeyError(key); !e.empty()) errs.push_back(std::move(e));
  switch (op) {
    case Op::kIn:
    case Op::kNotIn:
      if (values.empty()) {
        errs.push_back(
            fmt::format("values: Invalid value: {}: for 'in', 'notin' operators, values "
                        "set can't be empty",
                        QuoteList(values)));
      }
      break;
    case Op::kEquals:
    case Op::kDoubleEquals:
    case Op::kNotEquals:
      if (values.size() != 1) {
        errs.push_back(fmt::format(
            "values: Invalid value: {}: exact-match compatibility requires one single value",
            QuoteList(values)));
      }
      break;
    case Op::kExists:
    case Op::kDoesNotExist:
      if (!values.empty()) {
        errs.push_back(fmt::format(
            "values: Invalid value: {}: values set must be empty for exists and does not exist",
            QuoteList(values)));
      }
      break;
    case Op::kGreaterThan:
    case Op::kLessThan:
      if (values.size() != 1) {
        errs.push_back(
            fmt::format("values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly "
                        "one value is required",
                        QuoteList(values)));
      }
      for (size_t i = 0; i < values.size(); ++i) {
        if (!ParseGoInt64(values[i])) {
          errs.push_back(
              fmt::format("values[{}]: Invalid value: {}: for 'Gt', 'Lt' operators, the "
                          "value must be an integer",
                          i, core::GoQuote(values[i])));
        }
      }
      break;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<std::string> value_errs = IsValidLabelValue(values[i]);
    if (!value_errs.empty()) {
      errs.push_back(fmt::format("values[{}][{}]: Invalid value: {}: {}", i, key,
                                 core::GoQuote(values[i]), core::Join(value_errs, "; ")));
    }
  }
  if (errs.size() == 1) return core::BadRequest(errs[0]);
  if (errs.size() > 1) return core::BadRequest("[" + core::Join(errs, ", ") + "]");
  if (op == Op::kIn || op == Op::kNotIn) {
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
  }
  return LabelRequirement{std::move(key), op, std::move(values)};
}

void SortByKey(std::vector<LabelRequirement>& requirements) {
  std::stable_sort(requirements.begin(), requirements.end(),
                   [](const auto& a, const auto& b) { return a.key < b.key; });
}

// ---- The label selector string syntax (labels.Parse) ----

enum class Token {
  kEnd,
  kIdentifier,
  kIn,
  kNotIn,
  kDoesNotExist,  // !
  kNotEquals,     // !=
  kEquals,        // =
  kDoubleEquals,  // ==
  kGreaterThan,   // >
  kLessThan,      // <
  kOpenPar,
  kClosedPar,
  kComma,
};

struct Item {
  Token token;
  std::string literal;
};

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool IsSpecialSymbol(char c) {
  return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

// Every token of `text`, ending with kEnd. Identifiers run to the next whitespace or special
// symbol; "in" and "notin" are keywords; special symbols take the longest match.
std::vector<Item> Scan(std::string_view text) {
  std::vector<Item> items;
  size_t pos = 0;
  while (true) {
    while (pos < text.size() && IsWhitespace(text[pos])) ++pos;
    if (pos == text.size()) break;
    char c = text[pos];
    if (IsSpecialSymbol(c)) {
      if ((c == '!' || c == '=') && pos + 1 < text.size() && text[pos + 1] == '=') {
        items.push_back({c == '!' ? Token::kNotEquals : Token::kDoubleEquals,
                         std::string(text.substr(pos, 2))});
        pos += 2;
        continue;
      }
      Token token = c == '='   ? Token::kEquals
                    : c == '!' ? Token::kDoesNotExist
                    : c == '(' ? Token::kOpenPar
                    : c == ')' ? Token::kClosedPar
                    : c == ',' ? Token::kComma
                    : c == '>' ? Token::kGreaterThan
                               : Token::kLessThan;
      items.push_back({token, std::string(1, c)});
      ++pos;
      continue;
    }
    size_t start = pos;
    while (pos < text.size() && !IsWhitespace(text[pos]) && !IsSpecialSymbol(text[pos])) ++pos;
    std::string literal(text.substr(start, pos - start));
    Token token = literal == "in"      ? Token::kIn
                  : literal == "notin" ? Token::kNotIn
                                       : Token::kIdentifier;
    items.push_back({token, std::move(literal)});
  }
  items.push_back({Token::kEnd, ""});
  return items;
}

class SelectorParser {
 public:
  explicit SelectorParser(std::string_view text) : items_(Scan(text)) {}

  core::Result<std::vector<LabelRequirement>> Parse() {
    std::vector<LabelRequirement> requirements;
    while (true) {
      auto [token, literal] = Lookahead(kValues);
      if (token == Token::kEnd) return requirements;
      if (token != Token::kIdentifier && token != Token::kDoesNotExist) {
        return core::BadRequest(
            fmt::format("found '{}', expected: !, identifier, or 'end of string'", literal));
      }
      auto requirement = ParseRequirement();
      if (!requirement.ok()) {
        return core::BadRequest("unable to parse requirement: " + requirement.status().message());
      }
      requirements.push_back(std::move(*requirement));
      auto [next, next_literal] = Consume(kValues);
      if (next == Token::kEnd) return requirements;
      if (next != Token::kComma) {
        return core::BadRequest(
            fmt::format("found '{}', expected: ',' or 'end of string'", next_literal));
      }
      auto [after, after_literal] = Lookahead(kValues);
      if (after != Token::kIdentifier && after != Token::kDoesNotExist) {
        return core::BadRequest(
            fmt::format("found '{}', expected: identifier after ','", after_literal));
      }
    }
  }

 private:
  // In value position the keywords are ordinary identifiers ("env in (in)").
  enum Context { kKeyAndOperator, kValues };

  std::pair<Token, std::string_view> Lookahead(Context context) const {
    const Item& item = items_[position_];
    Token token = item.token;
    if (context == kValues && (token == Token::kIn || token == Token::kNotIn)) {
      token = Token::kIdentifier;
    }
    return {token, item.literal};
  }

  std::pair<Token, std::string_view> Consume(Context context) {
    auto result = Lookahead(context);
    if (position_ + 1 < items_.size()) ++position_;
    return result;
  }

  core::Result<LabelRequirement> ParseRequirement() {
    auto [token, literal] = Consume(kValues);
    bool does_not_exist = token == Token::kDoesNotExist;
    if (does_not_exist) std::tie(token, literal) = Consume(kValues);
    if (token != Token::kIdentifier) {
      return core::BadRequest(fmt::format("found '{}', expected: identifier", literal));
    }
    std::string key(literal);
    if (std::string e = KeyError(key); !e.empty()) return core::BadRequest(std::move(e));
    Token next = Lookahead(kValues).first;
    if (does_not_exist) return NewRequirement(std::move(key), Op::kDoesNotExist, {});
    if (next == Token::kEnd || next == Token::kComma) {
      return NewRequirement(std::move(key), Op::kExists, {});
    }
    KLUTCH_ASSIGN_OR_RETURN(Op op, ParseOperator());
    std::vector<std::string> values;
    if (op == Op::kIn || op == Op::kNotIn) {
      KLUTCH_ASSIGN_OR_RETURN(values, ParseValues());
    } else {
      KLUTCH_ASSIGN_OR_RETURN(values, ParseExactValue());
    }
    return NewRequirement(std::move(key), op, std::move(values));
  }

  core::Result<Op> ParseOperator() {
    auto [token, literal] = Consume(kKeyAndOperator);
    switch (token) {
      case Token::kIn:
        return Op::kIn;
      case Token::kNotIn:
        return Op::kNotIn;
      case Token::kEquals:
        return Op::kEquals;
      case Token::kDoubleEquals:
        return Op::kDoubleEquals;
      case Token::kNotEquals:
        return Op::kNotEquals;
      case Token::kGreaterThan:
        return Op::kGreaterThan;
      case Token::kLessThan:
        return Op::kLessThan;
      default:
        return core::BadRequest(
            fmt::format("found '{}', expected: in, notin, =, ==, !=, gt, lt", literal));
    }
  }

  // "(" values ")"; "()" is the set {""} as in Kubernetes.
  core::Result<std::vector<std::string>> ParseValues() {
    auto [token, literal] = Consume(kValues);
    if (token != Token::kOpenPar) {
      return core::BadRequest(fmt::format("found '{}' expected: '('", literal));
    }
    auto [next, next_literal] = Lookahead(kValues);
    if (next == Token::kClosedPar) {
      Consume(kValues);
      return std::vector<std::string>{""};
    }
    if (next != Token::kIdentifier && next != Token::kComma) {
      return core::BadRequest(
          fmt::format("found '{}', expected: ',', ')' or identifier", next_literal));
    }
    KLUTCH_ASSIGN_OR_RETURN(std::set<std::string> values, ParseIdentifiersList());
    auto [closing, closing_literal] = Consume(kValues);
    if (closing != Token::kClosedPar) {
      return core::BadRequest(fmt::format("found '{}', expected: ')'", closing_literal));
    }
    return std::vector<std::string>(values.begin(), values.end());
  }

  // Comma-separated, possibly empty identifiers up to (not including) ")".
  core::Result<std::set<std::string>> ParseIdentifiersList() {
    std::set<std::string> values;
    while (true) {
      auto [token, literal] = Consume(kValues);
      if (token == Token::kIdentifier) {
        values.insert(std::string(literal));
        auto [next, next_literal] = Lookahead(kValues);
        if (next == Token::kComma) continue;
        if (next == Token::kClosedPar) return values;
        return core::BadRequest(fmt::format("found '{}', expected: ',' or ')'", next_literal));
      }
      if (token == Token::kComma) {
        // Empty values: "(,a)", "(a,)", "(a,,b)".
        if (values.empty()) values.insert("");
        Token next = Lookahead(kValues).first;
        if (next == Token::kClosedPar) {
          values.insert("");
          return values;
        }
        if (next == Token::kComma) {
          Consume(kValues);
          values.insert("");
        }
        continue;
      }
      return core::BadRequest(fmt::format("found '{}', expected: ',', or identifier", literal));
    }
  }

  // The value after =, ==, !=, >, <; nothing before "," or the end is the empty value.
  core::Result<std::vector<std::string>> ParseExactValue() {
    Token next = Lookahead(kValues).first;
    if (next == Token::kEnd || next == Token::kComma) return std::vector<std::string>{""};
    auto [token, literal] = Consume(kValues);
    if (token == Token::kIdentifier) return std::vector<std::string>{std::string(literal)};
    return core::BadRequest(fmt::format("found '{}', expected: identifier", literal));
  }

  std::vector<Item> items_;
  size_t position_ = 0;
};

std::string RequirementString(const LabelRequirement& r) {
  std::string out;
  if (r.op == Op::kDoesNotExist) out += '!';
  out += r.key;
  switch (r.op) {
    case Op::kExists:
    case Op::kDoesNotExist:
      return out;
    case Op::kEquals:
      out += '=';
      break;
    case Op::kDoubleEquals:
      out += "==";
      break;
    case Op::kNotEquals:
      out += "!=";
      break;
    case Op::kIn:
      out += " in ";
      break;
    case Op::kNotIn:
      out += " notin ";
      break;
    case Op::kGreaterThan:
      out += '>';
      break;
    case Op::kLessThan:
      out += '<';
      break;
  }
  bool set = r.op == Op::kIn || r.op == Op::kNotIn;
  if (set) out += '(';
  std::vector<std::string> values = r.values;
  std::sort(values.begin(), values.end());
  out += core::Join(values, ",");
  if (set) out += ')';
  return out;
}

bool RequirementMatches(const LabelRequirement& r, const Json& labels) {
  std::optional<std::string_view> value;
  if (labels.is_object()) {
    auto it = labels.find(r.key);
    if (it != labels.end() && it->is_string()) value = it->get_ref<const std::string&>();
  }
  auto contains = [&] {
    return std::find(r.values.begin(), r.values.end(), *value) != r.values.end();
  };
  switch (r.op) {
    case Op::kIn:
    case Op::kEquals:
    case Op::kDoubleEquals:
      return value && contains();
    case Op::kNotIn:
    case Op::kNotEquals:
      return !value || !contains();
    case Op::kExists:
      return value.has_value();
    case Op::kDoesNotExist:
      return !value;
    case Op::kGreaterThan:
    case Op::kLessThan: {
      if (!value || r.values.size() != 1) return false;
      std::optional<int64_t> have = ParseGoInt64(*value);
      std::optional<int64_t> want = ParseGoInt64(r.values[0]);
      if (!have || !want) return false;
      return r.op == Op::kGreaterThan ? *have > *want : *have < *want;
    }
  }
  return false;
}

// ---- Field selectors (fields.ParseSelector) ----

// Splits on commas not preceded by an unescaped backslash.
std::vector<std::string_view> SplitTerms(std::string_view text) {
  std::vector<std::string_view> terms;
  if (text.empty()) return terms;
  size_t start = 0;
  bool in_slash = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_slash) {
      in_slash = false;
    } else if (c == '\\') {
      in_slash = true;
    } else if (c == ',') {
      terms.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  terms.push_back(text.substr(start));
  return terms;
}

// The first operator in the term, "!=" and "==" before "=".
bool SplitTerm(std::string_view term, std::string_view* lhs, std::string_view* op,
               std::string_view* rhs) {
  for (size_t i = 0; i < term.size(); ++i) {
    for (std::string_view candidate : {"!=", "==", "="}) {
      if (term.substr(i).starts_with(candidate)) {
        *lhs = term.substr(0, i);
        *op = candidate;
        *rhs = term.substr(i + candidate.size());
        return true;
      }
    }
  }
  return false;
}

core::Result<std::string> UnescapeValue(std::string_view s) {
  std::string out;
  bool in_slash = false;
  for (char c : s) {
    if (in_slash) {
      if (c != '\\' && c != ',' && c != '=') {
        return core::BadRequest(
            fmt::format("invalid field selector: invalid escape sequence: \\{}", c));
      }
      out += c;
      in_slash = false;
    } else if (c == '\\') {
      in_slash = true;
    } else if (c == ',' || c == '=') {
      return core::BadRequest(
          fmt::format("invalid field selector: unescaped character in value: '{}'", c));
    } else {
      out += c;
    }
  }
  if (in_slash) return core::BadRequest("invalid field selector: invalid escape sequence: \\");
  return out;
}

std::string EscapeValue(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == ',' || c == '=') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

core::Result<LabelSelector> LabelSelector::Parse(std::string_view text) {
  KLUTCH_ASSIGN_OR_RETURN(std::vector<Requirement> requirements, SelectorParser(text).Parse());
  SortByKey(requirements);
  LabelSelector selector;
  selector.requirements_ = std::move(requirements);
  return selector;
}

core::Result<LabelSelector> LabelSelector::FromJson(const Json& label_selector) {
  if (label_selector.is_null()) return Nothing();
  if (!label_selector.is_object()) {
    return core::BadRequest(fmt::format("invalid label selector: expected an object, not {}",
                                        label_selector.type_name()));
  }
  std::vector<Requirement> requirements;
  if (auto labels = label_selector.find("matchLabels");
      labels != label_selector.end() && !labels->is_null()) {
    if (!labels->is_object()) {
      return core::BadRequest("invalid label selector: matchLabels must be an object");
    }
    for (const auto& [key, value] : labels->items()) {
      if (!value.is_string()) {
        return core::BadRequest(
            fmt::format("invalid label selector: matchLabels[{}] must be a string", key));
      }
      KLUTCH_ASSIGN_OR_RETURN(Requirement r,
                              NewRequirement(key, Operator::kEquals, {value.get<std::string>()}));
      requirements.push_back(std::move(r));
    }
  }
  if (auto expressions = label_selector.find("matchExpressions");
      expressions != label_selector.end() && !expressions->is_null()) {
    if (!expressions->is_array()) {
      return core::BadRequest("invalid label selector: matchExpressions must be a list");
    }
    for (size_t i = 0; i < expressions->size(); ++i) {
      const Json& expr = (*expressions)[i];
      auto field = [&](const char* name) -> const Json* {
        if (!expr.is_object()) return nullptr;
        auto it = expr.find(name);
        return it == expr.end() || it->is_null() ? nullptr : &*it;
      };
      const Json* key = field("key");
      const Json* op = field("operator");
      const Json* values = field("values");
      if (!expr.is_object() || key == nullptr || !key->is_string() || op == nullptr ||
          !op->is_string() || (values != nullptr && !values->is_array())) {
        return core::BadRequest(fmt::format(
            "invalid label selector: matchExpressions[{}] must be an object with a string key, a "
            "string operator and a list of string values",
            i));
      }
      std::vector<std::string> value_list;
      if (values != nullptr) {
        for (const Json& v : *values) {
          if (!v.is_string()) {
            return core::BadRequest(fmt::format(
                "invalid label selector: matchExpressions[{}].values must be strings", i));
          }
          value_list.push_back(v.get<std::string>());
        }
      }
      const std::string& name = op->get_ref<const std::string&>();
      Operator parsed;
      if (name == "In") {
        parsed = Operator::kIn;
      } else if (name == "NotIn") {
        parsed = Operator::kNotIn;
      } else if (name == "Exists") {
        parsed = Operator::kExists;
      } else if (name == "DoesNotExist") {
        parsed = Operator::kDoesNotExist;
      } else {
        return core::BadRequest(
            fmt::format("{} is not a valid label selector operator", core::GoQuote(name)));
      }
      KLUTCH_ASSIGN_OR_RETURN(Requirement r,
                              NewRequirement(key->get<std::string>(), parsed, value_list));
      requirements.push_back(std::move(r));
    }
  }
  SortByKey(requirements);
  LabelSelector selector;
  selector.requirements_ = std::move(requirements);
  return selector;
}

LabelSelector LabelSelector::Nothing() {
  LabelSelector selector;
  selector.nothing_ = true;
  return selector;
}

bool LabelSelector::Matches(const Json& labels) const {
  if (nothing_) return false;
  return std::all_of(requirements_.begin(), requirements_.end(),
                     [&](const Requirement& r) { return RequirementMatches(r, labels); });
}

std::string LabelSelector::ToString() const {
  std::vector<std::string> parts;
  parts.reserve(requirements_.size());
  for (const Requirement& r : requirements_) parts.push_back(RequirementString(r));
  return core::Join(parts, ",");
}

core::Result<FieldSelector> FieldSelector::Parse(std::string_view text) {
  std::vector<std::string_view> terms = SplitTerms(text);
  FieldSelector selector;
  for (std::string_view term : terms) {
    if (term.empty()) continue;
    std::string_view lhs;
    std::string_view op;
    std::string_view rhs;
    if (!SplitTerm(term, &lhs, &op, &rhs)) {
      return core::BadRequest(
          fmt::format("invalid selector: '{}'; can't understand '{}'", text, term));
    }
    KLUTCH_ASSIGN_OR_RETURN(std::string value, UnescapeValue(rhs));
    selector.requirements_.push_back({std::string(lhs), op != "!=", std::move(value)});
  }
  // A canonical order that does not depend on spelling ("==" vs "=", escapes), so that
  // Parse(ToString()) gives the same requirements.
  std::sort(selector.requirements_.begin(), selector.requirements_.end(),
            [](const Requirement& a, const Requirement& b) {
              return std::tie(a.field, a.equal, a.value) < std::tie(b.field, b.equal, b.value);
            });
  return selector;
}

bool FieldSelector::Matches(
    const std::function<std::optional<std::string>(std::string_view field)>& get) const {
  for (const Requirement& r : requirements_) {
    std::string value = get(r.field).value_or("");
    if ((value == r.value) != r.equal) return false;
  }
  return true;
}

std::string FieldSelector::ToString() const {
  std::vector<std::string> parts;
  parts.reserve(requirements_.size());
  for (const Requirement& r : requirements_) {
    parts.push_back(r.field + (r.equal ? "=" : "!=") + EscapeValue(r.value));
  }
  return core::Join(parts, ",");
}

}  // namespace klutch::machinery
