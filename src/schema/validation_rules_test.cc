#include "schema/validation_rules.h"

#include <gtest/gtest.h>

#include "machinery/json.h"

namespace klutch::schema::validation_rules_test {
namespace {

Json Yaml(const char* text) {
  auto j = machinery::ParseYaml(text);
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j.ok() ? *j : Json();
}

std::shared_ptr<const ValidationRules> Rules(const char* schema_yaml,
                                             std::vector<core::Cause>* errors = nullptr) {
  auto schema = std::make_shared<Json>(Yaml(schema_yaml));
  std::vector<core::Cause> local;
  auto rules = ValidationRules::Compile(schema, *schema, "spec.versions[0].schema.openAPIV3Schema",
                                        errors ? *errors : local);
  if (!errors) {
    EXPECT_TRUE(local.empty()) << local[0].field << ": " << local[0].message;
  }
  return rules;
}

std::vector<std::string> Check(const ValidationRules& rules, const char* object,
                               const char* old = nullptr) {
  Json o = Yaml(object);
  Json old_json = old ? Yaml(old) : Json();
  std::vector<core::Cause> causes;
  rules.Validate(o, old ? &old_json : nullptr, causes);
  std::vector<std::string> out;
  for (const auto& c : causes) out.push_back(c.field + ": " + c.message);
  return out;
}

using Lines = std::vector<std::string>;

const char* kPlanSchema = R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "self.compositionRef.name == 'a' || self.plan != 'x'"
        message: Unsupported plan used for postgresql
    properties:
      compositionRef:
        type: object
        properties:
          name: {type: string}
      plan:
        type: string
        x-kubernetes-validations:
          - rule: "!(self.contains('small') && oldSelf.contains('big'))"
            message: Transition from bigger to smaller plan size is not supported.
      service:
        type: string
        x-kubernetes-validations:
          - rule: self == oldSelf
            message: Service is an immutable field
      size:
        type: integer
        x-kubernetes-validations:
          - rule: self >= 0
)y";

TEST(ValidationRules, ReportsFailedRulesAsKubeApiserverFormatsThem) {
  auto rules = Rules(kPlanSchema);
  EXPECT_EQ(rules->size(), 4u);
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: b}, plan: x, service: s}"),
            (Lines{"spec: Invalid value: \"object\": Unsupported plan used for postgresql; "
                   "supported values for spec.compositionRef.name: \"a\""}));
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a}, plan: x, size: -1}"),
            (Lines{"spec.size: Invalid value: \"integer\": failed rule: self >= 0"}));
  EXPECT_TRUE(Check(*rules, "spec: {compositionRef: {name: a}, plan: x}").empty());
}

TEST(ValidationRules, ReportsEvaluationErrorsWithTheRule) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "self.labels['tier'] == 'gold'"
        message: Only gold
    properties:
      labels:
        type: object
        additionalProperties: {type: string}
)y");
  EXPECT_EQ(Check(*rules, "spec: {labels: {a: b}}"),
            (Lines{"spec: Invalid value: \"object\": no such key: tier evaluating rule: Only "
                   "gold"}));
}

// Issue #23: the upstream PostgreSQL XRD's shape, a rule per backend listing its plans.
const char* kBackendSchema = R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "(self.compositionRef.name == 'a9s' && (self.service == 's13' ||
          self.service == 's15')) || (self.compositionRef.name == 'a8s' && self.service == 's13')"
        message: Unsupported service
      - rule: "(self.compositionRef.name == 'a9s' && (self.plan == 'p1' || self.plan == 'p2'))
          || (self.compositionRef.name == 'a8s' && self.plan in ['p3', 'p4'])"
        message: Unsupported plan
      - rule: "!has(self.size) || self.size >= 0"
        message: Negative size
      - rule: "!has(self.extra) || self.compositionRef.name == 'a8s'"
        message: extra is a8s only
    properties:
      compositionRef:
        type: object
        properties:
          name: {type: string}
      service: {type: string}
      plan: {type: string}
      size: {type: integer}
      extra: {type: string}
)y";

