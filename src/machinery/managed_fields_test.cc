#include "machinery/managed_fields.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test/support/json_text.h"

namespace klutch::machinery::managed_fields_test {
namespace {

using fixture::J;

// An OpenAPI v3 document in the shape kube-apiserver serves: kinds refer to shared types
// through $ref (some wrapped in allOf), list and map semantics in x-kubernetes-* extensions.
const Json& OpenApi() {
  static const Json* doc = new Json(J(R"({"components":{"schemas":{
    "ObjectMeta": {"type": "object", "properties": {
      "name": {"type": "string"}, "namespace": {"type": "string"},
      "uid": {"type": "string"}, "resourceVersion": {"type": "string"},
      "creationTimestamp": {"type": "string"},
      "labels": {"type": "object", "additionalProperties": {"type": "string"}},
      "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
      "finalizers": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-list-type": "set"},
      "managedFields": {"type": "array", "items": {"type": "object"}}}},
    "ConfigMap": {"type": "object", "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"allOf": [{"$ref": "#/components/schemas/ObjectMeta"}], "default": {}},
      "data": {"type": "object", "additionalProperties": {"type": "string"}}}},
    "Service": {"type": "object", "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"$ref": "#/components/schemas/ObjectMeta"},
      "spec": {"allOf": [{"$ref": "#/components/schemas/ServiceSpec"}]},
      "status": {"type": "object", "properties": {"phase": {"type": "string"}}}}},
    "ServiceSpec": {"type": "object", "properties": {
      "ports": {"type": "array", "items": {"$ref": "#/components/schemas/ServicePort"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"]},
      "selector": {"type": "object", "additionalProperties": {"type": "string"},
                   "x-kubernetes-map-type": "atomic"},
      "clusterIPs": {"type": "array", "items": {"type": "string"},
                     "x-kubernetes-list-type": "atomic"},
      "type": {"type": "string"}}},
    "ServicePort": {"type": "object", "properties": {
      "name": {"type": "string"}, "port": {"type": "integer"},
      "protocol": {"type": "string", "default": "TCP"}, "targetPort": {"type": "integer"}}},
    "Pod": {"type": "object", "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"$ref": "#/components/schemas/ObjectMeta"},
      "spec": {"$ref": "#/components/schemas/PodSpec"}}},
    "PodSpec": {"type": "object", "properties": {
      "containers": {"type": "array", "items": {"$ref": "#/components/schemas/Container"},
                     "x-kubernetes-patch-merge-key": "name",
                     "x-kubernetes-patch-strategy": "merge"},
      "tolerations": {"type": "array", "items": {"type": "object"}}}},
    "Container": {"type": "object", "properties": {
      "name": {"type": "string"}, "image": {"type": "string"},
      "args": {"type": "array", "items": {"type": "string"}}}},
    "Widget": {"type": "object", "properties": {
      "apiVersion": {"type": "string"}, "kind": {"type": "string"},
      "metadata": {"type": "object"},
      "spec": {"type": "object", "properties": {
        "color": {"type": "string"}, "size": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "items": {"type": "array", "items": {"type": "integer"}}}}}}
  }}})"));
  return *doc;
}

// The root schema of `kind`, reached through a $ref as kube-apiserver's documents do.
SchemaCursor Schema(const std::string& kind) {
  static auto* refs = new std::map<std::string, Json>();
  auto [it, inserted] = refs->emplace(kind, Json::object());
  if (inserted) it->second["$ref"] = "#/components/schemas/" + kind;
  return SchemaCursor(&it->second, &OpenApi()["components"]["schemas"]);
}

ManagerInfo Who(std::string manager, std::string operation,
                std::string time = "2024-01-01T00:00:01Z", std::string api_version = "v1",
                std::string subresource = "") {
  return {std::move(manager), std::move(operation), std::move(api_version), std::move(subresource),
          std::move(time)};
}

// The fieldsV1 of the entry of `manager` (and `operation`), or null.
Json FieldsOf(const Json& managed_fields, const std::string& manager,
              const std::string& operation) {
  for (const Json& e : managed_fields) {
    if (e.value("manager", "") == manager && e.value("operation", "") == operation) {
      return e["fieldsV1"];
    }
  }
  return nullptr;
}

std::vector<std::string> Managers(const Json& managed_fields) {
  std::vector<std::string> out;
  for (const Json& e : managed_fields) {
    out.push_back(e.value("manager", "") + "/" + e.value("operation", ""));
  }
  return out;
}

Json ConfigMap(std::string_view data) {
  Json cm = J(R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web",
                  "namespace":"demo"}})");
  cm["data"] = J(data);
  return cm;
}

// ---------------------------------------------------------------------------------------------
// FieldSetOf

