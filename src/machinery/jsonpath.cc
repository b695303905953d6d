#include "machinery/jsonpath.h"

#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace klutch::machinery {

struct JsonPath::Step {
  enum class Kind { kField, kIndex, kWildcard, kRecursive, kFilter };
  Kind kind = Kind::kField;
  std::string field;  // kField, kRecursive (field after ..)
  int64_t index = 0;  // kIndex (negative counts from the end)
  // kFilter: @.<path> <op> <literal>, or existence when op is empty.
  std::vector<std::string> filter_path;
  std::string op;
  Json literal;
};

namespace {

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  core::Result<std::vector<JsonPath::Step>> Parse() {
    std::vector<JsonPath::Step> steps;
    Trim();
    if (Peek('{')) {
      if (s_.back() != '}') return Error("unclosed '{'");
      s_ = s_.substr(1, s_.size() - 2);
      Trim();
    }
    if (Peek('$')) ++pos_;
    while (pos_ < s_.size()) {
      if (s_.compare(pos_, 2, "..") == 0) {
        pos_ += 2;
        std::string name = Identifier();
        if (name.empty()) return Error("expected a field after '..'");
        JsonPath::Step st;
        st.kind = JsonPath::Step::Kind::kRecursive;
        st.field = std::move(name);
        steps.push_back(std::move(st));
      } else if (Peek('.')) {
        ++pos_;
        if (Peek('*')) {
          ++pos_;
          steps.push_back({JsonPath::Step::Kind::kWildcard});
          continue;
        }
        std::string name = Identifier();
        if (name.empty()) {
          if (pos_ >= s_.size()) break;  // "{.}" selects the root
          return Error("expected a field name");
        }
        JsonPath::Step st;
        st.field = std::move(name);
        steps.push_back(std::move(st));
      } else if (Peek('[')) {
        ++pos_;
        KLUTCH_ASSIGN_OR_RETURN(JsonPath::Step st, Bracket());
        steps.push_back(std::move(st));
      } else {
        return Error(fmt::format("unexpected '{}'", s_[pos_]));
      }
    }
    return steps;
  }

