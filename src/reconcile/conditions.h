// Condition helpers on JSON objects: reading and writing `status.conditions[]` the way
// reconcilers report user-visible state (CamelCase reason + human message).
//
// Two styles live here, both keyed by `type` inside `status.conditions`:
//  * metav1.Condition (Kubernetes' standard): type, status, observedGeneration,
//    lastTransitionTime, reason, message. SetCondition follows apimachinery's
//    meta.SetStatusCondition: lastTransitionTime moves only when status changes; order kept.
//  * The cluster-api style of the binding protocol (the team's shared specs,
//    ../shared/specs/bind-protocol.md §1.0.2-1.0.3), here "SeverityCondition": type, status,
//    severity, lastTransitionTime, reason, message. SetSeverityCondition keeps the time unless
//    status/reason/severity/message changed and sorts the list (Ready first); SetSummary
//    computes Ready from the others.
// Functions that only need type and status (IsConditionTrue, RemoveCondition, ...) serve both.
//
// All functions are pure over their arguments (thread-compatible: synchronise access to one
// object yourself). Readers never throw: a missing or mistyped field reads as empty; entries of
// `status.conditions` that are not objects are ignored by readers and preserved by writers.
// Times are RFC 3339 strings with whole seconds (core::FormatTime of the injected clock).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"
#include "machinery/json.h"