TEST(ValidationRules, FailedRuleNamesTheValuesItAccepts) {
  auto rules = Rules(kBackendSchema);
  const std::string kObj = "spec: Invalid value: \"object\": ";
  // A typo: the rule's message first, then the plans that pass with this composition.
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a8s}, service: s13, plan: p33}"),
            (Lines{kObj + "Unsupported plan; supported values for spec.plan: \"p3\", \"p4\""}));
  // A plan of the other backend: its own plans first, then the other way out.
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a9s}, service: s13, plan: p3}"),
            (Lines{kObj + "Unsupported plan; supported values for spec.plan: \"p1\", \"p2\" (or "
                          "spec.compositionRef.name: \"a8s\")"}));
  // a8s would mend this rule but break the service and plan rules that hold now: no value
  // is offered that trades one refusal for another.
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a9s}, service: s15, plan: p1, extra: x}"),
            (Lines{kObj + "extra is a8s only"}));
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a9s}, service: s13, plan: p1, extra: x}"),
            (Lines{kObj + "extra is a8s only"}));
  // A rule that compares with no constant, or that no change of one field mends, keeps its
  // message as it is.
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a8s}, service: s13, plan: p3, size: -1}"),
            (Lines{kObj + "Negative size"}));
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a8s}, service: s15, plan: p1}"),
            (Lines{kObj + "Unsupported service; supported values for spec.service: \"s13\" (or "
                          "spec.compositionRef.name: \"a9s\")",
                   kObj + "Unsupported plan; supported values for spec.plan: \"p3\", \"p4\" (or "
                          "spec.compositionRef.name: \"a9s\")"}));
}

TEST(ValidationRules, NamesNoValuesPastItsBudget) {
  // 300 constants: trying each would pass the 256 evaluations a request may spend naming
  // values, and a partial list would mislead; the rule's message stands alone.
  std::string list;
  for (int i = 0; i < 300; ++i) list += (i ? ", '" : "'") + std::to_string(i) + "'";
  std::string schema =
      "type: object\nproperties:\n  spec:\n    type: object\n"
      "    x-kubernetes-validations:\n      - rule: \"self.x in [" +
      list +
      "]\"\n        message: Unknown x\n"
      "    properties:\n      x: {type: string}\n";
  auto rules = Rules(schema.c_str());
  EXPECT_EQ(Check(*rules, "spec: {x: nope}"),
            (Lines{"spec: Invalid value: \"object\": Unknown x"}));
  // Within the budget the values are named.
  auto few = Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "self.x in ['a', 'b']"
        message: Unknown x
    properties:
      x: {type: string}
)y");
  EXPECT_EQ(Check(*few, "spec: {x: nope}"),
            (Lines{"spec: Invalid value: \"object\": Unknown x; supported values for spec.x: "
                   "\"a\", \"b\""}));
}

TEST(ValidationRules, AbsentFieldReadByRulesIsOneRequiredCause) {
  auto rules = Rules(kBackendSchema);
  // Both backend rules read compositionRef, which is not set: one cause naming the field,
  // the rules and the values with which all of them hold.
  EXPECT_EQ(Check(*rules, "spec: {service: s15, plan: p1}"),
            (Lines{"spec.compositionRef: Required value: rules \"Unsupported service\" and "
                   "\"Unsupported plan\" read spec.compositionRef.name: set it (supported values: "
                   "\"a9s\")"}));
  // A rule that fails whatever the absent field holds is reported on its own (CEL's &&
  // absorbs the error: `self.compositionRef.name == 'a9s' && false` is false).
  EXPECT_EQ(Check(*rules, "spec: {service: s13, plan: p9}"),
            (Lines{"spec.compositionRef: Required value: rule \"Unsupported service\" reads "
                   "spec.compositionRef.name: set it (supported values: \"a9s\", \"a8s\")",
                   "spec: Invalid value: \"object\": Unsupported plan"}));
  // No value satisfies every rule that reads the absent field: no values are offered.
  EXPECT_EQ(Check(*rules, "spec: {service: s15, plan: p3}"),
            (Lines{"spec.compositionRef: Required value: rules \"Unsupported service\" and "
                   "\"Unsupported plan\" read spec.compositionRef.name: set it"}));
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {}, service: s13, plan: p3}"),
            (Lines{"spec.compositionRef.name: Required value: rules \"Unsupported service\" and "
                   "\"Unsupported plan\" read spec.compositionRef.name: set it (supported "
                   "values: \"a8s\")"}));
}

TEST(ValidationRules, TransitionRulesRunOnlyOnUpdate) {
  auto rules = Rules(kPlanSchema);
  // On create oldSelf does not exist: the transition rules are skipped.
  EXPECT_TRUE(
      Check(*rules, "spec: {compositionRef: {name: a}, plan: single-small, service: s}").empty());
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a}, plan: single-small, service: t}",
                  "spec: {compositionRef: {name: a}, plan: single-big, service: s}"),
            (Lines{"spec.plan: Invalid value: \"string\": Transition from bigger to smaller plan "
                   "size is not supported.",
                   "spec.service: Invalid value: \"string\": Service is an immutable field"}));
  EXPECT_TRUE(Check(*rules, "spec: {compositionRef: {name: a}, plan: single-big, service: s}",
                    "spec: {compositionRef: {name: a}, plan: single-small, service: s}")
                  .empty());
}