 private:
  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  void Trim() {
    while (!s_.empty() && std::isspace(static_cast<unsigned char>(s_.front()))) s_.remove_prefix(1);
    while (!s_.empty() && std::isspace(static_cast<unsigned char>(s_.back()))) s_.remove_suffix(1);
  }
  void Spaces() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  core::Status Error(std::string what) const {
    return core::BadRequest(fmt::format("invalid JSONPath \"{}\" at {}: {}", s_, pos_, what));
  }
  std::string Identifier() {
    size_t start = pos_;
    while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) ||
                                s_[pos_] == '_' || s_[pos_] == '-' || s_[pos_] == '/')) {
      ++pos_;
    }
    return std::string(s_.substr(start, pos_ - start));
  }
  core::Result<std::string> Quoted() {
    char q = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      out += s_[pos_++];
    }
    if (pos_ >= s_.size()) return Error("unterminated string");
    ++pos_;
    return out;
  }
  core::Result<JsonPath::Step> Bracket() {
    Spaces();
    JsonPath::Step st;
    if (Peek('\'') || Peek('"')) {
      KLUTCH_ASSIGN_OR_RETURN(st.field, Quoted());
    } else if (Peek('*')) {
      ++pos_;
      st.kind = JsonPath::Step::Kind::kWildcard;
    } else if (Peek('?')) {
      ++pos_;
      Spaces();
      if (!Peek('(')) return Error("expected '(' after '?'");
      ++pos_;
      Spaces();
      if (!Peek('@')) return Error("filters must start with '@'");
      ++pos_;
      st.kind = JsonPath::Step::Kind::kFilter;
      while (Peek('.')) {
        ++pos_;
        std::string name = Identifier();
        if (name.empty()) return Error("expected a field in filter");
        st.filter_path.push_back(std::move(name));
      }
      Spaces();
      for (const char* op : {"==", "!=", "<=", ">=", "<", ">"}) {
        size_t n = std::char_traits<char>::length(op);
        if (s_.compare(pos_, n, op) == 0) {
          st.op = op;
          pos_ += n;
          break;
        }
      }
      if (!st.op.empty()) {
        Spaces();
        if (Peek('\'') || Peek('"')) {
          KLUTCH_ASSIGN_OR_RETURN(std::string lit, Quoted());
          st.literal = lit;
        } else {
          size_t start = pos_;
          while (pos_ < s_.size() && s_[pos_] != ')' && s_[pos_] != ' ') ++pos_;
          std::string raw(s_.substr(start, pos_ - start));
          auto parsed = ParseJson(raw);
          if (!parsed.ok()) return Error("bad literal in filter");
          st.literal = *parsed;
        }
        Spaces();
      }
      if (!Peek(')')) return Error("expected ')'");
      ++pos_;
    } else {
      size_t start = pos_;
      if (Peek('-')) ++pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      auto index = core::ParseInt64(s_.substr(start, pos_ - start));
      if (!index) return Error("expected an index, '*', a filter or a quoted name");
      st.kind = JsonPath::Step::Kind::kIndex;
      st.index = *index;
    }
    Spaces();
    if (!Peek(']')) return Error("expected ']'");
    ++pos_;
    return st;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

bool Compare(const Json& v, const std::string& op, const Json& lit) {
  if (op == "==") return v == lit;
  if (op == "!=") return v != lit;
  if (v.is_number() && lit.is_number()) {
    double a = v.get<double>(), b = lit.get<double>();
    if (op == "<") return a < b;
    if (op == ">") return a > b;
    if (op == "<=") return a <= b;
    if (op == ">=") return a >= b;
  }
  return false;
}

void Recurse(const Json* node, const std::string& field, std::vector<const Json*>& out) {
  if (node->is_object()) {
    auto it = node->find(field);
    if (it != node->end()) out.push_back(&*it);
    for (const auto& [k, v] : node->items()) Recurse(&v, field, out);
  } else if (node->is_array()) {
    for (const auto& v : *node) Recurse(&v, field, out);
  }
}

}  // namespace

core::Result<JsonPath> JsonPath::Compile(std::string_view expression) {
  Parser p(expression);
  KLUTCH_ASSIGN_OR_RETURN(auto steps, p.Parse());
  JsonPath path;
  path.steps_ = std::make_shared<const std::vector<Step>>(std::move(steps));
  return path;
}

std::vector<const Json*> JsonPath::Evaluate(const Json& root) const {
  std::vector<const Json*> cur{&root};
  for (const Step& st : *steps_) {
    std::vector<const Json*> next;
    for (const Json* node : cur) {
      switch (st.kind) {
        case Step::Kind::kField:
          if (node->is_object()) {
            auto it = node->find(st.field);
            if (it != node->end()) next.push_back(&*it);
          }
          break;
        case Step::Kind::kIndex:
          if (node->is_array()) {
            int64_t n = static_cast<int64_t>(node->size());
            int64_t i = st.index < 0 ? n + st.index : st.index;
            if (i >= 0 && i < n) next.push_back(&(*node)[static_cast<size_t>(i)]);
          }
          break;
        case Step::Kind::kWildcard:
          if (node->is_array() || node->is_object()) {
            for (const auto& v : *node) next.push_back(&v);
          }
          break;
        case Step::Kind::kRecursive:
          Recurse(node, st.field, next);
          break;
        case Step::Kind::kFilter:
          if (node->is_array()) {
            for (const auto& item : *node) {
              const Json* v = &item;
              for (const auto& f : st.filter_path) {
                if (!v->is_object() || !v->contains(f)) {
                  v = nullptr;
                  break;
                }
                v = &(*v)[f];
              }
              if (v == nullptr) continue;
              if (st.op.empty() || Compare(*v, st.op, st.literal)) next.push_back(&item);
            }
          }
          break;
      }
    }
    cur = std::move(next);
  }
  return cur;
}

}  // namespace klutch::machinery
