#include "reconcile/conditions.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace klutch::reconcile::conditions_test {
namespace {

constexpr const char* kNow = "2026-11-22T05:02:18Z";
constexpr const char* kOld = "2020-01-01T00:00:00Z";

core::FakeClock NowClock() { return core::FakeClock(*core::ParseTime(kNow)); }

// {"status": {"conditions": <conditions>}} from JSON text.
Json Obj(const std::string& conditions) {
  return Json{{"status", {{"conditions", Json::parse(conditions)}}}};
}

Json ConditionsOf(const Json& obj) { return obj["status"]["conditions"]; }

// ---------------------------------------------------------------------------------------------
// metav1.Condition

TEST(SetCondition, FollowsMetav1TransitionRules) {
  struct Case {
    std::string name;
    Json obj;
    Condition set;
    std::string want;  // status.conditions after
    bool changed;
  };
  const std::string a_true_old = R"({"type":"A","status":"True","lastTransitionTime":")" +
                                 std::string(kOld) +
                                 R"(","reason":"Fine","message":"ok","observedGeneration":2})";
  std::vector<Case> cases = {
      {"new condition on an object without status is stamped now",
       Json{{"metadata", {{"name", "x"}}}},
       {"A", "True", 3, "", "Fine", "ok"},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + std::string(kNow) +
           R"(","reason":"Fine","message":"ok","observedGeneration":3}])",
       true},
      {"new condition keeps a supplied time",
       Obj("[]"),
       {"A", "False", 0, kOld, "Broken", ""},
       R"([{"type":"A","status":"False","lastTransitionTime":")" + std::string(kOld) +
           R"(","reason":"Broken","message":""}])",
       true},
      {"same status: reason, message, generation change but the time stays",
       Obj("[" + a_true_old + "]"),
       {"A", "True", 5, "", "StillFine", "better"},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + std::string(kOld) +
           R"(","reason":"StillFine","message":"better","observedGeneration":5}])",
       true},
      {"status change moves the time to now",
       Obj("[" + a_true_old + "]"),
       {"A", "False", 2, "", "Broken", "no"},
       R"([{"type":"A","status":"False","lastTransitionTime":")" + std::string(kNow) +
           R"(","reason":"Broken","message":"no","observedGeneration":2}])",
       true},
      {"status change with a supplied time uses it",
       Obj("[" + a_true_old + "]"),
       {"A", "Unknown", 2, "2021-05-05T05:05:05Z", "Fine", "ok"},
       R"([{"type":"A","status":"Unknown","lastTransitionTime":"2021-05-05T05:05:05Z",)"
       R"("reason":"Fine","message":"ok","observedGeneration":2}])",
       true},
      {"identical condition changes nothing",
       Obj("[" + a_true_old + "]"),
       {"A", "True", 2, "", "Fine", "ok"},
       "[" + a_true_old + "]",
       false},
      {"observedGeneration 0 is omitted",
       Obj("[" + a_true_old + "]"),
       {"A", "True", 0, "", "Fine", "ok"},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + std::string(kOld) +
           R"(","reason":"Fine","message":"ok"}])",
       true},
      {"order is kept and unknown fields survive",
       Obj(R"([{"type":"B","status":"True","lastTransitionTime":"2020-01-01T00:00:00Z",)"
           R"("reason":"R","message":"","x-extra":1},)" +
           a_true_old + "]"),
       {"B", "True", 0, "", "R2", ""},
       R"([{"type":"B","status":"True","lastTransitionTime":"2020-01-01T00:00:00Z",)"
       R"("reason":"R2","message":"","x-extra":1},)" +
           a_true_old + "]",
       true},
      {"a mistyped list is replaced",
       Json{{"status", {{"conditions", "oops"}}}},
       {"A", "True", 0, kOld, "Fine", ""},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + std::string(kOld) +
           R"(","reason":"Fine","message":""}])",
       true},
  };
  auto clock = NowClock();
  for (auto& c : cases) {
    Json obj = c.obj;
    EXPECT_EQ(SetCondition(obj, c.set, clock), c.changed) << c.name;
    EXPECT_EQ(ConditionsOf(obj), Json::parse(c.want)) << c.name << "\n got " << ConditionsOf(obj);
  }
}

