// CEL parser: a hand-written lexer and recursive-descent parser for the grammar of the CEL
// spec (langdef.md), with the standard macros expanded into comprehensions while parsing.

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "cel/ast.h"
#include "cel/cel.h"
#include "core/strings.h"

namespace klutch::cel {
namespace {

enum class Tok {
  kEof,
  kIdent,
  kQuotedIdent,  // `field.name` (only valid as a selected field)
  kInt,
  kUint,
  kDouble,
  kString,
  kBytes,
  kTrue,
  kFalse,
  kNull,
  kIn,
  kLParen,
  kRParen,
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kDot,
  kComma,
  kColon,
  kQuestion,
  kNot,
  kMinus,
  kPlus,
  kStar,
  kSlash,
  kPercent,
  kLess,
  kLessEq,
  kGreater,
  kGreaterEq,
  kEq,
  kNotEq,
  kAnd,
  kOr,
  kError,
};

struct Token {
  Tok kind = Tok::kEof;
  int32_t offset = 0;
  std::string text;  // identifier name, decoded string/bytes, or number text
  std::string error;
};

bool IsReserved(std::string_view s) {
  static constexpr std::string_view kReserved[] = {
      "as",  "break", "const",   "continue",  "else",   "for", "function", "if",   "import",
      "let", "loop",  "package", "namespace", "return", "var", "void",     "while"};
  for (auto r : kReserved) {
    if (r == s) return true;
  }
  return false;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  Token Next() {
    SkipSpace();
    Token t;
    t.offset = static_cast<int32_t>(pos_);
    if (pos_ >= src_.size()) return t;
    char c = src_[pos_];
    auto peek = [&](size_t k) { return pos_ + k < src_.size() ? src_[pos_ + k] : '\0'; };
    // String prefixes: r, R, b, B and their combinations.
    if (c == 'r' || c == 'R' || c == 'b' || c == 'B') {
      bool raw = false, bytes = false;
      size_t k = 0;
      while (k < 2) {
        char p = peek(k);
        if ((p == 'r' || p == 'R') && !raw) {
          raw = true;
        } else if ((p == 'b' || p == 'B') && !bytes) {
          bytes = true;
        } else {
          break;
        }
        ++k;
      }
      if (k > 0 && (peek(k) == '"' || peek(k) == '\'')) {
        pos_ += k;
        return LexString(t, raw, bytes);
      }
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = pos_;
      while (pos_ < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
        ++pos_;
      }
      t.text = std::string(src_.substr(start, pos_ - start));
      if (t.text == "true") {
        t.kind = Tok::kTrue;
      } else if (t.text == "false") {
        t.kind = Tok::kFalse;
      } else if (t.text == "null") {
        t.kind = Tok::kNull;
      } else if (t.text == "in") {
        t.kind = Tok::kIn;
      } else {
        t.kind = Tok::kIdent;
      }
      return t;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '.' && std::isdigit(static_cast<unsigned char>(peek(1))))) {
      return LexNumber(t);
    }
    if (c == '"' || c == '\'') return LexString(t, false, false);
    if (c == '`') {
      size_t end = src_.find('`', pos_ + 1);
      if (end == std::string_view::npos || end == pos_ + 1) {
        t.kind = Tok::kError;
        t.error = "token recognition error at: '`'";
        return t;
      }
      t.kind = Tok::kQuotedIdent;
      t.text = std::string(src_.substr(pos_ + 1, end - pos_ - 1));
      for (char ch : t.text) {
        if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '.' && ch != '-' &&
            ch != '/' && ch != ' ') {
          t.kind = Tok::kError;
          t.error = "invalid quoted field name";
          return t;
        }
      }
      pos_ = end + 1;
      return t;
    }
    ++pos_;
    switch (c) {
      case '(':
        t.kind = Tok::kLParen;
        return t;
      case ')':
        t.kind = Tok::kRParen;
        return t;
      case '[':
        t.kind = Tok::kLBracket;
        return t;
      case ']':
        t.kind = Tok::kRBracket;
        return t;
      case '{':
        t.kind = Tok::kLBrace;
        return t;
      case '}':
        t.kind = Tok::kRBrace;
        return t;
      case '.':
        t.kind = Tok::kDot;
        return t;
      case ',':
        t.kind = Tok::kComma;
        return t;
      case ':':
        t.kind = Tok::kColon;
        return t;
      case '?':
        t.kind = Tok::kQuestion;
        return t;
      case '+':
        t.kind = Tok::kPlus;
        return t;
      case '-':
        t.kind = Tok::kMinus;
        return t;
      case '*':
        t.kind = Tok::kStar;
        return t;
      case '/':
        t.kind = Tok::kSlash;
        return t;
      case '%':
        t.kind = Tok::kPercent;
        return t;
      case '!':
        if (peek(0) == '=') {
          ++pos_;
          t.kind = Tok::kNotEq;
        } else {
          t.kind = Tok::kNot;
        }
        return t;
      case '<':
        if (peek(0) == '=') {
          ++pos_;
          t.kind = Tok::kLessEq;
        } else {
          t.kind = Tok::kLess;
        }
        return t;
      case '>':
        if (peek(0) == '=') {
          ++pos_;
          t.kind = Tok::kGreaterEq;
        } else {
          t.kind = Tok::kGreater;
        }
        return t;
      case '=':
        if (peek(0) == '=') {
          ++pos_;
          t.kind = Tok::kEq;
          return t;
        }
        break;
      case '&':
        if (peek(0) == '&') {
          ++pos_;
          t.kind = Tok::kAnd;
          return t;
        }
        break;
      case '|':
        if (peek(0) == '|') {
          ++pos_;
          t.kind = Tok::kOr;
          return t;
        }
        break;
      default:
        break;
    }
    t.kind = Tok::kError;
    t.error = std::string("token recognition error at: '") + c + "'";
    return t;
  }