TEST(FieldSetOf, ListsTheFieldsAnObjectSets) {
  struct Case {
    const char* name;
    const char* kind;
    const char* object;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"map keys are members, declared structs are not, untracked metadata is left out",
       "ConfigMap",
       R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"demo",
           "uid":"1","resourceVersion":"7","creationTimestamp":"2024-01-01T00:00:00Z",
           "labels":{"app":"web"},"managedFields":[{"manager":"x"}]},"data":{"a":"1"}})",
       R"({"f:data":{"f:a":{}},"f:metadata":{"f:labels":{"f:app":{}}}})"},
      {"map lists are keyed, defaulted key fields included; atomic maps and lists are leaves",
       "Service",
       R"({"spec":{"ports":[{"port":80,"targetPort":8080},{"port":53,"protocol":"UDP"}],
           "selector":{"app":"web"},"clusterIPs":["10.0.0.1"],"type":"ClusterIP"}})",
       R"({"f:spec":{"f:clusterIPs":{},"f:ports":{
           "k:{\"port\":53,\"protocol\":\"UDP\"}":{".":{},"f:port":{},"f:protocol":{}},
           "k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:port":{},"f:targetPort":{}}},
           "f:selector":{},"f:type":{}}})"},
      {"a patch-merge-key list without list-type is a map list; other lists are atomic", "Pod",
       R"({"spec":{"containers":[{"name":"c","image":"nginx","args":["-v"]}],
           "tolerations":[{"key":"k"}]}})",
       R"({"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:args":{},"f:image":{},
           "f:name":{}}},"f:tolerations":{}}})"},
      {"set lists by value; undescribed metadata gets ObjectMeta's list types", "Widget",
       R"({"metadata":{"finalizers":["a.io/x"],"labels":{"k":"v"}},
           "spec":{"tags":["x","y"],"items":[1,2],"color":"red"}})",
       R"({"f:metadata":{"f:finalizers":{"v:\"a.io/x\"":{}},"f:labels":{"f:k":{}}},
           "f:spec":{"f:color":{},"f:items":{},"f:tags":{"v:\"x\"":{},"v:\"y\"":{}}}})"},
      {"an empty struct and a null are members", "Widget", R"({"spec":{},"status":null})",
       R"({"f:spec":{},"f:status":{}})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(Dump(FieldSetOf(J(c.object), Schema(c.kind)).ToJson()), Dump(J(c.want)));
  }
}

TEST(FieldSetOf, UnknownSchemaTreatsEveryKeyAsAMapEntry) {
  EXPECT_EQ(
      Dump(FieldSetOf(J(R"({"kind":"X","spec":{"a":[1],"b":{"c":1}}})"), SchemaCursor()).ToJson()),
      Dump(J(R"({"f:spec":{".":{},"f:a":{},"f:b":{".":{},"f:c":{}}}})")));
}

TEST(FieldSetOf, IgnorePathsLeavesOutWholeSubtrees) {
  ManagedFieldsOptions options;
  options.ignore_paths.Insert({PathElement::Field("status")});
  EXPECT_EQ(Dump(FieldSetOf(J(R"({"spec":{"type":"A"},"status":{"phase":"B"}})"), Schema("Service"),
                            options)
                     .ToJson()),
            Dump(J(R"({"f:spec":{"f:type":{}}})")));
}

// ---------------------------------------------------------------------------------------------
// UpdateManagedFields

TEST(UpdateManagedFields, CreateRecordsEveryFieldInKubernetesForm) {
  Json cm = ConfigMap(R"({"a":"1","b":"2"})");
  cm["metadata"]["labels"] = J(R"({"app":"web"})");
  auto mf = UpdateManagedFields(nullptr, cm, nullptr,
                                Who("kubectl-create", "Update", "2024-05-01T10:00:00Z"),
                                Schema("ConfigMap"));
  ASSERT_TRUE(mf.ok()) << mf.status().ToString();
  EXPECT_EQ(Dump(*mf), Dump(J(R"([{"manager":"kubectl-create","operation":"Update",
      "apiVersion":"v1","time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1",
      "fieldsV1":{"f:data":{".":{},"f:a":{},"f:b":{}},
                  "f:metadata":{"f:labels":{".":{},"f:app":{}}}}}])")));
}

TEST(UpdateManagedFields, OwnershipFollowsTheWrites) {
  // Each step: the object after the write, who wrote it, and the entries expected after.
  struct Step {
    const char* data;
    ManagerInfo who;
    std::vector<std::pair<std::string, const char*>> want;  // manager/operation -> fieldsV1
  };
  const std::vector<Step> steps = {
      {R"({"a":"1","b":"2"})",
       Who("kubectl-create", "Update", "2024-01-01T00:00:01Z"),
       {{"kubectl-create/Update", R"({"f:data":{".":{},"f:a":{},"f:b":{}}})"}}},
      // A change moves the field; the creator keeps the rest.
      {R"({"a":"9","b":"2"})",
       Who("kubectl-patch", "Update", "2024-01-01T00:00:02Z"),
       {{"kubectl-create/Update", R"({"f:data":{".":{},"f:b":{}}})"},
        {"kubectl-patch/Update", R"({"f:data":{"f:a":{}}})"}}},
      // A write that changes nothing records nothing.
      {R"({"a":"9","b":"2"})",
       Who("kubectl-edit", "Update", "2024-01-01T00:00:03Z"),
       {{"kubectl-create/Update", R"({"f:data":{".":{},"f:b":{}}})"},
        {"kubectl-patch/Update", R"({"f:data":{"f:a":{}}})"}}},
      // A removed field leaves every manager; an added one goes to the writer.
      {R"({"a":"9","c":"3"})",
       Who("kubectl-edit", "Update", "2024-01-01T00:00:04Z"),
       {{"kubectl-create/Update", R"({"f:data":{}})"},
        {"kubectl-patch/Update", R"({"f:data":{"f:a":{}}})"},
        {"kubectl-edit/Update", R"({"f:data":{"f:c":{}}})"}}},
      // Taking a manager's last field drops its entry; the writer's entry is extended.
      {R"({"a":"10","c":"3"})",
       Who("kubectl-edit", "Update", "2024-01-01T00:00:05Z"),
       {{"kubectl-create/Update", R"({"f:data":{}})"},
        {"kubectl-edit/Update", R"({"f:data":{"f:a":{},"f:c":{}}})"}}},
  };
  Json old = nullptr;
  Json mf = nullptr;
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    Json next = ConfigMap(steps[i].data);
    auto got = UpdateManagedFields(old, next, mf, steps[i].who, Schema("ConfigMap"));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    std::vector<std::string> want_managers;
    for (const auto& [who, fields] : steps[i].want) {
      want_managers.push_back(who);
      std::string manager = who.substr(0, who.find('/'));
      EXPECT_EQ(Dump(FieldsOf(*got, manager, "Update")), Dump(J(fields))) << who;
    }
    EXPECT_EQ(Managers(*got), want_managers);
    old = next;
    mf = *got;
  }
  // Times change only for the manager that took fields.
  EXPECT_EQ(mf[0]["time"], "2024-01-01T00:00:01Z");
  EXPECT_EQ(mf[1]["time"], "2024-01-01T00:00:05Z");
}