TEST(SetCondition, CutsAMessageToWhatMetav1AllowsOnACharacterBoundary) {
  core::FakeClock clock = NowClock();
  Json obj = Json::object();
  // "é" is two bytes: the cut must not split one.
  std::string huge;
  for (int i = 0; i < 20000; ++i) huge += "\xc3\xa9";
  SetCondition(obj, {.type = "Ready", .status = "False", .reason = "R", .message = huge}, clock);
  std::string got = FindCondition(obj, "Ready")->message;
  EXPECT_LE(got.size(), 32u * 1024);
  EXPECT_TRUE(got.ends_with(" ...")) << got.substr(got.size() - 10);
  EXPECT_EQ(got.substr(0, got.size() - 4).size() % 2, 0u) << "a UTF-8 character was split";
  EXPECT_TRUE(ValidateCondition(*FindCondition(obj, "Ready")).ok());
  SetCondition(obj, {.type = "Ready", .status = "False", .reason = "R", .message = "short"}, clock);
  EXPECT_EQ(FindCondition(obj, "Ready")->message, "short");
}

TEST(FindCondition, ReadsTypedFieldsAndToleratesJunk) {
  Json obj = Obj(R"([7, {"type":"A","status":"True","observedGeneration":4,"reason":"R",
                     "message":"m","lastTransitionTime":"2020-01-01T00:00:00Z"},
                     {"type":"B","status":false}])");
  auto a = FindCondition(obj, "A");
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (Condition{"A", "True", 4, kOld, "R", "m"}));
  auto b = FindCondition(obj, "B");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, "") << "mistyped fields read as empty";
  EXPECT_FALSE(FindCondition(obj, "C"));
  EXPECT_FALSE(FindCondition(Json{{"status", 3}}, "A"));
  EXPECT_EQ(ConditionFromJson(ConditionToJson(*a)), a);
}

TEST(ConditionPredicates, ReadStatusOfEitherStyle) {
  Json obj = Obj(R"([{"type":"T","status":"True"},{"type":"F","status":"False","severity":"Info"},
                     {"type":"U","status":"Unknown"}])");
  EXPECT_TRUE(IsConditionTrue(obj, "T"));
  EXPECT_FALSE(IsConditionTrue(obj, "F"));
  EXPECT_FALSE(IsConditionTrue(obj, "missing"));
  EXPECT_TRUE(IsConditionFalse(obj, "F"));
  EXPECT_TRUE(IsConditionUnknown(obj, "U"));
  EXPECT_EQ(ConditionStatus(obj, "missing"), "");
  EXPECT_FALSE(IsConditionTrue(Json(), "T"));
}

TEST(RemoveCondition, RemovesOnlyThatTypeAndReportsIt) {
  Json obj = Obj(R"([{"type":"A","status":"True"}, "junk", {"type":"B","status":"True"}])");
  EXPECT_TRUE(RemoveCondition(obj, "A"));
  EXPECT_EQ(ConditionsOf(obj), Json::parse(R"(["junk", {"type":"B","status":"True"}])"));
  EXPECT_FALSE(RemoveCondition(obj, "A"));
  Json bare = Json{{"metadata", Json::object()}};
  EXPECT_FALSE(RemoveCondition(bare, "A"));
  EXPECT_EQ(bare, (Json{{"metadata", Json::object()}})) << "nothing created";
}

TEST(ValidateConditionReason, AcceptsMetav1CamelCaseReasons) {
  for (const char* ok : {"A", "a", "MyReason", "my_name", "MY_NAME", "ReasonA,ReasonB",
                         "ReasonA:ReasonB", "A_", "Reason1", "a:b,c_d"}) {
    EXPECT_TRUE(ValidateConditionReason(ok).ok()) << ok;
  }
}

TEST(ValidateConditionReason, RejectsWithApimachineryWording) {
  struct Case {
    std::string reason;
    std::string cause;  // the cause's reason
  };
  std::vector<Case> cases = {
      {"", "FieldValueRequired"},         {"1Reason", "FieldValueInvalid"},
      {"Reason.", "FieldValueInvalid"},   {"Reason-A", "FieldValueInvalid"},
      {"Reason,", "FieldValueInvalid"},   {"Reason:", "FieldValueInvalid"},
      {"_Reason", "FieldValueInvalid"},   {" Reason", "FieldValueInvalid"},
      {"Has Space", "FieldValueInvalid"}, {std::string(1025, 'A'), "FieldValueTooLong"},
  };
  for (const auto& c : cases) {
    core::Status s = ValidateConditionReason(c.reason);
    ASSERT_TRUE(IsInvalid(s)) << c.reason;
    ASSERT_TRUE(s.details());
    ASSERT_EQ(s.details()->causes.size(), 1u) << c.reason;
    EXPECT_EQ(s.details()->causes[0].reason, c.cause) << c.reason;
    EXPECT_EQ(s.details()->causes[0].field, "reason");
  }
  EXPECT_EQ(ValidateConditionReason("my-reason", "status.conditions[0].reason").message(),
            "status.conditions[0].reason: Invalid value: \"my-reason\": a condition reason must "
            "start with alphabetic character, optionally followed by a string of alphanumeric "
            "characters or '_,:', and must end with an alphanumeric character or '_' (e.g. "
            "'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or "
            "'ReasonA:ReasonB', regex used for validation is "
            "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')");
  EXPECT_EQ(ValidateConditionReason("").message(), "reason: Required value: must be set");
}

