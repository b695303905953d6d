// CEL optional values (cel-go's OptionalTypes library): optional.of, optional.none,
// optional.ofNonZeroValue, hasValue, value. `or`, `orValue`, `?.`, `[?]` and optional list
// and map entries are evaluated by the interpreter; optMap/optFlatMap are macros.

#include "cel/cel.h"

namespace klutch::cel {
namespace {

using Args = std::span<const Value>;

bool IsZero(const Value& v) {
  switch (v.kind()) {
    case Kind::kNull:
      return true;
    case Kind::kBool:
      return !v.bool_value();
    case Kind::kInt:
      return v.int_value() == 0;
    case Kind::kUint:
      return v.uint_value() == 0;
    case Kind::kDouble:
      return v.double_value() == 0;
    case Kind::kString:
      return v.string_value().empty();
    case Kind::kBytes:
      return v.bytes_value().empty();
    case Kind::kList:
      return v.list().size() == 0;
    case Kind::kMap:
      return v.map().size() == 0;
    case Kind::kTimestamp:
      return v.timestamp() == Timestamp{};
    case Kind::kDuration:
      return v.duration() == Duration{};
    case Kind::kOptional:
      return !v.has_optional_value();
    default:
      return false;
  }
}

}  // namespace

void InstallOptionalLibrary(FunctionRegistry& r) {
  r.Add("optional.of", false, {Param::Any()},
        [](Args a, EvalContext&) { return Value::OptionalOf(a[0]); });
  r.Add("optional.none", false, {}, [](Args, EvalContext&) { return Value::OptionalNone(); });
  r.Add("optional.ofNonZeroValue", false, {Param::Any()}, [](Args a, EvalContext&) {
    return IsZero(a[0]) ? Value::OptionalNone() : Value::OptionalOf(a[0]);
  });
  r.Add("hasValue", true, {Param::Of(Kind::kOptional)},
        [](Args a, EvalContext&) { return Value::Bool(a[0].has_optional_value()); });
  r.Add("value", true, {Param::Of(Kind::kOptional)}, [](Args a, EvalContext&) {
    if (!a[0].has_optional_value()) return Value::MakeError("optional.none() dereference");
    return a[0].optional_value();
  });
}

}  // namespace klutch::cel