TEST(UpdateManagedFields, EntriesAreKeyedByApiVersionAndSubresource) {
  Json svc = J(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},
                   "spec":{"type":"ClusterIP"}})");
  auto created = UpdateManagedFields(
      nullptr, svc, nullptr, Who("ctl", "Update", "2024-01-01T00:00:01Z", "v1"), Schema("Service"));
  ASSERT_TRUE(created.ok());
  Json with_status = svc;
  with_status["status"] = J(R"({"phase":"Ready"})");
  auto status = UpdateManagedFields(svc, with_status, *created,
                                    Who("ctl", "Update", "2024-01-01T00:00:02Z", "v1", "status"),
                                    Schema("Service"));
  ASSERT_TRUE(status.ok());
  Json changed = with_status;
  changed["spec"]["type"] = "NodePort";
  auto other_version =
      UpdateManagedFields(with_status, changed, *status,
                          Who("ctl", "Update", "2024-01-01T00:00:03Z", "v2"), Schema("Service"));
  ASSERT_TRUE(other_version.ok());
  // On create the spec node itself appeared, so the v1 entry keeps `.spec` after losing
  // `.spec.type`; a new apiVersion is a new entry, appended.
  EXPECT_EQ(Dump(*other_version), Dump(J(R"([
    {"manager":"ctl","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:01Z",
     "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}},
    {"manager":"ctl","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:02Z",
     "fieldsType":"FieldsV1","fieldsV1":{"f:status":{".":{},"f:phase":{}}},
     "subresource":"status"},
    {"manager":"ctl","operation":"Update","apiVersion":"v2","time":"2024-01-01T00:00:03Z",
     "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:type":{}}}}])")));
}

TEST(UpdateManagedFields, IgnorePathsAreNotRecordedNorTaken) {
  ManagedFieldsOptions options;
  options.ignore_paths.Insert({PathElement::Field("status")});
  Json before = J(R"({"spec":{"type":"A"},"status":{"phase":"X"}})");
  Json after = J(R"({"spec":{"type":"B"},"status":{"phase":"Y"}})");
  Json mf = J(R"([{"manager":"ctl","operation":"Update","apiVersion":"v1",
                   "subresource":"status","fieldsType":"FieldsV1",
                   "fieldsV1":{"f:status":{"f:phase":{}}}}])");
  auto got =
      UpdateManagedFields(before, after, mf, Who("edit", "Update"), Schema("Service"), options);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Managers(*got), (std::vector<std::string>{"ctl/Update", "edit/Update"}));
  EXPECT_EQ(Dump(FieldsOf(*got, "edit", "Update")), R"({"f:spec":{"f:type":{}}})");
}

TEST(UpdateManagedFields, RejectsApplyOperationAndMalformedEntries) {
  auto apply = UpdateManagedFields(nullptr, J("{}"), nullptr, Who("m", "Apply"), SchemaCursor());
  EXPECT_EQ(apply.status().reason(), core::Reason::kBadRequest);
  auto bad = UpdateManagedFields(nullptr, J("{}"), J(R"([{"manager":1}])"), Who("m", "Update"),
                                 SchemaCursor());
  EXPECT_EQ(bad.status().reason(), core::Reason::kBadRequest);
}

// ---------------------------------------------------------------------------------------------
// ServerSideApply

// Applies `applied` as `who` to `live`/`mf`, expecting success.
ApplyResult MustApply(const Json& live, const Json& applied, const Json& mf, const ManagerInfo& who,
                      const SchemaCursor& schema, bool force = false) {
  auto result = ServerSideApply(live, applied, mf, who, force, schema);
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : ApplyResult{};
}

Json WithoutManagedFields(Json object) {
  object["metadata"].erase("managedFields");
  return object;
}