TEST(ValidateCondition, ListsEveryProblemUnderThePrefix) {
  EXPECT_TRUE(ValidateCondition({"Ready", "True", 1, kNow, "AllGood", "fine"}).ok());
  EXPECT_TRUE(ValidateCondition({"example.com/Ready", "Unknown", 0, kNow, "Wait", ""}).ok());

  core::Status s = ValidateCondition({"bad type!", "Maybe", -1, "", "", std::string(40000, 'm')},
                                     "status.conditions[1]");
  ASSERT_TRUE(IsInvalid(s));
  std::vector<std::string> fields;
  for (const auto& c : s.details()->causes) fields.push_back(c.field);
  EXPECT_EQ(fields, (std::vector<std::string>{
                        "status.conditions[1].type", "status.conditions[1].status",
                        "status.conditions[1].observedGeneration",
                        "status.conditions[1].lastTransitionTime", "status.conditions[1].reason",
                        "status.conditions[1].message"}));
  EXPECT_NE(s.message().find("status.conditions[1].status: Unsupported value: \"Maybe\": "
                             "supported values: \"False\", \"True\", \"Unknown\""),
            std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().front(), '[');

  core::Status bad_time = ValidateCondition({"Ready", "True", 0, "yesterday", "R", ""});
  ASSERT_TRUE(IsInvalid(bad_time));
  EXPECT_EQ(bad_time.details()->causes[0].field, "lastTransitionTime");
}

// ---------------------------------------------------------------------------------------------
// Cluster-api style (bind-protocol.md §1.0.2)

TEST(SetSeverityCondition, FollowsProtocolSetterRules) {
  struct Case {
    std::string name;
    std::string before;  // status.conditions
    SeverityCondition set;
    std::string want;
    bool changed;
  };
  const std::string now = kNow, old = kOld;
  std::vector<Case> cases = {
      {"new condition is stamped now",
       "[]",
       {"A", "False", "Error", "", "Broken", "it broke"},
       R"([{"type":"A","status":"False","severity":"Error","lastTransitionTime":")" + now +
           R"(","reason":"Broken","message":"it broke"}])",
       true},
      {"new condition keeps a supplied time",
       "[]",
       {"A", "True", "", old, "", ""},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + old + R"("}])",
       true},
      {"same state keeps the old time and the entry untouched",
       R"([{"type":"A","status":"False","severity":"Info","lastTransitionTime":")" + old +
           R"(","reason":"Wait","message":"m","x-extra":true}])",
       {"A", "False", "Info", "", "Wait", "m"},
       R"([{"type":"A","status":"False","severity":"Info","lastTransitionTime":")" + old +
           R"(","reason":"Wait","message":"m","x-extra":true}])",
       false},
      {"a message change alone moves the time",
       R"([{"type":"A","status":"False","severity":"Info","lastTransitionTime":")" + old +
           R"(","reason":"Wait","message":"m"}])",
       {"A", "False", "Info", "", "Wait", "m2"},
       R"([{"type":"A","status":"False","severity":"Info","lastTransitionTime":")" + now +
           R"(","reason":"Wait","message":"m2"}])",
       true},
      {"a severity change alone moves the time",
       R"([{"type":"A","status":"False","severity":"Info","lastTransitionTime":")" + old +
           R"(","reason":"Wait"}])",
       {"A", "False", "Error", "", "Wait", ""},
       R"([{"type":"A","status":"False","severity":"Error","lastTransitionTime":")" + now +
           R"(","reason":"Wait"}])",
       true},
      {"on change a supplied time is ignored",
       R"([{"type":"A","status":"False","severity":"Info","lastTransitionTime":")" + old +
           R"(","reason":"Wait"}])",
       {"A", "True", "", "2021-05-05T05:05:05Z", "", ""},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + now + R"("}])",
       true},
      {"list sorted: Ready first, then by type; junk last",
       R"(["junk",{"type":"C","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"Ready","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"A","status":"True","lastTransitionTime":")" + old + R"("}])",
       {"B", "True", "", old, "", ""},
       R"([{"type":"Ready","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"A","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"B","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"C","status":"True","lastTransitionTime":")" + old + R"("},"junk"])",
       true},
      {"same state but unsorted: only the order changes",
       R"([{"type":"B","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"A","status":"True","lastTransitionTime":")" + old + R"("}])",
       {"B", "True", "", "", "", ""},
       R"([{"type":"A","status":"True","lastTransitionTime":")" + old +
           R"("},{"type":"B","status":"True","lastTransitionTime":")" + old + R"("}])",
       true},
  };
  auto clock = NowClock();
  for (auto& c : cases) {
    Json obj = Obj(c.before);
    EXPECT_EQ(SetSeverityCondition(obj, c.set, clock), c.changed) << c.name;
    EXPECT_EQ(ConditionsOf(obj), Json::parse(c.want)) << c.name << "\n got " << ConditionsOf(obj);
  }
}