TEST(ValidationRules, UnchangedInvalidValuesAreRatcheted) {
  auto rules = Rules(kPlanSchema);
  // size -1 was stored before the rule existed; an update that leaves it alone passes, with
  // the failure as a warning, as kube-apiserver reports it.
  Json object = Yaml("spec: {compositionRef: {name: a}, size: -1, plan: p}");
  Json old = Yaml("spec: {compositionRef: {name: a}, size: -1, plan: q}");
  std::vector<core::Cause> causes;
  std::vector<std::string> warnings;
  rules->Validate(object, &old, causes, &warnings);
  EXPECT_TRUE(causes.empty());
  EXPECT_EQ(warnings, (Lines{"spec.size: Invalid value: \"integer\": failed rule: self >= 0"}));
  EXPECT_EQ(Check(*rules, "spec: {compositionRef: {name: a}, size: -2}",
                  "spec: {compositionRef: {name: a}, size: -1}"),
            (Lines{"spec.size: Invalid value: \"integer\": failed rule: self >= 0"}));
}

TEST(ValidationRules, HonoursReasonFieldPathAndMessageExpression) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: self.replicas <= self.max
        messageExpression: "'replicas ' + string(self.replicas) + ' above ' + string(self.max)"
        fieldPath: .replicas
        reason: FieldValueForbidden
      - rule: has(self.name)
        reason: FieldValueRequired
        message: name is required
    properties:
      replicas: {type: integer}
      max: {type: integer}
      name: {type: string}
)y");
  EXPECT_EQ(Check(*rules, "spec: {replicas: 5, max: 3}"),
            (Lines{"spec.replicas: Forbidden: replicas 5 above 3",
                   "spec: Required value: name is required"}));
}

TEST(ValidationRules, OptionalOldSelfRunsOnCreateToo) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    properties:
      mode:
        type: string
        x-kubernetes-validations:
          - rule: "oldSelf.hasValue() ? self == oldSelf.value() : self == 'initial'"
            optionalOldSelf: true
            message: must start as initial and never change
)y");
  EXPECT_EQ(
      Check(*rules, "spec: {mode: other}"),
      (Lines{"spec.mode: Invalid value: \"string\": must start as initial and never change"}));
  EXPECT_TRUE(Check(*rules, "spec: {mode: initial}").empty());
  EXPECT_EQ(Check(*rules, "spec: {mode: x}", "spec: {mode: initial}").size(), 1u);
}

TEST(ValidationRules, TypesValuesByTheirSchema) {
  auto rules = Rules(R"y(
type: object
x-kubernetes-validations:
  - rule: "self.metadata.name.startsWith('ok')"
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "type(self.ratio) == double && type(self.count) == int"
      - rule: "self.created < timestamp('2030-01-01T00:00:00Z') && self.timeout == duration('5s')"
      - rule: "self.my__dash__field == 'v' && self.__namespace__ == 'n'"
      - rule: "self.tags == ['b', 'a']"
      - rule: "self.ports.all(p, p.port > 0) && self.labels.all(k, self.labels[k] != '')"
    properties:
      ratio: {type: number}
      count: {type: integer}
      created: {type: string, format: date-time}
      timeout: {type: string, format: duration}
      my-field: {type: string}
      namespace: {type: string}
      tags:
        type: array
        x-kubernetes-list-type: set
        items: {type: string}
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          properties:
            name: {type: string}
            port: {type: integer}
      labels:
        type: object
        additionalProperties: {type: string}
)y");
  EXPECT_TRUE(Check(*rules, R"y(
metadata: {name: ok-1, labels: {a: b}}
spec:
  ratio: 2
  count: 3
  created: "2024-05-01T10:00:00Z"
  timeout: 5s
  my-field: v
  namespace: n
  tags: [a, b]
  ports: [{name: http, port: 80}]
  labels: {x: y}
)y")
                  .empty());
  EXPECT_EQ(Check(*rules, "metadata: {name: bad}").size(), 1u);
}

