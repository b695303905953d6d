#include "test/conformance/cel/textproto.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "core/strings.h"

namespace klutch::textproto {
namespace {

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  return std::tolower(static_cast<unsigned char>(c)) - 'a' + 10;
}

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  core::Result<Message> ParseFile() {
    Message root;
    KLUTCH_RETURN_IF_ERROR(ParseFields(root, '\0'));
    return root;
  }

 private:
  core::Status Error(std::string what) const {
    return core::BadRequest("line " + std::to_string(line_) + ": " + std::move(what));
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  char PeekAt(size_t ahead) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  void Advance() {
    if (text_[pos_] == '\n') ++line_;
    ++pos_;
  }

  // Skips whitespace and `#` comments.
  void SkipSpace() {
    while (!AtEnd()) {
      char c = Peek();
      if (c == '#') {
        while (!AtEnd() && Peek() != '\n') Advance();
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        Advance();
      } else {
        return;
      }
    }
  }

  bool Consume(char c) {
    SkipSpace();
    if (Peek() != c) return false;
    Advance();
    return true;
  }

  // Fields until `close` ('}' or '>'), or until the end of input when close is '\0'.
  core::Status ParseFields(Message& message, char close) {
    while (true) {
      SkipSpace();
      if (AtEnd()) {
        if (close == '\0') return core::Status::Ok();
        return Error(std::string("unexpected end of input, expected '") + close + "'");
      }
      if (close != '\0' && Peek() == close) {
        Advance();
        return core::Status::Ok();
      }
      KLUTCH_RETURN_IF_ERROR(ParseField(message));
      if (!Consume(',')) (void)Consume(';');
    }
  }

  core::Status ParseField(Message& message) {
    Field field;
    field.line = line_;
    if (Peek() == '[') {
      // An extension or Any expansion: the name runs to the closing bracket.
      Advance();
      std::string name;
      while (!AtEnd() && Peek() != ']') {
        char c = Peek();
        if (!std::isspace(static_cast<unsigned char>(c))) name += c;
        Advance();
      }
      if (AtEnd()) return Error("unterminated '[' in field name");
      Advance();
      field.name = std::move(name);
    } else if (IsIdentStart(Peek())) {
      while (!AtEnd() && IsIdentChar(Peek())) {
        field.name += Peek();
        Advance();
      }
    } else {
      return Error(std::string("expected a field name, got '") + Peek() + "'");
    }
    bool colon = Consume(':');
    SkipSpace();
    char c = Peek();
    if (c == '{' || c == '<') {
      KLUTCH_ASSIGN_OR_RETURN(auto nested, ParseMessageValue());
      field.value = std::move(nested);
      message.mutable_fields().push_back(std::move(field));
      return core::Status::Ok();
    }
    if (!colon) return Error("expected ':' or '{' after field '" + field.name + "'");
    if (c == '[') {
      // A list: one field per element.
      Advance();
      if (Consume(']')) return core::Status::Ok();
      while (true) {
        SkipSpace();
        Field element;
        element.name = field.name;
        element.line = line_;
        if (Peek() == '{' || Peek() == '<') {
          KLUTCH_ASSIGN_OR_RETURN(auto nested, ParseMessageValue());
          element.value = std::move(nested);
        } else {
          KLUTCH_ASSIGN_OR_RETURN(auto scalar, ParseScalar());
          element.value = std::move(scalar);
        }
        message.mutable_fields().push_back(std::move(element));
        if (Consume(']')) return core::Status::Ok();
        if (!Consume(',')) return Error("expected ',' or ']' in list of '" + field.name + "'");
      }
    }
    KLUTCH_ASSIGN_OR_RETURN(auto scalar, ParseScalar());
    field.value = std::move(scalar);
    message.mutable_fields().push_back(std::move(field));
    return core::Status::Ok();
  }

  core::Result<std::shared_ptr<const Message>> ParseMessageValue() {
    char open = Peek();
    Advance();
    auto nested = std::make_shared<Message>();
    KLUTCH_RETURN_IF_ERROR(ParseFields(*nested, open == '{' ? '}' : '>'));
    return std::shared_ptr<const Message>(std::move(nested));
  }

  core::Result<Scalar> ParseScalar() {
    SkipSpace();
    char c = Peek();
    Scalar scalar;
    if (c == '"' || c == '\'') {
      scalar.type = Scalar::Type::kString;
      // Adjacent literals concatenate, as in C.
      while (Peek() == '"' || Peek() == '\'') {
        KLUTCH_RETURN_IF_ERROR(ParseStringLiteral(scalar.text));
        SkipSpace();
      }
      return scalar;
    }
    std::string sign;
    if (c == '-' || c == '+') {
      if (c == '-') sign = "-";
      Advance();
      SkipSpace();
      c = Peek();
    }
    if (IsDigit(c) || (c == '.' && IsDigit(PeekAt(1)))) {
      scalar.type = Scalar::Type::kNumber;
      scalar.text = sign + ReadNumber();
      return scalar;
    }
    if (IsIdentStart(c)) {
      scalar.type = Scalar::Type::kIdentifier;
      scalar.text = sign;
      while (!AtEnd() && IsIdentChar(Peek())) {
        scalar.text += Peek();
        Advance();
      }
      return scalar;
    }
    return Error(std::string("expected a value, got '") +
                 (AtEnd() ? std::string("end of input") : std::string(1, c)) + "'");
  }

  std::string ReadNumber() {
    std::string out;
    bool hex = Peek() == '0' && (PeekAt(1) == 'x' || PeekAt(1) == 'X');
    while (!AtEnd()) {
      char c = Peek();
      if (IsIdentChar(c) || c == '.') {
        out += c;
        Advance();
        // An exponent may carry a sign: 1e+300, 2.5E-3.
        if (!hex && (c == 'e' || c == 'E') && (Peek() == '+' || Peek() == '-')) {
          out += Peek();
          Advance();
        }
      } else {
        break;
      }
    }
    return out;
  }

  core::Status ParseStringLiteral(std::string& out) {
    char quote = Peek();
    int start_line = line_;
    Advance();
    while (true) {
      if (AtEnd()) {
        return core::BadRequest("line " + std::to_string(start_line) + ": unterminated string");
      }
      char c = Peek();
      if (c == quote) {
        Advance();
        return core::Status::Ok();
      }
      if (c == '\n') return Error("newline in string literal");
      Advance();
      if (c != '\\') {
        out += c;
        continue;
      }
      if (AtEnd()) return Error("unterminated escape");
      char e = Peek();
      Advance();
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
        case '?':
          out += '?';
          break;
        case 'x':
        case 'X': {
          if (!IsHexDigit(Peek())) return Error("\\x escape without hex digits");
          int v = 0;
          for (int i = 0; i < 2 && IsHexDigit(Peek()); ++i) {
            v = v * 16 + HexValue(Peek());
            Advance();
          }
          out += static_cast<char>(v);
          break;
        }
        case 'u':
        case 'U': {
          int digits = e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (int i = 0; i < digits; ++i) {
            if (!IsHexDigit(Peek())) {
              return Error(std::string("\\") + e + " escape needs " + std::to_string(digits) +
                           " hex digits");
            }
            cp = cp * 16 + HexValue(Peek());
            Advance();
          }
          if (cp > 0x10FFFF) return Error("\\U escape beyond U+10FFFF");
          core::AppendUtf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            int v = e - '0';
            for (int i = 0; i < 2 && Peek() >= '0' && Peek() <= '7'; ++i) {
              v = v * 8 + (Peek() - '0');
              Advance();
            }
            if (v > 0xFF) return Error("octal escape beyond \\377");
            out += static_cast<char>(v);
            break;
          }
          return Error(std::string("unknown escape \\") + e);
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
};

core::Status NotA(std::string_view what, const Scalar& scalar) {
  return core::BadRequest("not " + std::string(what) + ": " + scalar.text);
}

// The magnitude of an unsigned literal: decimal, 0x hex or leading-0 octal.
std::optional<uint64_t> ParseMagnitude(std::string_view text) {
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  } else if (text.size() > 1 && text[0] == '0') {
    base = 8;
    text.remove_prefix(1);
  }
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
  if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

const Field* Message::Find(std::string_view name) const {
  for (const Field& f : fields_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<const Field*> Message::FindAll(std::string_view name) const {
  std::vector<const Field*> out;
  for (const Field& f : fields_) {
    if (f.name == name) out.push_back(&f);
  }
  return out;
}

const Message* Message::FindMessage(std::string_view name) const {
  const Field* f = Find(name);
  return f != nullptr && f->is_message() ? &f->message() : nullptr;
}

std::optional<std::string> Message::FindString(std::string_view name) const {
  const Field* f = Find(name);
  if (f == nullptr || f->is_message() || f->scalar().type != Scalar::Type::kString) {
    return std::nullopt;
  }
  return f->scalar().text;
}

bool Message::FindBool(std::string_view name) const {
  const Field* f = Find(name);
  if (f == nullptr || f->is_message()) return false;
  auto b = ToBool(f->scalar());
  return b.ok() && *b;
}

core::Result<Message> Parse(std::string_view text) { return Parser(text).ParseFile(); }

core::Result<int64_t> ToInt64(const Scalar& scalar) {
  if (scalar.type != Scalar::Type::kNumber) return NotA("an integer", scalar);
  std::string_view text = scalar.text;
  bool negative = !text.empty() && text[0] == '-';
  if (negative) text.remove_prefix(1);
  auto magnitude = ParseMagnitude(text);
  if (!magnitude) return NotA("an integer", scalar);
  constexpr uint64_t kMinMagnitude = uint64_t{1} << 63;
  if (negative) {
    if (*magnitude > kMinMagnitude) return NotA("an int64", scalar);
    return static_cast<int64_t>(0 - *magnitude);
  }
  if (*magnitude >= kMinMagnitude) return NotA("an int64", scalar);
  return static_cast<int64_t>(*magnitude);
}

core::Result<uint64_t> ToUint64(const Scalar& scalar) {
  if (scalar.type != Scalar::Type::kNumber || scalar.text.starts_with('-')) {
    return NotA("an unsigned integer", scalar);
  }
  auto magnitude = ParseMagnitude(scalar.text);
  if (!magnitude) return NotA("an unsigned integer", scalar);
  return *magnitude;
}

core::Result<double> ToDouble(const Scalar& scalar) {
  std::string_view text = scalar.text;
  bool negative = !text.empty() && text[0] == '-';
  if (scalar.type == Scalar::Type::kIdentifier) {
    std::string word(negative ? text.substr(1) : text);
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    double v;
    if (word == "inf" || word == "infinity") {
      v = std::numeric_limits<double>::infinity();
    } else if (word == "nan") {
      v = std::numeric_limits<double>::quiet_NaN();
    } else {
      return NotA("a double", scalar);
    }
    return negative ? -v : v;
  }
  if (scalar.type != Scalar::Type::kNumber) return NotA("a double", scalar);
  std::string_view digits = negative ? text.substr(1) : text;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    auto magnitude = ParseMagnitude(digits);
    if (!magnitude) return NotA("a double", scalar);
    double v = static_cast<double>(*magnitude);
    return negative ? -v : v;
  }
  std::string body(digits);
  // The text format allows a float suffix: 1.5f.
  if (!body.empty() && (body.back() == 'f' || body.back() == 'F')) body.pop_back();
  double v = 0;
  auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
  if (ptr != body.data() + body.size() || body.empty()) return NotA("a double", scalar);
  if (ec == std::errc::result_out_of_range) {
    // Overflow becomes infinity, as protobuf's text parser does; underflow becomes zero.
    v = std::strtod(body.c_str(), nullptr);
  } else if (ec != std::errc()) {
    return NotA("a double", scalar);
  }
  return negative ? -v : v;
}

core::Result<bool> ToBool(const Scalar& scalar) {
  const std::string& t = scalar.text;
  if (scalar.type == Scalar::Type::kIdentifier) {
    if (t == "true" || t == "True" || t == "t") return true;
    if (t == "false" || t == "False" || t == "f") return false;
  } else if (scalar.type == Scalar::Type::kNumber) {
    if (t == "1") return true;
    if (t == "0") return false;
  }
  return NotA("a bool", scalar);
}

}  // namespace klutch::textproto