TEST(MarkCondition, ProducesTheProtocolShapes) {
  auto clock = NowClock();
  Json obj = Json::object();
  EXPECT_TRUE(MarkTrue(obj, "Connected", clock));
  EXPECT_TRUE(MarkFalse(obj, "ExportsReady", "CRDNotFound", kSeverityError, "no CRD", clock));
  EXPECT_TRUE(MarkUnknown(obj, "Healthy", "Probing", "waiting", clock));
  EXPECT_FALSE(MarkTrue(obj, "Connected", clock)) << "same state: no change";
  EXPECT_EQ(ConditionsOf(obj), Json::parse(std::string(R"([
      {"type":"Connected","status":"True","lastTransitionTime":")") +
                                           kNow + R"("},
      {"type":"ExportsReady","status":"False","severity":"Error","lastTransitionTime":")" +
                                           kNow + R"(","reason":"CRDNotFound","message":"no CRD"},
      {"type":"Healthy","status":"Unknown","lastTransitionTime":")" +
                                           kNow + R"(","reason":"Probing","message":"waiting"}])"));
  auto found = FindSeverityCondition(obj, "ExportsReady");
  ASSERT_TRUE(found);
  EXPECT_EQ(*found,
            (SeverityCondition{"ExportsReady", "False", "Error", kNow, "CRDNotFound", "no CRD"}));
  EXPECT_EQ(SeverityConditionFromJson(SeverityConditionToJson(*found)), found);
  EXPECT_FALSE(FindSeverityCondition(obj, "Ready"));
}

// ---------------------------------------------------------------------------------------------
// Ready summary (bind-protocol.md §1.0.3)

// One condition as JSON text: type, status, severity, reason, message.
std::string C(const std::string& type, const std::string& status, const std::string& severity = "",
              const std::string& reason = "", const std::string& message = "") {
  Json j = SeverityConditionToJson({type, status, severity, kOld, reason, message});
  return j.dump();
}

std::string List(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? "," : "") + items[i];
  return s + "]";
}

