// Kubernetes' list library (k8s.io/apiserver/pkg/cel/library/lists.go): isSorted, sum, min,
// max, indexOf, lastIndexOf; and cel-go's ext.Sets (sets.contains, sets.equivalent,
// sets.intersects), which kube-apiserver enables from 1.29. Kubernetes 1.33 does not enable
// cel-go's ext.Lists.
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "cel/cel.h"
#include "cel/internal.h"
#include "cel/library_util.h"
#include "cel/value.h"

namespace klutch::cel {
namespace {

using internal::NoSuchOverload;

using internal::CostExceeded;

bool IsComparableKind(Kind k) {
  switch (k) {
    case Kind::kInt:
    case Kind::kUint:
    case Kind::kDouble:
    case Kind::kBool:
    case Kind::kString:
    case Kind::kBytes:
    case Kind::kDuration:
    case Kind::kTimestamp:
      return true;
    default:
      return false;
  }
}

// Cost of one traversal: one unit per element plus 0.1 per byte of string elements, as
// Kubernetes' estimator charges.
uint64_t ListTraversalCost(const ListValue& list) {
  uint64_t cost = list.size();
  for (size_t i = 0; i < list.size(); ++i) {
    const Value v = list.Get(i);
    if (v.kind() == Kind::kString) cost += internal::TraversalCost(v.string_value().size());
    if (v.kind() == Kind::kBytes) cost += internal::TraversalCost(v.bytes_value().size());
  }
  return cost;
}

// Compares two list elements; nullopt (with *error set) when they cannot be ordered.
std::optional<std::partial_ordering> CompareElements(const Value& a, const Value& b, Value* error) {
  if (!IsComparableKind(a.kind()) || !IsComparableKind(b.kind())) {
    *error = NoSuchOverload();
    return std::nullopt;
  }
  const Ordering ord = Compare(a, b);
  if (!ord.comparable) {
    *error = NoSuchOverload();
    return std::nullopt;
  }
  return ord.order;
}

Value IsSorted(const ListValue& list) {
  Value prev;
  for (size_t i = 0; i < list.size(); ++i) {
    Value next = list.Get(i);
    if (next.is_error()) return next;
    if (!IsComparableKind(next.kind())) return NoSuchOverload();
    if (i > 0) {
      Value error;
      auto ord = CompareElements(prev, next, &error);
      if (!ord) return error;
      if (*ord == std::partial_ordering::greater) return Value::Bool(false);
    }
    prev = std::move(next);
  }
  return Value::Bool(true);
}

// min (prefer = less) or max (prefer = greater): the first element no other beats.
Value Extreme(const ListValue& list, std::partial_ordering prefer, const char* name) {
  if (list.size() == 0) return Value::MakeError(std::string(name) + " called on empty list");
  Value result = list.Get(0);
  if (result.is_error()) return result;
  if (!IsComparableKind(result.kind())) return NoSuchOverload();
  for (size_t i = 1; i < list.size(); ++i) {
    Value next = list.Get(i);
    if (next.is_error()) return next;
    Value error;
    auto ord = CompareElements(next, result, &error);
    if (!ord) return error;
    if (*ord == prefer) result = std::move(next);
  }
  return result;
}

constexpr Int128 kListNanosPerSecond = 1000000000;

Value Sum(const ListValue& list) {
  if (list.size() == 0) return Value::Int(0);
  const Value first = list.Get(0);
  if (first.is_error()) return first;
  const Kind kind = first.kind();
  int64_t int_sum = 0;
  uint64_t uint_sum = 0;
  double double_sum = 0;
  Int128 nanos = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const Value v = i == 0 ? first : list.Get(i);
    if (v.is_error()) return v;
    if (v.kind() != kind) return NoSuchOverload();
    switch (kind) {
      case Kind::kInt:
        if (__builtin_add_overflow(int_sum, v.int_value(), &int_sum)) {
          return Value::MakeError("integer overflow");
        }
        break;
      case Kind::kUint:
        if (__builtin_add_overflow(uint_sum, v.uint_value(), &uint_sum)) {
          return Value::MakeError("unsigned integer overflow");
        }
        break;
      case Kind::kDouble:
        double_sum += v.double_value();
        break;
      case Kind::kDuration: {
        const Duration d = v.duration();
        nanos += static_cast<Int128>(d.seconds) * kListNanosPerSecond + d.nanos;
        // cel-go durations are int64 nanoseconds.
        if (nanos > std::numeric_limits<int64_t>::max() ||
            nanos < std::numeric_limits<int64_t>::min()) {
          return Value::MakeError("duration overflow");
        }
        break;
      }
      default:
        return NoSuchOverload();
    }
  }
  switch (kind) {
    case Kind::kInt:
      return Value::Int(int_sum);
    case Kind::kUint:
      return Value::Uint(uint_sum);
    case Kind::kDouble:
      return Value::Double(double_sum);
    default: {
      Duration d;
      d.seconds = static_cast<int64_t>(nanos / kListNanosPerSecond);
      d.nanos = static_cast<int32_t>(nanos % kListNanosPerSecond);
      return Value::Span(d);
    }
  }
}

bool IsEqual(const Value& a, const Value& b) {
  const Value eq = Equal(a, b);
  return eq.kind() == Kind::kBool && eq.bool_value();
}

Value IndexOf(const ListValue& list, const Value& item, bool last) {
  const auto n = static_cast<int64_t>(list.size());
  for (int64_t k = 0; k < n; ++k) {
    const int64_t i = last ? n - 1 - k : k;
    if (IsEqual(list.Get(i), item)) return Value::Int(i);
  }
  return Value::Int(-1);
}

bool ListContains(const ListValue& list, const Value& item) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (IsEqual(list.Get(i), item)) return true;
  }
  return false;
}