TEST(ValidationRules, CorrelatesListMapItemsByKey) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    properties:
      ports:
        type: array
        x-kubernetes-list-type: map
        x-kubernetes-list-map-keys: [name]
        items:
          type: object
          properties:
            name: {type: string}
            port:
              type: integer
              x-kubernetes-validations:
                - rule: self >= oldSelf
                  message: ports only grow
)y");
  // Reordered items are matched by name: 80 -> 81 and 90 -> 70 (rejected at its new index).
  EXPECT_EQ(Check(*rules, "spec: {ports: [{name: b, port: 70}, {name: a, port: 81}]}",
                  "spec: {ports: [{name: a, port: 80}, {name: b, port: 90}]}"),
            (Lines{"spec.ports[0].port: Invalid value: \"integer\": ports only grow"}));
  // A new item has no old value: its transition rule does not run.
  EXPECT_TRUE(
      Check(*rules, "spec: {ports: [{name: c, port: 1}]}", "spec: {ports: [{name: a, port: 80}]}")
          .empty());
}

TEST(ValidationRules, StopsRunawayRulesWithTheCostLimit) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "self.items.all(a, self.items.all(b, self.items.all(c, a + b + c >= 0)))"
    properties:
      items:
        type: array
        items: {type: integer}
)y");
  std::string items;
  for (int i = 0; i < 150; ++i) items += (i ? "," : "") + std::to_string(i);
  std::string obj = "spec: {items: [" + items + "]}";
  auto lines = Check(*rules, obj.c_str());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0],
            "spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': "
            "no further validation rules will be run due to call cost exceeds limit for rule: "
            "self.items.all(a, self.items.all(b, self.items.all(c, a + b + c >= 0)))");
}

TEST(ValidationRules, ReportsBadRulesWhenTheCrdIsWritten) {
  std::vector<core::Cause> errors;
  Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "self.foo ==="
      - rule: "nope > 1"
      - rule: "self.a > 0"
        reason: Wrong
      - rule: "self.a > 0"
        fieldPath: .missing
      - rule: "self.a > 0"
        optionalOldSelf: true
      - rule: "self.b == 1"
      - rule: "self.a.x == 1"
      - rule: "self.a == 1"
        fieldPath: ".a"
      - rule: "self.m.anything == 'v' && self.free.x.y == 1 && self.all(k, k != '')"
    properties:
      a: {type: integer}
      m:
        type: object
        additionalProperties: {type: string}
      free:
        type: object
        x-kubernetes-preserve-unknown-fields: true
)y",
        &errors);
  ASSERT_EQ(errors.size(), 7u);
  const std::string base =
      "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
  EXPECT_EQ(errors[0].field, base + "[0].rule");
  EXPECT_NE(errors[0].message.find("compilation failed: ERROR: <input>:1:"), std::string::npos)
      << errors[0].message;
  EXPECT_EQ(errors[1].field, base + "[1].rule");
  EXPECT_NE(errors[1].message.find("undeclared reference to 'nope'"), std::string::npos);
  EXPECT_EQ(errors[2].field, base + "[2].reason");
  EXPECT_EQ(errors[2].message,
            "Unsupported value: \"Wrong\": supported values: \"FieldValueDuplicate\", "
            "\"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"");
  EXPECT_EQ(errors[3].field, base + "[3].fieldPath");
  EXPECT_EQ(errors[4].field, base + "[4].optionalOldSelf");
  EXPECT_EQ(errors[5].field, base + "[5].rule");
  EXPECT_TRUE(errors[5].message.ends_with(
      "compilation failed: ERROR: <input>:1:5: undefined field 'b'\n | self.b == 1\n | ....^"))
      << errors[5].message;
  EXPECT_NE(errors[6].message.find("ERROR: <input>:1:7: type 'int' does not support field "
                                   "selection"),
            std::string::npos)
      << errors[6].message;
}

TEST(ValidationRules, BlockingSchemaErrorsSkipRules) {
  std::vector<core::Cause> causes = {
      {"FieldValueNotSupported", "Unsupported value: \"x\"", "spec.a"}};
  EXPECT_TRUE(HasBlockingError(causes));
  EXPECT_FALSE(HasBlockingError({{"FieldValueInvalid", "Invalid value", "spec.a"}}));
  EXPECT_EQ(RulesNotCheckedCause().field, "<nil>");
}

}  // namespace
}  // namespace klutch::schema::validation_rules_test

namespace klutch::schema::validation_rules_test {
namespace {

TEST(ValidationRules, RootMetadataExposesOnlyNameAndGenerateName) {
  std::vector<core::Cause> errors;
  Rules(R"y(
type: object
x-kubernetes-validations:
  - rule: "self.metadata.name != '' && self.metadata.generateName == ''"
  - rule: "has(self.metadata.labels)"
)y",
        &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field,
            "spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[1].rule");
  EXPECT_NE(errors[0].message.find("undefined field 'labels'"), std::string::npos);
}

}  // namespace
}  // namespace klutch::schema::validation_rules_test