TEST(ReadySummary, FollowsTheSpecRules) {
  struct Case {
    std::string name;
    std::string conditions;
    std::optional<SeverityCondition> want;  // time never set
  };
  using S = SeverityCondition;
  std::vector<Case> cases = {
      // Rule 2.
      {"no conditions: no Ready", "[]", std::nullopt},
      {"only Ready itself: no Ready", List({C("Ready", "False", "Error", "Old", "old")}),
       std::nullopt},
      // Rule 3: True carries nothing but type and status.
      {"all True", List({C("A", "True"), C("B", "True", "", "Ignored", "ignored")}),
       S{"Ready", "True", "", "", "", ""}},
      // "Consequences worth testing" (verbatim from the spec).
      {"a True condition outranks Unknown ones",
       List({C("A", "Unknown", "", "Waiting", "w"), C("B", "True")}),
       S{"Ready", "True", "", "", "", ""}},
      {"False with empty severity (99) is outranked by any True",
       List({C("A", "False", "", "Broken", "b"), C("B", "True")}),
       S{"Ready", "True", "", "", "", ""}},
      // Rule 1 priorities.
      {"Error outranks Warning and Info",
       List({C("A", "False", "Info", "I", "i"), C("B", "False", "Warning", "W", "w"),
             C("C", "False", "Error", "E", "e"), C("D", "True")}),
       S{"Ready", "False", "Error", "", "E", "e"}},
      {"Warning outranks Info",
       List({C("A", "False", "Info", "I", "i"), C("B", "False", "Warning", "W", "w")}),
       S{"Ready", "False", "Warning", "", "W", "w"}},
      {"False/Info outranks True",
       List({C("A", "True"), C("B", "False", "Info", "Pending", "Pending")}),
       S{"Ready", "False", "Info", "", "Pending", "Pending"}},
      {"Unknown outranks False with empty severity",
       List({C("A", "False", "", "Broken", "b"), C("B", "Unknown", "", "Waiting", "w")}),
       S{"Ready", "Unknown", "", "", "Waiting", "w"}},
      // Rule 4.
      {"only False with empty severity: False without severity",
       List({C("A", "False", "", "Broken", "b")}), S{"Ready", "False", "", "", "Broken", "b"}},
      {"only Unknown: Unknown with the first by type",
       List({C("Zeta", "Unknown", "", "Z", "z"), C("Alpha", "Unknown", "", "A", "a")}),
       S{"Ready", "Unknown", "", "", "A", "a"}},
      {"top group ordered by type even when the list is not",
       List({C("Zeta", "False", "Error", "Z", "z"), C("Beta", "False", "Error", "B", "b")}),
       S{"Ready", "False", "Error", "", "B", "b"}},
      {"an unknown status ranks 99 and summarises as Unknown",
       List({C("A", "Maybe", "", "Odd", "o")}), S{"Ready", "Unknown", "", "", "Odd", "o"}},
      {"an unknown severity ranks 99 below True", List({C("A", "False", "Fatal"), C("B", "True")}),
       S{"Ready", "True", "", "", "", ""}},
      {"the old Ready does not take part",
       List({C("Ready", "False", "Error", "Old", "old"), C("A", "True")}),
       S{"Ready", "True", "", "", "", ""}},
      // Shapes the protocol writes (§4): export status without a binding.
      {"export without binding",
       List({C("ConsumerInSync", "False", "Info", "NA", ""),
             C("Connected", "False", "Info", "APIServiceBindingNotFound", "no binding")}),
       S{"Ready", "False", "Info", "", "APIServiceBindingNotFound", "no binding"}},
      {"export request with a missing CRD",
       List({C("ExportsReady", "False", "Error", "CRDNotFound", "crd x not found")}),
       S{"Ready", "False", "Error", "", "CRDNotFound", "crd x not found"}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ReadySummary(Obj(c.conditions)), c.want) << c.name;
  }
  EXPECT_EQ(ReadySummary(Json::object()), std::nullopt);
}

TEST(SetSummary, StampsReadyFirstAndKeepsItsTimeWhileUnchanged) {
  core::FakeClock clock(*core::ParseTime(kOld));
  Json obj = Json::object();
  ASSERT_TRUE(MarkFalse(obj, "Connected", "Pending", kSeverityInfo, "Pending", clock));
  ASSERT_TRUE(MarkTrue(obj, "Available", clock));
  EXPECT_TRUE(SetSummary(obj, clock));
  EXPECT_EQ(ConditionsOf(obj)[0],
            Json::parse(std::string(R"({"type":"Ready","status":"False","severity":"Info",)") +
                        R"("lastTransitionTime":")" + kOld +
                        R"(","reason":"Pending","message":"Pending"})"));

  clock.Advance(std::chrono::hours(1));
  EXPECT_FALSE(SetSummary(obj, clock)) << "same summary: no change, old time kept";
  EXPECT_EQ(FindSeverityCondition(obj, "Ready")->last_transition_time, kOld);

  ASSERT_TRUE(MarkTrue(obj, "Connected", clock));
  EXPECT_TRUE(SetSummary(obj, clock));
  auto ready = FindSeverityCondition(obj, "Ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(*ready,
            (SeverityCondition{"Ready", "True", "", core::FormatTime(clock.Now()), "", ""}));
  EXPECT_EQ(ConditionsOf(obj).size(), 3u);
}

TEST(SetSummary, WithoutOtherConditionsLeavesReadyAlone) {
  auto clock = NowClock();
  Json obj = Obj(List({C("Ready", "False", "Error", "Stale", "stale")}));
  Json before = obj;
  EXPECT_FALSE(SetSummary(obj, clock));
  EXPECT_EQ(obj, before);
  Json empty = Json::object();
  EXPECT_FALSE(SetSummary(empty, clock));
  EXPECT_EQ(empty, Json::object()) << "no status created";
}

}  // namespace
}  // namespace klutch::reconcile::conditions_test
