// A reader for the protobuf text format, enough for cel-spec's conformance files.
//
// Test-only code: it parses without a schema into a generic tree. A Message is the ordered
// list of its fields as written (a repeated field appears once per element); each field holds
// a Scalar (a string with escapes decoded, a number or an identifier, kept as text and
// converted on request) or a nested Message. Any expansions (`[type.googleapis.com/x.Y] {}`)
// are fields named by their bracketed type URL ("type.googleapis.com/x.Y"). Supported syntax:
// `#` comments, optional `:` before messages, `{}` and `<>` message delimiters, `[a, b]` lists,
// optional `,`/`;` separators, single- and double-quoted strings with C/protobuf escapes
// (octal, hex, \u, \U) and adjacent string concatenation, signed numbers, hex and floats
// (1e+300, -inf, nan). Values are immutable after parsing; safe to read from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/status.h"

namespace klutch::textproto {

struct Scalar {
  enum class Type { kString, kNumber, kIdentifier };
  Type type = Type::kIdentifier;
  // kString: the decoded bytes. kNumber: the literal with its sign ("-12", "1e+300", "0x1f",
  // "-inf" is an identifier with a sign: type kIdentifier, text "-inf").
  std::string text;
};

class Message;

struct Field {
  std::string name;
  std::variant<Scalar, std::shared_ptr<const Message>> value;
  int line = 0;  // 1-based line of the field name, for error messages

  bool is_message() const { return value.index() == 1; }
  const Scalar& scalar() const { return std::get<Scalar>(value); }
  const Message& message() const { return *std::get<std::shared_ptr<const Message>>(value); }
};

class Message {
 public:
  std::vector<Field>& mutable_fields() { return fields_; }
  const std::vector<Field>& fields() const { return fields_; }

  // The first field named `name`, or null.
  const Field* Find(std::string_view name) const;
  // Every field named `name` in order (the elements of a repeated field).
  std::vector<const Field*> FindAll(std::string_view name) const;
  // The first field named `name` if it holds a message, else null.
  const Message* FindMessage(std::string_view name) const;
  // The first field named `name` if it holds a string, else nullopt.
  std::optional<std::string> FindString(std::string_view name) const;
  // Whether the first field named `name` is the identifier `true` (or the number 1).
  bool FindBool(std::string_view name) const;

 private:
  std::vector<Field> fields_;
};

// Parses a whole file. Errors are BadRequest with "line N: ..." messages.
core::Result<Message> Parse(std::string_view text);

// Scalar conversions; BadRequest when the scalar does not denote a value of that type.
core::Result<int64_t> ToInt64(const Scalar& scalar);
core::Result<uint64_t> ToUint64(const Scalar& scalar);
// Accepts integers, floats, and the identifiers inf, infinity, nan (any case, optional sign).
core::Result<double> ToDouble(const Scalar& scalar);
// Accepts true/false/t/f and the numbers 1/0.
core::Result<bool> ToBool(const Scalar& scalar);

}  // namespace klutch::textproto