TEST(ServerSideApply, CreatesTheObjectOwnedByTheApplier) {
  Json applied = ConfigMap(R"({"a":"1","b":"2"})");
  ApplyResult r = MustApply(nullptr, applied, nullptr,
                            Who("kubectl", "Apply", "2024-01-01T00:00:01Z"), Schema("ConfigMap"));
  EXPECT_EQ(Dump(WithoutManagedFields(r.object)), Dump(applied));
  EXPECT_EQ(Dump(r.managed_fields), Dump(J(R"([{"manager":"kubectl","operation":"Apply",
      "apiVersion":"v1","time":"2024-01-01T00:00:01Z","fieldsType":"FieldsV1",
      "fieldsV1":{"f:data":{"f:a":{},"f:b":{}}}}])")));
  EXPECT_EQ(r.object["metadata"]["managedFields"], r.managed_fields);
}

TEST(ServerSideApply, FollowsAppliersThroughASequence) {
  // Each step applies a configuration (data only) as a manager and checks the object's data
  // and every entry afterwards. All values are ConfigMap data.
  struct Step {
    const char* name;
    const char* manager;
    const char* operation;  // "Apply", or "Update" for an ordinary write of `data`
    const char* data;
    bool force;
    const char* want_data;
    std::vector<std::pair<std::string, const char*>> want;  // manager/op -> fieldsV1
    const char* want_error;                                 // non-null: expected conflict
  };
  const std::vector<Step> steps = {
      {"create",
       "a",
       "Apply",
       R"({"x":"1","y":"2"})",
       false,
       R"({"x":"1","y":"2"})",
       {{"a/Apply", R"({"f:data":{"f:x":{},"f:y":{}}})"}},
       nullptr},
      {"a second applier setting the same value shares it",
       "b",
       "Apply",
       R"({"x":"1"})",
       false,
       R"({"x":"1","y":"2"})",
       {{"a/Apply", R"({"f:data":{"f:x":{},"f:y":{}}})"}, {"b/Apply", R"({"f:data":{"f:x":{}}})"}},
       nullptr},
      {"dropping a shared field keeps it",
       "a",
       "Apply",
       R"({"y":"2"})",
       false,
       R"({"x":"1","y":"2"})",
       {{"a/Apply", R"({"f:data":{"f:y":{}}})"}, {"b/Apply", R"({"f:data":{"f:x":{}}})"}},
       nullptr},
      {"appliers conflict with each other",
       "a",
       "Apply",
       R"({"x":"5","y":"2"})",
       false,
       R"({"x":"1","y":"2"})",
       {{"a/Apply", R"({"f:data":{"f:y":{}}})"}, {"b/Apply", R"({"f:data":{"f:x":{}}})"}},
       R"(Apply failed with 1 conflict: conflict with "b": .data.x)"},
      {"force takes the field",
       "a",
       "Apply",
       R"({"x":"5","y":"2"})",
       true,
       R"({"x":"5","y":"2"})",
       {{"a/Apply", R"({"f:data":{"f:x":{},"f:y":{}}})"}},
       nullptr},
      {"an ordinary write takes a field from the applier",
       "kubectl-patch",
       "Update",
       R"({"x":"6","y":"2"})",
       false,
       R"({"x":"6","y":"2"})",
       {{"a/Apply", R"({"f:data":{"f:y":{}}})"},
        {"kubectl-patch/Update", R"({"f:data":{"f:x":{}}})"}},
       nullptr},
      // `data: {}` still claims the (now empty of a's fields) map itself.
      {"dropping a field owned by nobody else removes it",
       "a",
       "Apply",
       R"({})",
       false,
       R"({"x":"6"})",
       {{"a/Apply", R"({"f:data":{}})"}, {"kubectl-patch/Update", R"({"f:data":{"f:x":{}}})"}},
       nullptr},
  };
  Json live = nullptr;
  Json mf = nullptr;
  for (const Step& s : steps) {
    SCOPED_TRACE(s.name);
    Json config = ConfigMap(s.data);
    if (std::string(s.operation) == "Update") {
      auto got =
          UpdateManagedFields(live, config, mf, Who(s.manager, "Update"), Schema("ConfigMap"));
      ASSERT_TRUE(got.ok());
      live = config;
      mf = *got;
    } else {
      auto got =
          ServerSideApply(live, config, mf, Who(s.manager, "Apply"), s.force, Schema("ConfigMap"));
      if (s.want_error != nullptr) {
        ASSERT_FALSE(got.ok());
        EXPECT_EQ(got.status().message(), s.want_error);
        EXPECT_EQ(got.status().code(), 409);
      } else {
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        live = WithoutManagedFields(got->object);
        mf = got->managed_fields;
      }
    }
    EXPECT_EQ(Dump(live["data"]), Dump(J(s.want_data)));
    std::vector<std::string> managers;
    for (const auto& [who, fields] : s.want) {
      managers.push_back(who);
      size_t slash = who.find('/');
      EXPECT_EQ(Dump(FieldsOf(mf, who.substr(0, slash), who.substr(slash + 1))), Dump(J(fields)))
          << who;
    }
    EXPECT_EQ(Managers(mf), managers);
  }
}

// A live ConfigMap whose data fields are owned by Update managers as given.
struct Owned {
  Json live;
  Json mf;
};
Owned OwnedConfigMap(const char* data, const char* entries) {
  return {ConfigMap(data), J(entries)};
}

