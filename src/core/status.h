// Status and Result<T>: errors as values, with Kubernetes' StatusReasons as the error codes.
//
// Every fallible function in the project returns a Status or a Result<T>. The reason vocabulary
// is the one Kubernetes puts in metav1.Status.reason, so the API server, the client library and
// the controllers share one meaning of "NotFound" or "Conflict", and the mapping to HTTP codes
// is one table (HttpCode below). Status values are immutable once built and safe to copy
// across threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace klutch::core {

// The StatusReason values of k8s.io/apimachinery/pkg/apis/meta/v1 (plus kOk).
enum class Reason {
  kOk,
  kUnknown,  // no reason given; HTTP 500 unless a code is set explicitly
  kBadRequest,
  kUnauthorized,
  kForbidden,
  kNotFound,
  kAlreadyExists,
  kConflict,
  kGone,
  kExpired,
  kInvalid,
  kServerTimeout,
  kTimeout,
  kTooManyRequests,
  kMethodNotAllowed,
  kNotAcceptable,
  kRequestEntityTooLarge,
  kUnsupportedMediaType,
  kInternalError,
  kServiceUnavailable,
};

// The wire name of a reason ("NotFound"); empty for kOk and kUnknown.
std::string_view ReasonName(Reason reason);
// The HTTP status code Kubernetes uses for a reason (kOk -> 200, kUnknown -> 500).
int HttpCode(Reason reason);
// The reason for a wire name; kUnknown when the name is not one of Kubernetes' reasons.
Reason ReasonFromName(std::string_view name);

// One entry of metav1.StatusDetails.causes.
struct Cause {
  std::string reason;  // CauseType, e.g. "FieldValueInvalid"
  std::string message;
  std::string field;
  bool operator==(const Cause&) const = default;
};

// metav1.StatusDetails: which object the error is about.
struct Details {
  std::string name;
  std::string group;
  std::string kind;  // resource plural for NotFound/AlreadyExists/Conflict, Kind for Invalid
  std::string uid;
  std::vector<Cause> causes;
  int retry_after_seconds = 0;
  bool operator==(const Details&) const = default;
};

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Reason reason, std::string message) : reason_(reason), message_(std::move(message)) {}
  Status(Reason reason, std::string message, Details details)
      : reason_(reason), message_(std::move(message)), details_(std::move(details)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return reason_ == Reason::kOk; }
  Reason reason() const { return reason_; }
  const std::string& message() const { return message_; }
  const std::optional<Details>& details() const { return details_; }
  // The HTTP code: an explicit override (set_code) or HttpCode(reason()).
  int code() const { return code_ ? code_ : HttpCode(reason_); }

  Status& set_code(int code) {
    code_ = code;
    return *this;
  }
  Status& set_details(Details details) {
    details_ = std::move(details);
    return *this;
  }
  Details& mutable_details() {
    if (!details_) details_.emplace();
    return *details_;
  }
  // Prefixes the message with context, "context: message"; OK stays OK.
  Status& Annotate(std::string_view context);

  // "NotFound: configmaps \"x\" not found" for logs and tests.
  std::string ToString() const;

  bool operator==(const Status&) const = default;

 private:
  Reason reason_ = Reason::kOk;
  std::string message_;
  std::optional<Details> details_;
  int code_ = 0;
};

// Convenience constructors named after the reason.
Status BadRequest(std::string message);
Status NotFound(std::string message);
Status AlreadyExists(std::string message);
Status Conflict(std::string message);
Status Invalid(std::string message);
Status Forbidden(std::string message);
Status Internal(std::string message);
Status Gone(std::string message);
Status Unavailable(std::string message);

inline bool IsNotFound(const Status& s) { return s.reason() == Reason::kNotFound; }
inline bool IsAlreadyExists(const Status& s) { return s.reason() == Reason::kAlreadyExists; }
inline bool IsConflict(const Status& s) { return s.reason() == Reason::kConflict; }
inline bool IsGone(const Status& s) {
  return s.reason() == Reason::kGone || s.reason() == Reason::kExpired;
}
inline bool IsInvalid(const Status& s) { return s.reason() == Reason::kInvalid; }

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace klutch::core

#define KLUTCH_STATUS_CONCAT_INNER(a, b) a##b
#define KLUTCH_STATUS_CONCAT(a, b) KLUTCH_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define KLUTCH_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::klutch::core::Status klutch_status_ = (expr);  \
    if (!klutch_status_.ok()) return klutch_status_; \
  } while (false)

// `lhs = value of expr`, or returns its Status when `expr` (a Result) failed.
#define KLUTCH_ASSIGN_OR_RETURN(lhs, expr)                          \
  auto KLUTCH_STATUS_CONCAT(klutch_result_, __LINE__) = (expr);     \
  if (!KLUTCH_STATUS_CONCAT(klutch_result_, __LINE__).ok())         \
    return KLUTCH_STATUS_CONCAT(klutch_result_, __LINE__).status(); \
  lhs = std::move(KLUTCH_STATUS_CONCAT(klutch_result_, __LINE__)).value()

// Aborts with a message on a broken invariant. Only for programmer errors, never for input.
#define KLUTCH_CHECK(cond)                                               \
  do {                                                                   \
    if (!(cond)) ::klutch::core::CheckFailed(#cond, __FILE__, __LINE__); \
  } while (false)

#ifdef NDEBUG
#define KLUTCH_DCHECK(cond) \
  do {                      \
  } while (false)
#else
#define KLUTCH_DCHECK(cond) KLUTCH_CHECK(cond)
#endif

namespace klutch::core {
[[noreturn]] void CheckFailed(const char* cond, const char* file, int line);
}  // namespace klutch::core