namespace klutch::reconcile {

using machinery::Json;

// Condition status values.
inline constexpr std::string_view kConditionTrue = "True";
inline constexpr std::string_view kConditionFalse = "False";
inline constexpr std::string_view kConditionUnknown = "Unknown";

// ---------------------------------------------------------------------------------------------
// Shared by both styles (only `type` and `status` are read).

// The `status` of the condition of `type` ("" when there is none).
std::string ConditionStatus(const Json& obj, std::string_view type);
// True when the condition of `type` exists with status "True" (resp. "False", "Unknown").
bool IsConditionTrue(const Json& obj, std::string_view type);
bool IsConditionFalse(const Json& obj, std::string_view type);
bool IsConditionUnknown(const Json& obj, std::string_view type);
// Removes every condition of `type`; true when one was removed.
bool RemoveCondition(Json& obj, std::string_view type);

// ---------------------------------------------------------------------------------------------
// metav1.Condition style.

struct Condition {
  std::string type;    // CamelCase, or a qualified name ("example.com/Ready")
  std::string status;  // kConditionTrue / kConditionFalse / kConditionUnknown
  int64_t observed_generation = 0;
  std::string last_transition_time;  // RFC 3339; "" lets SetCondition stamp it
  std::string reason;                // CamelCase, see ValidateConditionReason
  std::string message;
  bool operator==(const Condition&) const = default;
};

// metav1 JSON: type, status, lastTransitionTime, reason, message always present (as Go
// serialises them); observedGeneration only when non-zero.
Json ConditionToJson(const Condition& c);
// Reads one entry; missing or mistyped fields read as empty/0. nullopt when not an object.
std::optional<Condition> ConditionFromJson(const Json& entry);

// Sets the condition of `c.type` in obj's status.conditions (creating status and the list as
// needed; a non-object status or non-array list is replaced). A new condition is appended with
// c.last_transition_time, or now when that is empty. An existing one takes status, reason,
// message and observedGeneration from `c`; its lastTransitionTime changes only when the status
// changes (to c.last_transition_time, or now when empty); its position is kept. Returns true
// when status.conditions changed.
bool SetCondition(Json& obj, Condition c, const core::Clock& clock);
// The condition of `type`, nullopt when absent.
std::optional<Condition> FindCondition(const Json& obj, std::string_view type);

// OK when `reason` is a metav1 condition reason: non-empty, at most 1024 bytes, matching
// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$. Otherwise Invalid, with a message and cause naming
// `field` in apimachinery's wording (`reason: Invalid value: "x": a condition reason must ...`).
core::Status ValidateConditionReason(std::string_view reason, std::string_view field = "reason");
// All of apimachinery's ValidateCondition checks: type a qualified name, status one of the three
// values, observedGeneration >= 0, lastTransitionTime set and RFC 3339, reason as above, message
// at most 32768 bytes. Invalid lists every problem as a cause with fields under `field_prefix`
// ("status.conditions[0]" gives "status.conditions[0].reason"; "" gives "reason").
core::Status ValidateCondition(const Condition& c, std::string_view field_prefix = "");

// ---------------------------------------------------------------------------------------------
// Cluster-api style (binding protocol).

inline constexpr std::string_view kReadyCondition = "Ready";
// Severity values; only False conditions carry one.
inline constexpr std::string_view kSeverityError = "Error";
inline constexpr std::string_view kSeverityWarning = "Warning";
inline constexpr std::string_view kSeverityInfo = "Info";
inline constexpr std::string_view kSeverityNone = "";

struct SeverityCondition {
  std::string type;
  std::string status;    // kConditionTrue / kConditionFalse / kConditionUnknown
  std::string severity;  // kSeverity*; kept as read so that unknown values survive a round trip
  std::string last_transition_time;  // RFC 3339; "" lets a new condition be stamped now
  std::string reason;
  std::string message;
  bool operator==(const SeverityCondition&) const = default;
};

// JSON as the protocol serialises it: type, status, lastTransitionTime always; severity, reason,
// message only when non-empty.
Json SeverityConditionToJson(const SeverityCondition& c);
// Reads one entry; missing or mistyped fields read as "". nullopt when not an object.
std::optional<SeverityCondition> SeverityConditionFromJson(const Json& entry);
// Same state = same type, status, reason, severity and message (the time is not compared).
bool HasSameState(const SeverityCondition& a, const SeverityCondition& b);

// The protocol's setter (§1.0.2): an existing condition of the same type is kept untouched
// (old lastTransitionTime) when it has the same state, else replaced by `c` stamped now (any
// time in `c` is ignored). A new condition keeps c.last_transition_time, or is stamped now.
// Afterwards the list is sorted: Ready first, the rest ascending by type (non-object entries
// last, in their order). Returns true when status.conditions changed (content or order).
bool SetSeverityCondition(Json& obj, SeverityCondition c, const core::Clock& clock);
// The condition of `type`, nullopt when absent.
std::optional<SeverityCondition> FindSeverityCondition(const Json& obj, std::string_view type);

// Shorthands for SetSeverityCondition. MarkTrue sets only type and status (no reason, severity,
// message); MarkUnknown carries no severity.
bool MarkTrue(Json& obj, std::string_view type, const core::Clock& clock);
bool MarkFalse(Json& obj, std::string_view type, std::string_view reason, std::string_view severity,
               std::string_view message, const core::Clock& clock);
bool MarkUnknown(Json& obj, std::string_view type, std::string_view reason,
                 std::string_view message, const core::Clock& clock);

// The Ready summary of the protocol (§1.0.3), computed from every condition except Ready:
// conditions are grouped by (status, severity); groups rank False/Error, False/Warning,
// False/Info, True, Unknown, then anything else. No conditions -> nullopt. A True top group
// gives Ready=True with nothing else; otherwise Ready takes the top group's status (False with
// its severity; Unknown for Unknown or any other status) and the reason and message of the
// group's first condition in list order (Ready first, then by type). No time is set.
std::optional<SeverityCondition> ReadySummary(const Json& obj);
// SetSeverityCondition(obj, *ReadySummary(obj), clock). When ReadySummary is nullopt nothing
// changes: an existing Ready condition is left as it is (the spec only says none is produced;
// this follows cluster-api, whose Set ignores a nil summary). Returns true when
// status.conditions changed.
bool SetSummary(Json& obj, const core::Clock& clock);

}  // namespace klutch::reconcile