TEST(ServerSideApply, ConflictMessagesMatchKubeApiserver) {
  struct Case {
    const char* name;
    const char* entries;
    const char* applied_data;
    const char* want_message;
    std::vector<core::Cause> want_causes;
  };
  const char* kLive = R"({"a":"1","b":"2","c":"3"})";
  const std::vector<Case> cases = {
      {"one field",
       R"([{"manager":"kubectl-patch","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:00Z",
            "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}])",
       R"({"a":"9"})",
       R"(Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.a)",
       {{"FieldManagerConflict", R"(conflict with "kubectl-patch" using v1)", ".data.a"}}},
      {"two fields of one manager",
       R"([{"manager":"kubectl-patch","operation":"Update","apiVersion":"v1",
            "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{},"f:b":{}}}}])",
       R"({"a":"9","b":"9"})",
       "Apply failed with 2 conflicts: conflicts with \"kubectl-patch\" using v1:\n"
       "- .data.a\n- .data.b",
       {{"FieldManagerConflict", R"(conflict with "kubectl-patch" using v1)", ".data.a"},
        {"FieldManagerConflict", R"(conflict with "kubectl-patch" using v1)", ".data.b"}}},
      {"managers sorted; appliers without a version; subresources named",
       R"([{"manager":"zed","operation":"Update","apiVersion":"apps/v1",
            "subresource":"status","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:c":{}}}},
           {"manager":"kubectl-patch","operation":"Update","apiVersion":"v1",
            "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}},
           {"manager":"alpha","operation":"Apply","apiVersion":"v1",
            "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:b":{}}}}])",
       R"({"a":"9","b":"9","c":"9"})",
       "Apply failed with 3 conflicts: conflicts with \"alpha\":\n- .data.b\n"
       "conflicts with \"kubectl-patch\" using v1:\n- .data.a\n"
       "conflicts with \"zed\" with subresource \"status\" using apps/v1:\n- .data.c",
       {{"FieldManagerConflict", R"(conflict with "alpha")", ".data.b"},
        {"FieldManagerConflict", R"(conflict with "kubectl-patch" using v1)", ".data.a"},
        {"FieldManagerConflict", R"(conflict with "zed" with subresource "status" using apps/v1)",
         ".data.c"}}},
      {"the same manager name with another operation conflicts",
       R"([{"manager":"kubectl","operation":"Update","apiVersion":"v1",
            "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}}])",
       R"({"a":"9"})",
       R"(Apply failed with 1 conflict: conflict with "kubectl" using v1: .data.a)",
       {{"FieldManagerConflict", R"(conflict with "kubectl" using v1)", ".data.a"}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Owned o = OwnedConfigMap(kLive, c.entries);
    auto got = ServerSideApply(o.live, ConfigMap(c.applied_data), o.mf, Who("kubectl", "Apply"),
                               /*force=*/false, Schema("ConfigMap"));
    ASSERT_FALSE(got.ok());
    EXPECT_TRUE(core::IsConflict(got.status()));
    EXPECT_EQ(got.status().message(), c.want_message);
    ASSERT_TRUE(got.status().details().has_value());
    EXPECT_EQ(got.status().details()->causes, c.want_causes);
  }
}

TEST(ServerSideApply, ForceMovesConflictingFieldsAndEqualValuesAreShared) {
  Owned o = OwnedConfigMap(R"({"a":"1","b":"2"})", R"([
      {"manager":"kubectl-patch","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:00Z",
       "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{}}}},
      {"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:00Z",
       "fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:b":{}}}}])");
  // b keeps its value: shared, no conflict even without force; a changes: forced over.
  ApplyResult r = MustApply(o.live, ConfigMap(R"({"a":"9","b":"2"})"), o.mf,
                            Who("kubectl", "Apply", "2024-01-01T00:00:01Z"), Schema("ConfigMap"),
                            /*force=*/true);
  EXPECT_EQ(Dump(r.object["data"]), R"({"a":"9","b":"2"})");
  EXPECT_EQ(Dump(r.managed_fields), Dump(J(R"([
      {"manager":"kubectl-create","operation":"Update","apiVersion":"v1","time":"2024-01-01T00:00:00Z",
       "fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:b":{}}}},
      {"manager":"kubectl","operation":"Apply","apiVersion":"v1","time":"2024-01-01T00:00:01Z",
       "fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{},"f:b":{}}}}])")));
}