// Every element of `sub` is in `list`.
bool ContainsAll(const ListValue& list, const ListValue& sub) {
  for (size_t i = 0; i < sub.size(); ++i) {
    if (!ListContains(list, sub.Get(i))) return false;
  }
  return true;
}

FunctionBody WithTraversalCost(FunctionBody body) {
  return [body = std::move(body)](std::span<const Value> args, EvalContext& ctx) {
    if (!ctx.Charge(ListTraversalCost(args[0].list()))) return CostExceeded();
    return body(args, ctx);
  };
}

FunctionBody WithProductCost(FunctionBody body) {
  return [body = std::move(body)](std::span<const Value> args, EvalContext& ctx) {
    const uint64_t cost = static_cast<uint64_t>(args[0].list().size()) * args[1].list().size() + 1;
    if (!ctx.Charge(cost)) return CostExceeded();
    return body(args, ctx);
  };
}

}  // namespace

void internal::InstallListsLibrary(FunctionRegistry& registry) {
  const Param list = Param::Of(Kind::kList);
  registry.Add("isSorted", true, {list},
               WithTraversalCost(
                   [](std::span<const Value> a, EvalContext&) { return IsSorted(a[0].list()); }));
  registry.Add("sum", true, {list}, WithTraversalCost([](std::span<const Value> a, EvalContext&) {
                 return Sum(a[0].list());
               }));
  registry.Add("min", true, {list}, WithTraversalCost([](std::span<const Value> a, EvalContext&) {
                 return Extreme(a[0].list(), std::partial_ordering::less, "min");
               }));
  registry.Add("max", true, {list}, WithTraversalCost([](std::span<const Value> a, EvalContext&) {
                 return Extreme(a[0].list(), std::partial_ordering::greater, "max");
               }));
  registry.Add("indexOf", true, {list, Param::Any()},
               WithTraversalCost([](std::span<const Value> a, EvalContext&) {
                 return IndexOf(a[0].list(), a[1], false);
               }));
  registry.Add("lastIndexOf", true, {list, Param::Any()},
               WithTraversalCost([](std::span<const Value> a, EvalContext&) {
                 return IndexOf(a[0].list(), a[1], true);
               }));

  registry.Add("sets.contains", false, {list, list},
               WithProductCost([](std::span<const Value> a, EvalContext&) {
                 return Value::Bool(ContainsAll(a[0].list(), a[1].list()));
               }));
  registry.Add("sets.equivalent", false, {list, list},
               WithProductCost([](std::span<const Value> a, EvalContext&) {
                 return Value::Bool(ContainsAll(a[0].list(), a[1].list()) &&
                                    ContainsAll(a[1].list(), a[0].list()));
               }));
  registry.Add("sets.intersects", false, {list, list},
               WithProductCost([](std::span<const Value> a, EvalContext&) {
                 const ListValue& x = a[0].list();
                 const ListValue& y = a[1].list();
                 for (size_t i = 0; i < y.size(); ++i) {
                   if (ListContains(x, y.Get(i))) return Value::Bool(true);
                 }
                 return Value::Bool(false);
               }));
}

}  // namespace klutch::cel