namespace klutch::schema::validation_rules_test {
namespace {

TEST(ValidationRules, RejectsOldSelfWhereOldValuesCannotBeCorrelated) {
  std::vector<core::Cause> errors;
  Rules(R"y(
type: object
properties:
  atomic:
    type: array
    items:
      type: object
      properties:
        v:
          type: integer
          x-kubernetes-validations:
            - rule: self >= oldSelf
  keyed:
    type: array
    x-kubernetes-list-type: map
    x-kubernetes-list-map-keys: [k]
    items:
      type: object
      properties:
        k: {type: string}
        v:
          type: integer
          x-kubernetes-validations:
            - rule: self >= oldSelf
)y",
        &errors);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].field,
            "spec.versions[0].schema.openAPIV3Schema.properties[atomic].items.properties[v]."
            "x-kubernetes-validations[0].rule");
  EXPECT_EQ(errors[0].message,
            "Invalid value: \"self >= oldSelf\": oldSelf cannot be used on the uncorrelatable "
            "portion of the schema within "
            "spec.versions[0].schema.openAPIV3Schema.properties[atomic]");
}

}  // namespace
}  // namespace klutch::schema::validation_rules_test

namespace klutch::schema::validation_rules_test {
namespace {

TEST(ValidationRules, RulesMustEvaluateToABool) {
  std::vector<core::Cause> errors;
  Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-validations:
      - rule: "self.replicas"
      - rule: "self.replicas + 1"
      - rule: "'text'"
      - rule: "self.enabled"
    properties:
      replicas: {type: integer}
      enabled: {type: boolean}
)y",
        &errors);
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) {
    EXPECT_TRUE(e.message.ends_with(": cel expression must evaluate to a bool")) << e.message;
  }
}

TEST(ValidationRules, NullsAndUndeclaredFieldsAreInvisibleToRules) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    x-kubernetes-preserve-unknown-fields: true
    x-kubernetes-validations:
      - rule: "!has(self.gone) && self == {'a': 1}"
        message: spec sees only a
    properties:
      a: {type: integer}
      gone:
        type: string
        nullable: true
        x-kubernetes-validations:
          - rule: "self.size() > 0"
)y");
  // `extra` is kept by preserve-unknown-fields but not declared: rules do not see it; a
  // null property is absent, and its own rules do not run.
  EXPECT_TRUE(Check(*rules, "spec: {a: 1, extra: 2, gone: null}").empty());
  EXPECT_EQ(Check(*rules, "spec: {a: 2}").size(), 1u);
}

TEST(ValidationRules, OverloadErrorsAtRuntimeUseKubernetesWording) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    properties:
      port:
        x-kubernetes-int-or-string: true
        x-kubernetes-validations:
          - rule: "self > 1024"
)y");
  EXPECT_EQ(Check(*rules, "spec: {port: http}"),
            (Lines{"spec.port: Invalid value: \"\": 'no such overload': call arguments did not "
                   "match a supported operator, function or macro signature for rule: self > "
                   "1024"}));
}

}  // namespace
}  // namespace klutch::schema::validation_rules_test

namespace klutch::schema::validation_rules_test {
namespace {

TEST(ValidationRules, ItemsOfAtomicListsRatchetOnTheirUnchangedList) {
  auto rules = Rules(R"y(
type: object
properties:
  spec:
    type: object
    properties:
      hosts:
        type: array
        items:
          type: string
          x-kubernetes-validations:
            - rule: "self.endsWith('.example.com')"
              message: hosts must be in example.com
      replicas: {type: integer}
)y");
  Json old = Yaml("spec: {hosts: [a.other.org], replicas: 1}");
  Json same_list = Yaml("spec: {hosts: [a.other.org], replicas: 2}");
  Json changed_list = Yaml("spec: {hosts: [a.other.org, b.example.com], replicas: 2}");
  std::vector<core::Cause> causes;
  std::vector<std::string> warnings;
  rules->Validate(same_list, &old, causes, &warnings);
  EXPECT_TRUE(causes.empty());
  EXPECT_EQ(warnings.size(), 1u);
  causes.clear();
  rules->Validate(changed_list, &old, causes, &warnings);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].field, "spec.hosts[0]");
}

}  // namespace
}  // namespace klutch::schema::validation_rules_test