TEST(ServerSideApply, MapListsMergeByKeyAndPruneDroppedElements) {
  Json live = J(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{
      "ports":[{"port":80,"protocol":"TCP","name":"http"},{"port":443,"protocol":"TCP"}]}})");
  Json mf = J(R"([{"manager":"creator","operation":"Update","apiVersion":"v1",
      "fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:ports":{
        "k:{\"port\":80,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{},"f:protocol":{}},
        "k:{\"port\":443,\"protocol\":\"TCP\"}":{".":{},"f:port":{},"f:protocol":{}}}}}}])");
  // The applier adds a port (protocol defaulted by the schema) and names port 443.
  Json first = J(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{
      "ports":[{"port":443,"name":"https"},{"port":8080,"name":"alt"}]}})");
  ApplyResult r1 = MustApply(live, first, mf, Who("app", "Apply"), Schema("Service"));
  EXPECT_EQ(Dump(r1.object["spec"]["ports"]), Dump(J(R"([
      {"port":80,"protocol":"TCP","name":"http"},
      {"port":443,"protocol":"TCP","name":"https"},
      {"port":8080,"name":"alt"}])")));
  EXPECT_EQ(Dump(FieldsOf(r1.managed_fields, "app", "Apply")), Dump(J(R"({"f:spec":{"f:ports":{
      "k:{\"port\":443,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{}},
      "k:{\"port\":8080,\"protocol\":\"TCP\"}":{".":{},"f:name":{},"f:port":{}}}}})")));

  // Dropping 8080 (owned by the applier alone) removes it; 443 stays (the creator owns it)
  // but loses the name only the applier set.
  Json second = J(R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{}})");
  ApplyResult r2 = MustApply(WithoutManagedFields(r1.object), second, r1.managed_fields,
                             Who("app", "Apply"), Schema("Service"));
  EXPECT_EQ(Dump(r2.object["spec"]["ports"]), Dump(J(R"([
      {"port":80,"protocol":"TCP","name":"http"},{"port":443,"protocol":"TCP"}])")));
  EXPECT_EQ(Managers(r2.managed_fields), (std::vector<std::string>{"creator/Update", "app/Apply"}));
  EXPECT_EQ(Dump(FieldsOf(r2.managed_fields, "app", "Apply")), R"({"f:spec":{}})");
}

TEST(ServerSideApply, ListAndMapSemantics) {
  struct Case {
    const char* name;
    const char* kind;
    const char* first;   // applied by "app" onto nothing
    const char* second;  // then applied by "app" again
    const char* want;    // the object's spec afterwards
  };
  const std::vector<Case> cases = {
      {"set lists keep the applied order, dropped values go", "Widget",
       R"({"spec":{"tags":["a","b","c"]}})", R"({"spec":{"tags":["c","d","a"]}})",
       R"({"tags":["c","d","a"]})"},
      {"atomic lists are replaced", "Widget", R"({"spec":{"items":[1,2,3]}})",
       R"({"spec":{"items":[4]}})", R"({"items":[4]})"},
      {"atomic maps are replaced", "Service", R"({"spec":{"selector":{"app":"a","x":"y"}}})",
       R"({"spec":{"selector":{"tier":"b"}}})", R"({"selector":{"tier":"b"}})"},
      {"a struct nobody owns anything in goes", "Widget", R"({"spec":{"color":"red","size":1}})",
       R"({"metadata":{"labels":{"a":"b"}}})", "null"},
      {"map-list elements are removed when dropped", "Pod",
       R"({"spec":{"containers":[{"name":"a","image":"x"},{"name":"b","image":"y"}]}})",
       R"({"spec":{"containers":[{"name":"b","image":"z"}]}})",
       R"({"containers":[{"name":"b","image":"z"}]})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ApplyResult r1 = MustApply(nullptr, J(c.first), nullptr, Who("app", "Apply"), Schema(c.kind));
    ApplyResult r2 = MustApply(WithoutManagedFields(r1.object), J(c.second), r1.managed_fields,
                               Who("app", "Apply"), Schema(c.kind));
    Json spec = r2.object.contains("spec") ? r2.object["spec"] : Json();
    EXPECT_EQ(Dump(spec), Dump(J(c.want)));
  }
}

TEST(ServerSideApply, DroppedStructFieldStaysWhenAnotherManagerOwnsPartOfIt) {
  ApplyResult r1 = MustApply(nullptr, J(R"({"spec":{"color":"red","size":1}})"), nullptr,
                             Who("app", "Apply"), Schema("Widget"));
  Json edited = WithoutManagedFields(r1.object);
  edited["spec"]["size"] = 2;
  auto mf = UpdateManagedFields(WithoutManagedFields(r1.object), edited, r1.managed_fields,
                                Who("scaler", "Update"), Schema("Widget"));
  ASSERT_TRUE(mf.ok());
  ApplyResult r2 = MustApply(edited, J(R"({"metadata":{"labels":{"a":"b"}}})"), *mf,
                             Who("app", "Apply"), Schema("Widget"));
  EXPECT_EQ(Dump(r2.object["spec"]), R"({"size":2})");
}

TEST(ServerSideApply, UntrackedObjectsBelongToBeforeFirstApply) {
  Json live = ConfigMap(R"({"a":"1"})");
  auto got = ServerSideApply(live, ConfigMap(R"({"a":"2"})"), nullptr, Who("kubectl", "Apply"),
                             false, Schema("ConfigMap"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(
      got.status().message(),
      R"(Apply failed with 1 conflict: conflict with "before-first-apply" using v1: .data.a)");
  ApplyResult same = MustApply(live, ConfigMap(R"({"a":"1"})"), nullptr, Who("kubectl", "Apply"),
                               Schema("ConfigMap"));
  EXPECT_EQ(Managers(same.managed_fields),
            (std::vector<std::string>{"before-first-apply/Update", "kubectl/Apply"}));
}

TEST(ServerSideApply, RejectsBadRequests) {
  struct Case {
    const char* name;
    std::string manager;
    const char* kind;
    const char* applied;
    core::Reason reason;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"no field manager", "", "ConfigMap", R"({"data":{}})", core::Reason::kInvalid,
       "fieldManager: Required value: is required for apply patch"},
      {"not an object", "m", "ConfigMap", R"([1])", core::Reason::kBadRequest,
       "apply patch must be a JSON object, found array"},
      {"managedFields in the configuration", "m", "ConfigMap",
       R"({"metadata":{"managedFields":[]}})", core::Reason::kBadRequest,
       "metadata.managedFields must be nil"},
      {"map-list element without its key", "m", "Service",
       R"({"apiVersion":"v1","kind":"Service","metadata":{"name":"s","namespace":"d"},
           "spec":{"ports":[{"name":"x"}]}})",
       core::Reason::kUnknown,
       "failed to create typed patch object (d/s; /v1, Kind=Service): .spec.ports: element 0: "
       "associative list with keys has an element that omits key field \"port\" (and doesn't "
       "have default value)"},
      {"duplicate keys", "m", "Pod",
       R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},
           "spec":{"containers":[{"name":"a"},{"name":"a"}]}})",
       core::Reason::kUnknown,
       "failed to create typed patch object (/p; /v1, Kind=Pod): .spec.containers: duplicate "
       "entries for key [name=\"a\"]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto got = ServerSideApply(nullptr, J(c.applied), nullptr, Who(c.manager, "Apply"), false,
                               Schema(c.kind));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().reason(), c.reason);
    EXPECT_EQ(got.status().message(), c.message);
  }
}