 private:
  void SkipSpace() {
    while (pos_ < src_.size()) {
      char c = src_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f') {
        ++pos_;
      } else if (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/') {
        while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  Token LexNumber(Token& t) {
    size_t start = pos_;
    auto at = [&](size_t p) { return p < src_.size() ? src_[p] : '\0'; };
    if (at(pos_) == '0' && (at(pos_ + 1) == 'x' || at(pos_ + 1) == 'X')) {
      pos_ += 2;
      size_t digits = pos_;
      while (HexDigit(at(pos_)) >= 0) ++pos_;
      if (pos_ == digits) {
        t.kind = Tok::kError;
        t.error = "invalid hex literal";
        return t;
      }
      t.text = std::string(src_.substr(start, pos_ - start));
      if (at(pos_) == 'u' || at(pos_) == 'U') {
        ++pos_;
        t.kind = Tok::kUint;
      } else {
        t.kind = Tok::kInt;
      }
      return t;
    }
    bool is_double = false;
    while (std::isdigit(static_cast<unsigned char>(at(pos_)))) ++pos_;
    if (at(pos_) == '.' && std::isdigit(static_cast<unsigned char>(at(pos_ + 1)))) {
      is_double = true;
      ++pos_;
      while (std::isdigit(static_cast<unsigned char>(at(pos_)))) ++pos_;
    }
    if (at(pos_) == 'e' || at(pos_) == 'E') {
      size_t save = pos_;
      ++pos_;
      if (at(pos_) == '+' || at(pos_) == '-') ++pos_;
      if (std::isdigit(static_cast<unsigned char>(at(pos_)))) {
        is_double = true;
        while (std::isdigit(static_cast<unsigned char>(at(pos_)))) ++pos_;
      } else {
        pos_ = save;
      }
    }
    t.text = std::string(src_.substr(start, pos_ - start));
    if (is_double) {
      t.kind = Tok::kDouble;
    } else if (at(pos_) == 'u' || at(pos_) == 'U') {
      ++pos_;
      t.kind = Tok::kUint;
    } else {
      t.kind = Tok::kInt;
    }
    return t;
  }

  Token LexString(Token& t, bool raw, bool bytes) {
    char q = src_[pos_];
    bool triple = pos_ + 2 < src_.size() && src_[pos_ + 1] == q && src_[pos_ + 2] == q;
    pos_ += triple ? 3 : 1;
    t.kind = bytes ? Tok::kBytes : Tok::kString;
    std::string out;
    auto fail = [&](std::string msg) {
      t.kind = Tok::kError;
      t.error = std::move(msg);
      return t;
    };
    while (true) {
      if (pos_ >= src_.size()) return fail("unterminated string literal");
      char c = src_[pos_];
      if (triple) {
        if (c == q && pos_ + 2 < src_.size() && src_[pos_ + 1] == q && src_[pos_ + 2] == q) {
          pos_ += 3;
          break;
        }
      } else {
        if (c == q) {
          ++pos_;
          break;
        }
        if (c == '\n' || c == '\r') return fail("unterminated string literal");
      }
      if (c != '\\' || raw) {
        if (raw && c == '\\' && pos_ + 1 < src_.size() &&
            (src_[pos_ + 1] == q || src_[pos_ + 1] == '\\')) {
          // A raw string keeps the backslash, but an escaped quote does not end it.
          out += c;
          out += src_[pos_ + 1];
          pos_ += 2;
          continue;
        }
        out += c;
        ++pos_;
        continue;
      }
      // Escape sequence.
      ++pos_;
      if (pos_ >= src_.size()) return fail("unterminated string literal");
      char e = src_[pos_++];
      if (auto simple = core::SimpleEscape(e)) {
        out += *simple;
        continue;
      }
      switch (e) {
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case '`':
          out += '`';
          break;
        case '?':
          out += '?';
          break;
        case 'x':
        case 'X': {
          int h1 = pos_ < src_.size() ? HexDigit(src_[pos_]) : -1;
          int h2 = pos_ + 1 < src_.size() ? HexDigit(src_[pos_ + 1]) : -1;
          if (h1 < 0 || h2 < 0) return fail("invalid escape sequence");
          pos_ += 2;
          uint32_t v = static_cast<uint32_t>(h1 * 16 + h2);
          if (bytes) {
            out += static_cast<char>(v);
          } else {
            core::AppendUtf8(out, v);
          }
          break;
        }
        case 'u':
        case 'U': {
          int n = e == 'u' ? 4 : 8;
          uint32_t v = 0;
          for (int i = 0; i < n; ++i) {
            int h = pos_ < src_.size() ? HexDigit(src_[pos_]) : -1;
            if (h < 0) return fail("invalid escape sequence");
            v = v * 16 + static_cast<uint32_t>(h);
            ++pos_;
          }
          if (bytes) return fail("unicode escapes are not allowed in bytes literals");
          if ((v >= 0xD800 && v < 0xE000) || v > 0x10FFFF) {
            return fail("invalid unicode code point");
          }
          core::AppendUtf8(out, v);
          break;
        }
        default:
          if (e >= '0' && e <= '3') {
            if (pos_ + 1 >= src_.size() || src_[pos_] < '0' || src_[pos_] > '7' ||
                src_[pos_ + 1] < '0' || src_[pos_ + 1] > '7') {
              return fail("invalid escape sequence");
            }
            uint32_t v = static_cast<uint32_t>((e - '0') * 64 + (src_[pos_] - '0') * 8 +
                                               (src_[pos_ + 1] - '0'));
            pos_ += 2;
            if (bytes) {
              out += static_cast<char>(v);
            } else {
              core::AppendUtf8(out, v);
            }
            break;
          }
          return fail(std::string("invalid escape sequence: \\") + e);
      }
    }
    t.text = std::move(out);
    return t;
  }

  std::string_view src_;
  size_t pos_ = 0;
};

std::unique_ptr<Expr> MakeExpr(Expr::Type type, int32_t offset) {
  auto e = std::make_unique<Expr>();
  e->type = type;
  e->offset = offset;
  return e;
}

std::unique_ptr<Expr> MakeConst(Value v, int32_t offset) {
  auto e = MakeExpr(Expr::Type::kConst, offset);
  e->constant = std::move(v);
  return e;
}

std::unique_ptr<Expr> MakeIdent(std::string name, int32_t offset) {
  auto e = MakeExpr(Expr::Type::kIdent, offset);
  e->name = std::move(name);
  return e;
}

std::unique_ptr<Expr> MakeCall(std::string fn, int32_t offset,
                               std::vector<std::unique_ptr<Expr>> args, bool member = false) {
  auto e = MakeExpr(Expr::Type::kCall, offset);
  e->name = std::move(fn);
  e->args = std::move(args);
  e->member = member;
  return e;
}

template <typename... A>
std::unique_ptr<Expr> Call(std::string fn, int32_t offset, A... args) {
  std::vector<std::unique_ptr<Expr>> v;
  (v.push_back(std::move(args)), ...);
  return MakeCall(std::move(fn), offset, std::move(v));
}

std::unique_ptr<Expr> MakeList1(std::unique_ptr<Expr> item, int32_t offset) {
  auto e = MakeExpr(Expr::Type::kList, offset);
  e->args.push_back(std::move(item));
  return e;
}

class Parser {
 public:
  Parser(std::string_view src, int max_depth) : src_(src), lexer_(src), max_depth_(max_depth) {
    Advance();
  }

  std::unique_ptr<Expr> ParseAll() {
    auto e = ParseExprTop();
    if (!failed_ && tok_.kind != Tok::kEof) {
      ErrorAt(tok_.offset, "Syntax error: extraneous input '" + TokenText() + "'");
    }
    if (failed_) return nullptr;
    return e;
  }

  const std::string& error() const { return error_; }

 private:
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > p->max_depth_ && !p->failed_) {
        p->ErrorAt(p->tok_.offset,
                   "expression recursion limit exceeded: " + std::to_string(p->max_depth_));
      }
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  // Left-associative chains (a + b + c, a.b.c, !!x) deepen the tree by one level per link
  // without recursing in the parser: each link is counted here until the chain ends.
  struct Spine {
    explicit Spine(Parser* p) : p(p) {}
    void Grow() {
      ++added;
      if (++p->depth_ > p->max_depth_ && !p->failed_) {
        p->ErrorAt(p->tok_.offset,
                   "expression recursion limit exceeded: " + std::to_string(p->max_depth_));
      }
    }
    ~Spine() { p->depth_ -= added; }
    Parser* p;
    int added = 0;
  };

  // `&&` and `||` chains become balanced trees (as cel-go builds them): the result is the
  // same, since both are associative, and long chains stay shallow.
  std::unique_ptr<Expr> Balance(const char* fn, std::vector<std::unique_ptr<Expr>>& terms,
                                std::vector<int32_t>& offs, size_t lo, size_t hi) {
    if (lo == hi) return std::move(terms[lo]);
    size_t mid = (lo + hi) / 2;
    auto left = Balance(fn, terms, offs, lo, mid);
    auto right = Balance(fn, terms, offs, mid + 1, hi);
    return Call(fn, offs[mid], std::move(left), std::move(right));
  }

  void Advance() {
    tok_ = lexer_.Next();
    if (tok_.kind == Tok::kError && !failed_) ErrorAt(tok_.offset, "Syntax error: " + tok_.error);
  }

  std::string TokenText() const {
    if (tok_.kind == Tok::kEof) return "<EOF>";
    // The token's source text: one character, or a whole identifier or number.
    size_t end = std::min(src_.size(), static_cast<size_t>(tok_.offset) + 1);
    while (
        end < src_.size() &&
        (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_') &&
        (std::isalnum(static_cast<unsigned char>(src_[tok_.offset])) || src_[tok_.offset] == '_')) {
      ++end;
    }
    return std::string(src_.substr(tok_.offset, end - tok_.offset));
  }

  void ErrorAt(int32_t offset, const std::string& msg) {
    if (failed_) return;
    failed_ = true;
    error_ = FormatError(src_, offset, msg);
  }

  bool Expect(Tok kind, const char* what) {
    if (tok_.kind != kind) {
      ErrorAt(tok_.offset,
              "Syntax error: mismatched input '" + TokenText() + "' expecting " + what);
      return false;
    }
    Advance();
    return true;
  }

  std::unique_ptr<Expr> Fail() { return MakeConst(Value(), tok_.offset); }

  // Expr = ConditionalOr ["?" ConditionalOr ":" Expr]
  std::unique_ptr<Expr> ParseExprTop() {
    DepthGuard g(this);
    if (failed_) return Fail();
    auto cond = ParseOr();
    if (tok_.kind != Tok::kQuestion || failed_) return cond;
    int32_t off = tok_.offset;
    Advance();
    auto a = ParseOr();
    if (!Expect(Tok::kColon, "':'")) return Fail();
    auto b = ParseExprTop();
    return Call("_?_:_", off, std::move(cond), std::move(a), std::move(b));
  }

  std::unique_ptr<Expr> ParseOr() { return ParseLogical(Tok::kOr); }
  std::unique_ptr<Expr> ParseAnd() { return ParseLogical(Tok::kAnd); }

  std::unique_ptr<Expr> ParseLogical(Tok op) {
    std::vector<std::unique_ptr<Expr>> terms;
    std::vector<int32_t> offs;
    terms.push_back(op == Tok::kOr ? ParseAnd() : ParseRelation());
    while (tok_.kind == op && !failed_) {
      offs.push_back(tok_.offset);
      Advance();
      terms.push_back(op == Tok::kOr ? ParseAnd() : ParseRelation());
    }
    if (terms.size() == 1) return std::move(terms[0]);
    return Balance(op == Tok::kOr ? "_||_" : "_&&_", terms, offs, 0, terms.size() - 1);
  }

  std::unique_ptr<Expr> ParseRelation() {
    auto left = ParseAddition();
    Spine spine(this);
    while (!failed_) {
      const char* fn = nullptr;
      switch (tok_.kind) {
        case Tok::kLess:
          fn = "_<_";
          break;
        case Tok::kLessEq:
          fn = "_<=_";
          break;
        case Tok::kGreater:
          fn = "_>_";
          break;
        case Tok::kGreaterEq:
          fn = "_>=_";
          break;
        case Tok::kEq:
          fn = "_==_";
          break;
        case Tok::kNotEq:
          fn = "_!=_";
          break;
        case Tok::kIn:
          fn = "@in";
          break;
        default:
          break;
      }
      if (fn == nullptr) break;
      int32_t off = tok_.offset;
      Advance();
      spine.Grow();
      auto right = ParseAddition();
      left = Call(fn, off, std::move(left), std::move(right));
    }
    return left;
  }

  std::unique_ptr<Expr> ParseAddition() {
    auto left = ParseMultiplication();
    Spine spine(this);
    while (!failed_ && (tok_.kind == Tok::kPlus || tok_.kind == Tok::kMinus)) {
      const char* fn = tok_.kind == Tok::kPlus ? "_+_" : "_-_";
      int32_t off = tok_.offset;
      Advance();
      spine.Grow();
      auto right = ParseMultiplication();
      left = Call(fn, off, std::move(left), std::move(right));
    }
    return left;
  }

  std::unique_ptr<Expr> ParseMultiplication() {
    auto left = ParseUnary();
    Spine spine(this);
    while (!failed_ &&
           (tok_.kind == Tok::kStar || tok_.kind == Tok::kSlash || tok_.kind == Tok::kPercent)) {
      const char* fn = tok_.kind == Tok::kStar ? "_*_" : tok_.kind == Tok::kSlash ? "_/_" : "_%_";
      int32_t off = tok_.offset;
      Advance();
      spine.Grow();
      auto right = ParseUnary();
      left = Call(fn, off, std::move(left), std::move(right));
    }
    return left;
  }

  std::unique_ptr<Expr> ParseUnary() {
    DepthGuard g(this);
    if (failed_) return Fail();
    if (tok_.kind == Tok::kNot) {
      std::vector<int32_t> offs;
      while (tok_.kind == Tok::kNot) {
        offs.push_back(tok_.offset);
        Advance();
      }
      auto e = ParseMember();
      // cel-go keeps only the parity of a run of '!' (and of '-').
      if (offs.size() % 2 == 1) e = Call("!_", offs.front(), std::move(e));
      return e;
    }
    if (tok_.kind == Tok::kMinus) {
      std::vector<int32_t> offs;
      while (tok_.kind == Tok::kMinus) {
        offs.push_back(tok_.offset);
        Advance();
      }
      std::unique_ptr<Expr> e;
      if (tok_.kind == Tok::kInt || tok_.kind == Tok::kDouble) {
        // The last '-' is the literal's sign (so the most negative int64 can be written).
        int32_t off = offs.back();
        offs.pop_back();
        e = ParseLiteral(true, off);
        e = ParseMemberSuffix(std::move(e));
      } else {
        e = ParseMember();
      }
      if (offs.size() % 2 == 1) e = Call("-_", offs.front(), std::move(e));
      return e;
    }
    return ParseMember();
  }

  std::unique_ptr<Expr> ParseLiteral(bool negative, int32_t off) {
    Token t = tok_;
    Advance();
    switch (t.kind) {
      case Tok::kInt: {
        std::string text = (negative ? "-" : "") + t.text;
        errno = 0;
        bool hex = t.text.size() > 1 && (t.text[1] == 'x' || t.text[1] == 'X');
        char* end = nullptr;
        long long v = 0;
        if (hex) {
          unsigned long long u = std::strtoull(t.text.c_str() + 2, &end, 16);
          if (errno != 0 || u > (negative ? 9223372036854775808ull : 9223372036854775807ull)) {
            ErrorAt(off, "invalid int literal");
            return Fail();
          }
          v = negative ? static_cast<long long>(0 - u) : static_cast<long long>(u);
        } else {
          v = std::strtoll(text.c_str(), &end, 10);
          if (errno != 0) {
            ErrorAt(off, "invalid int literal");
            return Fail();
          }
        }
        return MakeConst(Value::Int(v), off);
      }
      case Tok::kUint: {
        errno = 0;
        bool hex = t.text.size() > 1 && (t.text[1] == 'x' || t.text[1] == 'X');
        unsigned long long v =
            std::strtoull(hex ? t.text.c_str() + 2 : t.text.c_str(), nullptr, hex ? 16 : 10);
        if (errno != 0) {
          ErrorAt(off, "invalid uint literal");
          return Fail();
        }
        return MakeConst(Value::Uint(v), off);
      }
      case Tok::kDouble: {
        std::string text = (negative ? "-" : "") + t.text;
        double v = std::strtod(text.c_str(), nullptr);
        return MakeConst(Value::Double(v), off);
      }
      case Tok::kString:
        return MakeConst(Value::String(std::move(t.text)), off);
      case Tok::kBytes:
        return MakeConst(Value::BytesOf(std::move(t.text)), off);
      case Tok::kTrue:
        return MakeConst(Value::Bool(true), off);
      case Tok::kFalse:
        return MakeConst(Value::Bool(false), off);
      case Tok::kNull:
        return MakeConst(Value::Null(), off);
      default:
        ErrorAt(t.offset, "Syntax error: unexpected token");
        return Fail();
    }
  }

  std::unique_ptr<Expr> ParseMember() {
    auto e = ParsePrimary();
    return ParseMemberSuffix(std::move(e));
  }

  // Whether `e` is a (possibly dotted) name: an identifier or a select chain of them.
  static bool QualifiedName(const Expr& e, std::string& out) {
    if (e.type == Expr::Type::kIdent) {
      out = e.name;
      return true;
    }
    if (e.type == Expr::Type::kSelect && !e.test_only && !e.optional && !e.quoted &&
        QualifiedName(*e.args[0], out)) {
      out += "." + e.name;
      return true;
    }
    return false;
  }

  std::unique_ptr<Expr> ParseMemberSuffix(std::unique_ptr<Expr> e) {
    Spine spine(this);
    while (!failed_) {
      if (tok_.kind == Tok::kDot || tok_.kind == Tok::kLBracket || tok_.kind == Tok::kLBrace) {
        spine.Grow();
        if (failed_) break;
      }
      if (tok_.kind == Tok::kDot) {
        int32_t off = tok_.offset;
        Advance();
        bool opt = false;
        if (tok_.kind == Tok::kQuestion) {
          opt = true;
          Advance();
        }
        if (tok_.kind != Tok::kIdent && tok_.kind != Tok::kQuotedIdent) {
          ErrorAt(tok_.offset,
                  "Syntax error: mismatched input '" + TokenText() + "' expecting IDENTIFIER");
          return Fail();
        }
        bool quoted = tok_.kind == Tok::kQuotedIdent;
        std::string name = tok_.text;
        int32_t name_off = tok_.offset;
        Advance();
        if (!opt && !quoted && tok_.kind == Tok::kLParen) {
          Advance();
          auto args = ParseArgs(Tok::kRParen);
          if (!Expect(Tok::kRParen, "')'")) return Fail();
          std::vector<std::unique_ptr<Expr>> all;
          all.push_back(std::move(e));
          for (auto& a : args) all.push_back(std::move(a));
          e = ExpandMember(std::move(name), name_off, std::move(all));
          continue;
        }
        auto sel = MakeExpr(Expr::Type::kSelect, off);
        sel->name = std::move(name);
        sel->optional = opt;
        sel->quoted = quoted;
        sel->args.push_back(std::move(e));
        e = std::move(sel);
        continue;
      }
      if (tok_.kind == Tok::kLBracket) {
        int32_t off = tok_.offset;
        Advance();
        bool opt = false;
        if (tok_.kind == Tok::kQuestion) {
          opt = true;
          Advance();
        }
        auto index = ParseExprTop();
        if (!Expect(Tok::kRBracket, "']'")) return Fail();
        e = Call(opt ? "_[?_]" : "_[_]", off, std::move(e), std::move(index));
        continue;
      }
      if (tok_.kind == Tok::kLBrace) {
        std::string type_name;
        if (!QualifiedName(*e, type_name)) break;
        int32_t off = tok_.offset;
        Advance();
        auto st = MakeExpr(Expr::Type::kStruct, e->offset);
        st->name = type_name;
        while (!failed_ && tok_.kind != Tok::kRBrace) {
          bool opt = false;
          if (tok_.kind == Tok::kQuestion) {
            opt = true;
            Advance();
          }
          if (tok_.kind != Tok::kIdent) {
            ErrorAt(tok_.offset,
                    "Syntax error: mismatched input '" + TokenText() + "' expecting IDENTIFIER");
            return Fail();
          }
          if (opt) st->optional_indices.push_back(static_cast<int>(st->field_names.size()));
          st->field_names.push_back(tok_.text);
          Advance();
          if (!Expect(Tok::kColon, "':'")) return Fail();
          st->args.push_back(ParseExprTop());
          if (tok_.kind != Tok::kComma) break;
          Advance();
        }
        (void)off;
        if (!Expect(Tok::kRBrace, "'}'")) return Fail();
        e = std::move(st);
        continue;
      }
      break;
    }
    return e;
  }

  std::vector<std::unique_ptr<Expr>> ParseArgs(Tok close) {
    std::vector<std::unique_ptr<Expr>> args;
    if (tok_.kind == close) return args;
    while (!failed_) {
      args.push_back(ParseExprTop());
      if (tok_.kind != Tok::kComma) break;
      Advance();
    }
    return args;
  }

  std::unique_ptr<Expr> ParsePrimary() {
    DepthGuard g(this);
    if (failed_) return Fail();
    int32_t off = tok_.offset;
    switch (tok_.kind) {
      case Tok::kDot:
      case Tok::kIdent: {
        bool leading_dot = tok_.kind == Tok::kDot;
        if (leading_dot) {
          Advance();
          if (tok_.kind != Tok::kIdent) {
            ErrorAt(tok_.offset,
                    "Syntax error: mismatched input '" + TokenText() + "' expecting IDENTIFIER");
            return Fail();
          }
        }
        std::string name = tok_.text;
        if (IsReserved(name)) {
          ErrorAt(tok_.offset, "reserved identifier: " + name);
          return Fail();
        }
        Advance();
        if (tok_.kind == Tok::kLParen) {
          int32_t paren = tok_.offset;
          Advance();
          auto args = ParseArgs(Tok::kRParen);
          if (!Expect(Tok::kRParen, "')'")) return Fail();
          return ExpandGlobal(leading_dot ? "." + name : name, paren, std::move(args));
        }
        return MakeIdent(leading_dot ? "." + name : name, off);
      }
      case Tok::kLParen: {
        Advance();
        auto e = ParseExprTop();
        if (!Expect(Tok::kRParen, "')'")) return Fail();
        return e;
      }
      case Tok::kLBracket: {
        Advance();
        auto list = MakeExpr(Expr::Type::kList, off);
        while (!failed_ && tok_.kind != Tok::kRBracket) {
          if (tok_.kind == Tok::kQuestion) {
            Advance();
            list->optional_indices.push_back(static_cast<int>(list->args.size()));
          }
          list->args.push_back(ParseExprTop());
          if (tok_.kind != Tok::kComma) break;
          Advance();
        }
        if (!Expect(Tok::kRBracket, "']'")) return Fail();
        return list;
      }
      case Tok::kLBrace: {
        Advance();
        auto map = MakeExpr(Expr::Type::kMap, off);
        while (!failed_ && tok_.kind != Tok::kRBrace) {
          if (tok_.kind == Tok::kQuestion) {
            Advance();
            map->optional_indices.push_back(static_cast<int>(map->args.size() / 2));
          }
          map->args.push_back(ParseExprTop());
          if (!Expect(Tok::kColon, "':'")) return Fail();
          map->args.push_back(ParseExprTop());
          if (tok_.kind != Tok::kComma) break;
          Advance();
        }
        if (!Expect(Tok::kRBrace, "'}'")) return Fail();
        return map;
      }
      case Tok::kInt:
      case Tok::kUint:
      case Tok::kDouble:
      case Tok::kString:
      case Tok::kBytes:
      case Tok::kTrue:
      case Tok::kFalse:
      case Tok::kNull:
        return ParseLiteral(false, off);
      case Tok::kEof:
        ErrorAt(off, "Syntax error: mismatched input '<EOF>' expecting expression");
        return Fail();
      default:
        ErrorAt(off, "Syntax error: mismatched input '" + TokenText() + "'");
        return Fail();
    }
  }

  // ------------------------------------------------------------------ macros

  std::unique_ptr<Expr> ExpandGlobal(std::string name, int32_t off,
                                     std::vector<std::unique_ptr<Expr>> args) {
    if (name == "has" && args.size() == 1) {
      auto& a = args[0];
      if (a->type != Expr::Type::kSelect || a->optional) {
        ErrorAt(a->offset, "invalid argument to has() macro");
        return Fail();
      }
      a->test_only = true;
      return std::move(a);
    }
    return MakeCall(std::move(name), off, std::move(args));
  }

  bool IterVar(const Expr& e, std::string& out) {
    if (e.type != Expr::Type::kIdent || e.name.empty() || e.name[0] == '.') {
      ErrorAt(e.offset, "argument must be a simple name");
      return false;
    }
    out = e.name;
    return true;
  }

  std::unique_ptr<Expr> Comprehension(int32_t off, std::unique_ptr<Expr> range,
                                      std::string iter_var, std::string iter_var2,
                                      std::unique_ptr<Expr> init, std::unique_ptr<Expr> cond,
                                      std::unique_ptr<Expr> step, std::unique_ptr<Expr> result,
                                      std::string accu = kAccuVar) {
    auto c = MakeExpr(Expr::Type::kComprehension, off);
    c->iter_range = std::move(range);
    c->iter_var = std::move(iter_var);
    c->iter_var2 = std::move(iter_var2);
    c->accu_var = std::move(accu);
    c->accu_init = std::move(init);
    c->loop_condition = std::move(cond);
    c->loop_step = std::move(step);
    c->result = std::move(result);
    return c;
  }

  std::unique_ptr<Expr> Accu(int32_t off) { return MakeIdent(kAccuVar, off); }

  std::unique_ptr<Expr> ExpandMember(std::string name, int32_t off,
                                     std::vector<std::unique_ptr<Expr>> args) {
    // args[0] is the target.
    size_t n = args.size() - 1;
    auto is = [&](const char* m, size_t arity) { return name == m && n == arity; };
    if (is("all", 2) || is("exists", 2) || is("exists_one", 2) || is("existsOne", 2) ||
        is("all", 3) || is("exists", 3) || is("exists_one", 3) || is("existsOne", 3)) {
      bool two = n == 3;
      std::string v1, v2;
      if (!IterVar(*args[1], v1)) return Fail();
      if (two && !IterVar(*args[2], v2)) return Fail();
      if (two && v1 == v2) {
        ErrorAt(args[2]->offset, "duplicate variable name: " + v1);
        return Fail();
      }
      if (v1 == kAccuVar || v2 == kAccuVar) {
        ErrorAt(off, "iteration variable overwrites accumulator variable");
        return Fail();
      }
      auto pred = std::move(args[two ? 3 : 2]);
      auto range = std::move(args[0]);
      if (name == "all") {
        return Comprehension(off, std::move(range), v1, v2, MakeConst(Value::Bool(true), off),
                             Call("@not_strictly_false", off, Accu(off)),
                             Call("_&&_", off, Accu(off), std::move(pred)), Accu(off));
      }
      if (name == "exists") {
        return Comprehension(off, std::move(range), v1, v2, MakeConst(Value::Bool(false), off),
                             Call("@not_strictly_false", off, Call("!_", off, Accu(off))),
                             Call("_||_", off, Accu(off), std::move(pred)), Accu(off));
      }
      return Comprehension(
          off, std::move(range), v1, v2, MakeConst(Value::Int(0), off),
          MakeConst(Value::Bool(true), off),
          Call("_?_:_", off, std::move(pred),
               Call("_+_", off, Accu(off), MakeConst(Value::Int(1), off)), Accu(off)),
          Call("_==_", off, Accu(off), MakeConst(Value::Int(1), off)));
    }
    if (is("map", 2) || is("map", 3) || is("filter", 2)) {
      std::string v;
      if (!IterVar(*args[1], v)) return Fail();
      if (v == kAccuVar) {
        ErrorAt(off, "iteration variable overwrites accumulator variable");
        return Fail();
      }
      auto range = std::move(args[0]);
      std::unique_ptr<Expr> step;
      if (name == "filter") {
        auto pred = std::move(args[2]);
        step = Call("_?_:_", off, std::move(pred),
                    Call("_+_", off, Accu(off), MakeList1(MakeIdent(v, off), off)), Accu(off));
      } else if (n == 2) {
        step = Call("_+_", off, Accu(off), MakeList1(std::move(args[2]), off));
      } else {
        step = Call("_?_:_", off, std::move(args[2]),
                    Call("_+_", off, Accu(off), MakeList1(std::move(args[3]), off)), Accu(off));
      }
      return Comprehension(off, std::move(range), v, "", MakeExpr(Expr::Type::kList, off),
                           MakeConst(Value::Bool(true), off), std::move(step), Accu(off));
    }
    if (is("transformList", 3) || is("transformList", 4) || is("transformMap", 3) ||
        is("transformMap", 4)) {
      std::string v1, v2;
      if (!IterVar(*args[1], v1) || !IterVar(*args[2], v2)) return Fail();
      if (v1 == v2) {
        ErrorAt(args[2]->offset, "duplicate variable name: " + v1);
        return Fail();
      }
      auto range = std::move(args[0]);
      bool filtered = n == 4;
      auto transform = std::move(args[filtered ? 4 : 3]);
      std::unique_ptr<Expr> add;
      std::unique_ptr<Expr> init;
      if (name == "transformList") {
        init = MakeExpr(Expr::Type::kList, off);
        add = Call("_+_", off, Accu(off), MakeList1(std::move(transform), off));
      } else {
        init = MakeExpr(Expr::Type::kMap, off);
        add = Call("@map_insert", off, Accu(off), MakeIdent(v1, off), std::move(transform));
      }
      std::unique_ptr<Expr> step =
          filtered ? Call("_?_:_", off, std::move(args[3]), std::move(add), Accu(off))
                   : std::move(add);
      return Comprehension(off, std::move(range), v1, v2, std::move(init),
                           MakeConst(Value::Bool(true), off), std::move(step), Accu(off));
    }
    if (name == "bind" && n == 3 && args[0]->type == Expr::Type::kIdent && args[0]->name == "cel") {
      std::string v;
      if (!IterVar(*args[1], v)) return Fail();
      return Comprehension(off, MakeExpr(Expr::Type::kList, off), "#unused", "", std::move(args[2]),
                           MakeConst(Value::Bool(false), off), MakeIdent(v, off),
                           std::move(args[3]), v);
    }
    if ((name == "optMap" || name == "optFlatMap") && n == 2) {
      std::string v;
      if (!IterVar(*args[1], v)) return Fail();
      // target.hasValue() ? <wrap>(cel.bind(v, target.value(), expr)) : optional.none()
      // The target is evaluated once: it is bound to an internal variable first.
      std::string tmp = "@opt";
      auto has = MakeCall("hasValue", off, {}, true);
      has->args.push_back(MakeIdent(tmp, off));
      auto val = MakeCall("value", off, {}, true);
      val->args.push_back(MakeIdent(tmp, off));
      auto inner = Comprehension(off, MakeExpr(Expr::Type::kList, off), "#unused", "",
                                 std::move(val), MakeConst(Value::Bool(false), off),
                                 MakeIdent(v, off), std::move(args[2]), v);
      std::unique_ptr<Expr> wrapped = std::move(inner);
      if (name == "optMap") {
        auto of = MakeCall("optional.of", off, {});
        of->args.push_back(std::move(wrapped));
        wrapped = std::move(of);
      }
      auto cond = Call("_?_:_", off, std::move(has), std::move(wrapped),
                       MakeCall("optional.none", off, {}));
      return Comprehension(off, MakeExpr(Expr::Type::kList, off), "#unused", "", std::move(args[0]),
                           MakeConst(Value::Bool(false), off), MakeIdent(tmp, off), std::move(cond),
                           tmp);
    }
    // Namespaced global functions (optional.of(x), sets.contains(a, b)) are recognised when
    // the program is compiled, where declared variables are known.
    return MakeCall(std::move(name), off, std::move(args), true);
  }

  std::string_view src_;
  Lexer lexer_;
  Token tok_;
  int max_depth_;
  int depth_ = 0;
  bool failed_ = false;
  std::string error_;
};

}  // namespace

std::string FormatError(std::string_view source, int32_t offset, std::string_view message) {
  // Line and 1-based column as cel-go prints them, then the line and a caret under it.
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < static_cast<size_t>(offset) && i < source.size(); ++i) {
    if (source[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  size_t col = static_cast<size_t>(offset) - line_start;
  size_t line_end = source.find('\n', line_start);
  if (line_end == std::string_view::npos) line_end = source.size();
  return "ERROR: <input>:" + std::to_string(line) + ":" + std::to_string(col + 1) + ": " +
         std::string(message) + "\n | " +
         std::string(source.substr(line_start, line_end - line_start)) + "\n | " +
         std::string(col, '.') + "^";
}

std::unique_ptr<Expr> ParseExpr(std::string_view source, int max_depth, std::string& error) {
  if (source.size() > 100000) {
    error = "ERROR: <input>:1:1: expression size exceeds limit of 100000 bytes";
    return nullptr;
  }
  Parser parser(source, max_depth);
  auto e = parser.ParseAll();
  if (!e) error = parser.error();
  return e;
}

}  // namespace klutch::cel
