#include "reconcile/conditions.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "machinery/object.h"
#include "machinery/validation.h"

namespace klutch::reconcile {

namespace {

constexpr size_t kMaxReasonLen = 1024;
constexpr size_t kMaxMessageLen = 32 * 1024;
constexpr std::string_view kReasonFmt = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?";

// `status.conditions` when it is an array, else nullptr.
const Json* Conditions(const Json& obj) {
  const Json* list = machinery::Find(obj, {"status", "conditions"});
  return list && list->is_array() ? list : nullptr;
}

Json* MutableConditionsIfPresent(Json& obj) { return const_cast<Json*>(Conditions(obj)); }

// `status.conditions`, created (or replacing a mistyped value) as needed.
Json& MutableConditions(Json& obj) {
  if (obj.is_null()) obj = Json::object();
  KLUTCH_CHECK(obj.is_object());
  Json& status = obj["status"];
  if (!status.is_object()) status = Json::object();
  Json& list = status["conditions"];
  if (!list.is_array()) list = Json::array();
  return list;
}

std::string Str(const Json& entry, const char* key) { return machinery::GetString(entry, {key}); }

// The first object entry of `type`, or nullptr.
const Json* FindEntry(const Json& obj, std::string_view type) {
  const Json* list = Conditions(obj);
  if (!list) return nullptr;
  for (const Json& e : *list) {
    if (e.is_object() && Str(e, "type") == type) return &e;
  }
  return nullptr;
}

std::string Now(const core::Clock& clock) { return core::FormatTime(clock.Now()); }

// Kubernetes' field-error aggregate without an object name: `field: detail` or `[a, b]`.
core::Status InvalidFields(std::vector<core::Cause> causes) {
  if (causes.empty()) return core::Status::Ok();
  auto render = [](const core::Cause& c) {
    return c.field.empty() ? c.message : c.field + ": " + c.message;
  };
  std::string msg;
  if (causes.size() == 1) {
    msg = render(causes[0]);
  } else {
    msg = "[";
    for (size_t i = 0; i < causes.size(); ++i) {
      if (i) msg += ", ";
      msg += render(causes[i]);
    }
    msg += "]";
  }
  core::Details details;
  details.causes = std::move(causes);
  return core::Status(core::Reason::kInvalid, std::move(msg), std::move(details));
}

bool IsAlpha(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
bool IsAlnumUnderscore(char c) { return IsAlpha(c) || (c >= '0' && c <= '9') || c == '_'; }

// ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$
bool MatchesReasonFormat(std::string_view s) {
  if (s.empty() || !IsAlpha(s.front())) return false;
  if (s.size() > 1 && !IsAlnumUnderscore(s.back())) return false;
  for (char c : s.substr(1)) {
    if (!IsAlnumUnderscore(c) && c != ',' && c != ':') return false;
  }
  return true;
}

// apimachinery's RegexError wording, double spaces included: users see it verbatim.
std::string ReasonFormatError() {
  std::string msg =
      "a condition reason must start with alphabetic character, optionally followed by a string "
      "of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' "
      "(e.g. ";
  const char* examples[] = {"my_name", "MY_NAME", "MyName", "ReasonA,ReasonB", "ReasonA:ReasonB"};
  for (size_t i = 0; i < std::size(examples); ++i) {
    if (i) msg += " or ";
    msg += "'" + std::string(examples[i]) + "', ";
  }
  msg += "regex used for validation is '" + std::string(kReasonFmt) + "')";
  return msg;
}

void AppendReasonCauses(std::string_view reason, const std::string& field,
                        std::vector<core::Cause>& causes) {
  if (reason.empty()) {
    causes.push_back(machinery::FieldRequired(field, "must be set"));
    return;
  }
  if (!MatchesReasonFormat(reason)) {
    causes.push_back(machinery::FieldInvalid(field, Json(reason), ReasonFormatError()));
  }
  if (reason.size() > kMaxReasonLen) {
    causes.push_back(machinery::FieldTooLong(field, Json(reason), kMaxReasonLen));
  }
}

std::string Child(std::string_view prefix, std::string_view name) {
  return prefix.empty() ? std::string(name) : std::string(prefix) + "." + std::string(name);
}

// The list order of the protocol: Ready first, then ascending type; non-objects after all.
struct ListOrder {
  static std::pair<int, std::string> Key(const Json& e) {
    if (!e.is_object()) return {2, ""};
    std::string type = Str(e, "type");
    return {type == kReadyCondition ? 0 : 1, std::move(type)};
  }
  bool operator()(const Json& a, const Json& b) const { return Key(a) < Key(b); }
};

// Group rank of the Ready summary (§1.0.3).
int MergePriority(const std::string& status, const std::string& severity) {
  if (status == kConditionFalse) {
    if (severity == kSeverityError) return 0;
    if (severity == kSeverityWarning) return 1;
    if (severity == kSeverityInfo) return 2;
    return 99;
  }
  if (status == kConditionTrue) return 3;
  if (status == kConditionUnknown) return 4;
  return 99;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared

std::string ConditionStatus(const Json& obj, std::string_view type) {
  const Json* e = FindEntry(obj, type);
  return e ? Str(*e, "status") : std::string();
}

bool IsConditionTrue(const Json& obj, std::string_view type) {
  return ConditionStatus(obj, type) == kConditionTrue;
}
bool IsConditionFalse(const Json& obj, std::string_view type) {
  return ConditionStatus(obj, type) == kConditionFalse;
}
bool IsConditionUnknown(const Json& obj, std::string_view type) {
  return ConditionStatus(obj, type) == kConditionUnknown;
}

bool RemoveCondition(Json& obj, std::string_view type) {
  Json* list = MutableConditionsIfPresent(obj);
  if (!list) return false;
  Json kept = Json::array();
  for (Json& e : *list) {
    if (!(e.is_object() && Str(e, "type") == type)) kept.push_back(std::move(e));
  }
  bool removed = kept.size() != list->size();
  *list = std::move(kept);
  return removed;
}

// ---------------------------------------------------------------------------------------------
// metav1.Condition

Json ConditionToJson(const Condition& c) {
  Json j = {{"type", c.type},
            {"status", c.status},
            {"lastTransitionTime", c.last_transition_time},
            {"reason", c.reason},
            {"message", c.message}};
  if (c.observed_generation != 0) j["observedGeneration"] = c.observed_generation;
  return j;
}

std::optional<Condition> ConditionFromJson(const Json& entry) {
  if (!entry.is_object()) return std::nullopt;
  Condition c;
  c.type = Str(entry, "type");
  c.status = Str(entry, "status");
  c.last_transition_time = Str(entry, "lastTransitionTime");
  c.reason = Str(entry, "reason");
  c.message = Str(entry, "message");
  auto it = entry.find("observedGeneration");
  if (it != entry.end() && it->is_number_integer()) {
    c.observed_generation = it->get<int64_t>();  // json-ok: an integer (signed or not) converts
  }
  return c;
}

bool SetCondition(Json& obj, Condition c, const core::Clock& clock) {
  // A message may quote what a user wrote (a name, a value), so it is cut to what
  // metav1.Condition allows (32 KiB), never inside a UTF-8 character: a 200 KB name in a spec
  // made a 400 KB condition, twice over.
  if (c.message.size() > kMaxMessageLen) {
    constexpr std::string_view kCut = " ...";
    size_t cut = kMaxMessageLen - kCut.size();
    while (cut > 0 && (static_cast<unsigned char>(c.message[cut]) & 0xC0) == 0x80) --cut;
    c.message.resize(cut);
    c.message += kCut;
  }
  Json& list = MutableConditions(obj);
  const Json before = list;
  Json* existing = nullptr;
  for (Json& e : list) {
    if (e.is_object() && Str(e, "type") == c.type) {
      existing = &e;
      break;
    }
  }
  if (!existing) {
    if (c.last_transition_time.empty()) c.last_transition_time = Now(clock);
    list.push_back(ConditionToJson(c));
    return true;
  }
  // Updated field by field, so fields this type does not know survive.
  Json& e = *existing;
  if (Str(e, "status") != c.status) {
    e["status"] = c.status;
    e["lastTransitionTime"] = c.last_transition_time.empty() ? Now(clock) : c.last_transition_time;
  }
  e["reason"] = c.reason;
  e["message"] = c.message;
  if (c.observed_generation != 0) {
    e["observedGeneration"] = c.observed_generation;
  } else {
    e.erase("observedGeneration");
  }
  return list != before;
}

std::optional<Condition> FindCondition(const Json& obj, std::string_view type) {
  const Json* e = FindEntry(obj, type);
  return e ? ConditionFromJson(*e) : std::nullopt;
}

core::Status ValidateConditionReason(std::string_view reason, std::string_view field) {
  std::vector<core::Cause> causes;
  AppendReasonCauses(reason, std::string(field), causes);
  return InvalidFields(std::move(causes));
}

core::Status ValidateCondition(const Condition& c, std::string_view field_prefix) {
  std::vector<core::Cause> causes;
  std::string type_field = Child(field_prefix, "type");
  for (std::string& problem : machinery::IsQualifiedName(c.type)) {
    causes.push_back(machinery::FieldInvalid(type_field, Json(c.type), std::move(problem)));
  }
  if (c.status != kConditionTrue && c.status != kConditionFalse && c.status != kConditionUnknown) {
    causes.push_back(machinery::FieldNotSupported(Child(field_prefix, "status"), Json(c.status),
                                                  {"False", "True", "Unknown"}));
  }
  if (c.observed_generation < 0) {
    causes.push_back(machinery::FieldInvalid(Child(field_prefix, "observedGeneration"),
                                             Json(c.observed_generation),
                                             "must be greater than or equal to zero"));
  }
  std::string time_field = Child(field_prefix, "lastTransitionTime");
  if (c.last_transition_time.empty()) {
    causes.push_back(machinery::FieldRequired(time_field, "must be set"));
  } else if (!core::ParseTime(c.last_transition_time)) {
    causes.push_back(machinery::FieldInvalid(time_field, Json(c.last_transition_time),
                                             "must be an RFC 3339 time"));
  }
  AppendReasonCauses(c.reason, Child(field_prefix, "reason"), causes);
  if (c.message.size() > kMaxMessageLen) {
    causes.push_back(
        machinery::FieldTooLong(Child(field_prefix, "message"), Json(c.message), kMaxMessageLen));
  }
  return InvalidFields(std::move(causes));
}

// ---------------------------------------------------------------------------------------------
// Cluster-api style

Json SeverityConditionToJson(const SeverityCondition& c) {
  Json j = {{"type", c.type}, {"status", c.status}};
  if (!c.severity.empty()) j["severity"] = c.severity;
  // Go serialises a zero metav1.Time as null; the field itself is always present.
  j["lastTransitionTime"] =
      c.last_transition_time.empty() ? Json(nullptr) : Json(c.last_transition_time);
  if (!c.reason.empty()) j["reason"] = c.reason;
  if (!c.message.empty()) j["message"] = c.message;
  return j;
}

std::optional<SeverityCondition> SeverityConditionFromJson(const Json& entry) {
  if (!entry.is_object()) return std::nullopt;
  SeverityCondition c;
  c.type = Str(entry, "type");
  c.status = Str(entry, "status");
  c.severity = Str(entry, "severity");
  c.last_transition_time = Str(entry, "lastTransitionTime");
  c.reason = Str(entry, "reason");
  c.message = Str(entry, "message");
  return c;
}

bool HasSameState(const SeverityCondition& a, const SeverityCondition& b) {
  return a.type == b.type && a.status == b.status && a.reason == b.reason &&
         a.severity == b.severity && a.message == b.message;
}

bool SetSeverityCondition(Json& obj, SeverityCondition c, const core::Clock& clock) {
  Json& list = MutableConditions(obj);
  const Json before = list;
  Json* existing = nullptr;
  for (Json& e : list) {
    if (e.is_object() && Str(e, "type") == c.type) {
      existing = &e;
      break;
    }
  }
  if (existing) {
    // Same state: the entry stays as it is, old time included, so status patches do not flap.
    if (!HasSameState(*SeverityConditionFromJson(*existing), c)) {
      c.last_transition_time = Now(clock);
      *existing = SeverityConditionToJson(c);
    }
  } else {
    if (c.last_transition_time.empty()) c.last_transition_time = Now(clock);
    list.push_back(SeverityConditionToJson(c));
  }
  std::vector<Json> sorted(list.begin(), list.end());
  std::stable_sort(sorted.begin(), sorted.end(), ListOrder());
  list = Json(std::move(sorted));
  return list != before;
}

std::optional<SeverityCondition> FindSeverityCondition(const Json& obj, std::string_view type) {
  const Json* e = FindEntry(obj, type);
  return e ? SeverityConditionFromJson(*e) : std::nullopt;
}

bool MarkTrue(Json& obj, std::string_view type, const core::Clock& clock) {
  SeverityCondition c;
  c.type = std::string(type);
  c.status = std::string(kConditionTrue);
  return SetSeverityCondition(obj, std::move(c), clock);
}

bool MarkFalse(Json& obj, std::string_view type, std::string_view reason, std::string_view severity,
               std::string_view message, const core::Clock& clock) {
  SeverityCondition c;
  c.type = std::string(type);
  c.status = std::string(kConditionFalse);
  c.severity = std::string(severity);
  c.reason = std::string(reason);
  c.message = std::string(message);
  return SetSeverityCondition(obj, std::move(c), clock);
}

bool MarkUnknown(Json& obj, std::string_view type, std::string_view reason,
                 std::string_view message, const core::Clock& clock) {
  SeverityCondition c;
  c.type = std::string(type);
  c.status = std::string(kConditionUnknown);
  c.reason = std::string(reason);
  c.message = std::string(message);
  return SetSeverityCondition(obj, std::move(c), clock);
}

std::optional<SeverityCondition> ReadySummary(const Json& obj) {
  const Json* list = Conditions(obj);
  if (!list) return std::nullopt;
  struct Group {
    std::string status, severity;
    std::vector<SeverityCondition> members;
  };
  // Groups in order of first appearance; the stable sort below keeps that order between groups
  // of equal rank (only possible for rank 99 and for True with a stray severity), where the
  // spec is silent and cluster-api's unstable sort gives no guarantee either.
  std::vector<Group> groups;
  for (const Json& e : *list) {
    std::optional<SeverityCondition> c = SeverityConditionFromJson(e);
    if (!c || c->type == kReadyCondition) continue;
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
      return g.status == c->status && g.severity == c->severity;
    });
    if (g == groups.end()) {
      groups.push_back({c->status, c->severity, {}});
      g = groups.end() - 1;
    }
    g->members.push_back(std::move(*c));
  }
  if (groups.empty()) return std::nullopt;
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return MergePriority(a.status, a.severity) < MergePriority(b.status, b.severity);
  });
  Group& top = groups.front();

  SeverityCondition ready;
  ready.type = std::string(kReadyCondition);
  if (top.status == kConditionTrue) {
    ready.status = std::string(kConditionTrue);
    return ready;
  }
  std::stable_sort(top.members.begin(), top.members.end(),
                   [](const SeverityCondition& a, const SeverityCondition& b) {
                     return a.type < b.type;  // Ready is excluded, so plain type order
                   });
  const SeverityCondition& first = top.members.front();
  if (top.status == kConditionFalse) {
    ready.status = std::string(kConditionFalse);
    ready.severity = top.severity;
  } else {
    // Unknown, or a status outside the three values (cluster-api: UnknownCondition).
    ready.status = std::string(kConditionUnknown);
  }
  ready.reason = first.reason;
  ready.message = first.message;
  return ready;
}

bool SetSummary(Json& obj, const core::Clock& clock) {
  std::optional<SeverityCondition> ready = ReadySummary(obj);
  if (!ready) return false;
  return SetSeverityCondition(obj, std::move(*ready), clock);
}

}  // namespace klutch::reconcile