TEST(ServerSideApply, StatusSubresourceEntryAndIgnoredPaths) {
  ManagedFieldsOptions main_resource;
  main_resource.ignore_paths.Insert({PathElement::Field("status")});
  Json applied = J(R"({"spec":{"type":"A"},"status":{"phase":"X"}})");
  auto r = ServerSideApply(nullptr, applied, nullptr, Who("m", "Apply", "2024-01-01T00:00:01Z"),
                           false, Schema("Service"), main_resource);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Dump(FieldsOf(r->managed_fields, "m", "Apply")), R"({"f:spec":{"f:type":{}}})");

  auto s = ServerSideApply(nullptr, J(R"({"status":{"phase":"X"}})"), nullptr,
                           Who("m", "Apply", "2024-01-01T00:00:01Z", "v1", "status"), false,
                           Schema("Service"));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->managed_fields[0]["subresource"], "status");
}

// kubectl's client-side to server-side apply migration (kubectl-compat §9.6): the first
// server-side apply leaves the client-side-apply manager owning the fields, kubectl then
// rewrites managedFields with a JSON patch moving that ownership to `kubectl`, after which
// fields dropped from the manifest are really removed.
TEST(ServerSideApply, KubectlMigrationFromClientSideApply) {
  const SchemaCursor schema = Schema("ConfigMap");
  Json created = ConfigMap(R"({"a":"1","b":"2"})");
  created["metadata"]["annotations"] =
      J(R"({"kubectl.kubernetes.io/last-applied-configuration":"{}\n"})");
  auto csa = UpdateManagedFields(nullptr, created, nullptr,
                                 Who("kubectl-client-side-apply", "Update", "2024-01-01T00:00:01Z"),
                                 schema);
  ASSERT_TRUE(csa.ok());

  // (1) The server-side apply of the same manifest: equal values, no conflict, shared.
  ApplyResult ssa = MustApply(created, ConfigMap(R"({"a":"1","b":"2"})"), *csa,
                              Who("kubectl", "Apply", "2024-01-01T00:00:02Z"), schema);
  EXPECT_EQ(Managers(ssa.managed_fields),
            (std::vector<std::string>{"kubectl-client-side-apply/Update", "kubectl/Apply"}));

  // (2) kubectl-last-applied applies only the last-applied annotation.
  Json annotation = ConfigMap("{}");
  annotation.erase("data");
  annotation["metadata"]["annotations"] = created["metadata"]["annotations"];
  ApplyResult last_applied =
      MustApply(WithoutManagedFields(ssa.object), annotation, ssa.managed_fields,
                Who("kubectl-last-applied", "Apply", "2024-01-01T00:00:02.5Z"), schema);
  EXPECT_EQ(Managers(last_applied.managed_fields),
            (std::vector<std::string>{"kubectl-client-side-apply/Update", "kubectl/Apply",
                                      "kubectl-last-applied/Apply"}));

  // (3) The JSON patch replaces managedFields: the client-side entry's fields now belong to
  // kubectl's Apply entry. The write changes nothing else, so the client's list is kept.
  Json rewritten = J(R"([{"manager":"kubectl","operation":"Apply","apiVersion":"v1",
      "time":"2024-01-01T00:00:02Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:a":{},"f:b":{}},
      "f:metadata":{"f:annotations":{".":{},
      "f:kubectl.kubernetes.io/last-applied-configuration":{}}}}},
      {"manager":"kubectl-last-applied","operation":"Apply","apiVersion":"v1","time":"2024-01-01T00:00:02.5Z",
      "fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{
      "f:kubectl.kubernetes.io/last-applied-configuration":{}}}}}])");
  EXPECT_EQ(Dump(FieldsOf(last_applied.managed_fields, "kubectl-last-applied", "Apply")),
            Dump(rewritten[1]["fieldsV1"]));
  auto validated = ValidateManagedFields(rewritten);
  ASSERT_TRUE(validated.ok());
  Json live = WithoutManagedFields(last_applied.object);
  auto patched = UpdateManagedFields(live, live, *validated,
                                     Who("kubectl", "Update", "2024-01-01T00:00:03Z"), schema);
  ASSERT_TRUE(patched.ok());
  EXPECT_EQ(Dump(*patched), Dump(rewritten));

  // (4) The next server-side apply without `b` removes it: kubectl alone owned it. The
  // annotation stays: kubectl-last-applied owns it.
  ApplyResult again = MustApply(live, ConfigMap(R"({"a":"1"})"), *patched,
                                Who("kubectl", "Apply", "2024-01-01T00:00:04Z"), schema);
  EXPECT_EQ(Dump(again.object["data"]), R"({"a":"1"})");
  EXPECT_EQ(again.object["metadata"]["annotations"], created["metadata"]["annotations"]);
  EXPECT_EQ(Dump(FieldsOf(again.managed_fields, "kubectl", "Apply")), R"({"f:data":{"f:a":{}}})");
}

// ---------------------------------------------------------------------------------------------
// ValidateManagedFields

TEST(ValidateManagedFields, AcceptsKubernetesEntriesAndTheClearForm) {
  Json entries = J(R"([{"manager":"kubectl","operation":"Apply","apiVersion":"v1",
      "time":"2024-05-01T10:00:00Z","fieldsType":"FieldsV1",
      "fieldsV1":{"f:data":{"k:{\"b\":1,\"a\":2}":{}}}},
      {"manager":"ctl","operation":"Update","apiVersion":"v1","time":"2024-05-01T10:00:00.5+02:00",
       "fieldsType":"FieldsV1","fieldsV1":{},"subresource":"status"}])");
  auto got = ValidateManagedFields(entries);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[0]["fieldsV1"], J(R"({"f:data":{"k:{\"a\":2,\"b\":1}":{}}})"));
  EXPECT_EQ((*got)[1], entries[1]);

  for (const char* empty : {"null", "[]", "[{}]", "[{},{}]"}) {
    auto cleared = ValidateManagedFields(J(empty));
    ASSERT_TRUE(cleared.ok()) << empty;
    EXPECT_EQ(*cleared, Json::array()) << empty;
  }
}

TEST(ValidateManagedFields, NamesTheFaultyField) {
  const char* kOk = R"("apiVersion":"v1","fieldsType":"FieldsV1")";
  auto entry = [&](const std::string& extra) {
    return "[{\"operation\":\"Update\"," + std::string(kOk) + extra + "}]";
  };
  const std::string too_long(129, 'm');
  const std::vector<std::pair<std::string, std::pair<core::Reason, std::string>>> cases = {
      {R"({"manager":"m"})",
       {core::Reason::kBadRequest, "metadata.managedFields: expected an array, found object"}},
      {R"([1])",
       {core::Reason::kBadRequest, "metadata.managedFields[0]: expected an object, found number"}},
      {entry(R"(,"manager":7)"),
       {core::Reason::kBadRequest,
        "metadata.managedFields[0].manager: expected a string, found number"}},
      {entry(R"(,"time":"yesterday")"),
       {core::Reason::kBadRequest,
        "metadata.managedFields[0].time: \"yesterday\" is not an RFC 3339 time"}},
      {entry(R"(,"fieldsV1":{"f:a":[]})"),
       {core::Reason::kBadRequest,
        "metadata.managedFields[0].fieldsV1: fieldsV1: expected a JSON object, found array"}},
      {R"([{"manager":"m","operation":"Patch","apiVersion":"v1","fieldsType":"FieldsV1"}])",
       {core::Reason::kInvalid,
        "metadata.managedFields[0].operation: Invalid value: \"Patch\": must be `Apply` or "
        "`Update`"}},
      {entry(R"(,"fieldsType":"FieldsV2")"),
       {core::Reason::kInvalid,
        "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be "
        "`FieldsV1`"}},
      {entry(",\"manager\":\"" + too_long + "\""),
       {core::Reason::kInvalid,
        "metadata.managedFields[0].manager: Too long: may not be more than 128 bytes"}},
      {entry(R"(,"manager":"a\tb")"),
       {core::Reason::kInvalid,
        "metadata.managedFields[0].manager: Invalid value: \"a\\tb\": invalid character "
        "U+0009 (at position 1)"}},
      {R"([{"manager":"m","operation":"Update","fieldsType":"FieldsV1"},
           {"manager":"n","operation":"Apply","apiVersion":"v1"}])",
       {core::Reason::kInvalid,
        "[metadata.managedFields[0].apiVersion: Required value, "
        "metadata.managedFields[1].fieldsType: Required value]"}},
  };
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    auto got = ValidateManagedFields(J(text));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().reason(), want.first);
    EXPECT_EQ(got.status().message(), want.second);
  }
  auto invalid = ValidateManagedFields(
      J(R"([{"manager":"m","operation":"Patch","apiVersion":"v1","fieldsType":"FieldsV1"}])"));
  ASSERT_TRUE(invalid.status().details().has_value());
  EXPECT_EQ(invalid.status().details()->causes,
            (std::vector<core::Cause>{{"FieldValueInvalid",
                                       "Invalid value: \"Patch\": must be `Apply` or `Update`",
                                       "metadata.managedFields[0].operation"}}));
}

}  // namespace
}  // namespace klutch::machinery::managed_fields_test
