// CRD schemas and CEL rules on a real `klutch apiserver`, through the REST API: rules that do
// not compile make the CRD write fail with kube-apiserver's 422; rules on the status
// subresource run on status writes; transition rules see the stored object; defaults added
// to a CRD after objects were stored are applied when those objects are read (GET, LIST,
// WATCH), as kube-apiserver applies them when decoding from storage.

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <thread>

#include "machinery/json.h"
#include "test/support/server_fixture.h"

namespace klutch::testing {
namespace {

using machinery::Json;

const char* kCrdPath = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const char* kWidgets = "/apis/example.com/v1/namespaces/default/widgets";

Json WidgetCrd(const Json& spec_schema) {
  return {
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets.example.com"}}},
      {"spec",
       {{"group", "example.com"},
        {"scope", "Namespaced"},
        {"names", {{"plural", "widgets"}, {"kind", "Widget"}, {"singular", "widget"}}},
        {"versions",
         Json::array({{{"name", "v1"},
                       {"served", true},
                       {"storage", true},
                       {"subresources", {{"status", Json::object()}}},
                       {"schema",
                        {{"openAPIV3Schema",
                          {{"type", "object"},
                           {"properties",
                            {{"spec", spec_schema},
                             {"status",
                              {{"type", "object"},
                               {"x-kubernetes-validations",
                                Json::array({{{"rule", "self.ready <= 3"},
                                              {"message", "ready must not exceed 3"}}})},
                               {"properties", {{"ready", {{"type", "integer"}}}}}}}}}}}}}}})}}}};
}

Json SpecSchema(bool with_default) {
  Json size = {{"type", "integer"},
               {"x-kubernetes-validations",
                Json::array({{{"rule", "self >= oldSelf"}, {"message", "size may only grow"}}})}};
  Json s = {{"type", "object"}, {"properties", {{"size", size}, {"color", {{"type", "string"}}}}}};
  if (with_default) s["properties"]["color"]["default"] = "blue";
  return s;
}

class CrdValidation : public ServerTest {
 protected:
  http::ClientResponse Do(std::string_view method, const std::string& path,
                          const Json& body = nullptr, std::string_view type = "application/json") {
    auto r = Call(*http_, method, path, body.is_null() ? "" : machinery::Dump(body), type);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }

  Json Body(const http::ClientResponse& r) {
    auto j = machinery::ParseJson(r.body);
    return j.ok() ? *j : Json();
  }

  // Read-modify-write of the CRD, retried while the CRD's status controller writes too.
  void UpdateCrd(const std::function<void(Json&)>& change) {
    const std::string path = std::string(kCrdPath) + "/widgets.example.com";
    for (int i = 0; i < 50; ++i) {
      Json crd = Body(Do("GET", path));
      change(crd);
      auto r = Do("PUT", path, crd);
      if (r.status == 200) return;
      ASSERT_EQ(r.status, 409) << r.body;
    }
    FAIL() << "CRD update kept conflicting";
  }

  void WaitServed() {
    for (int i = 0; i < 200; ++i) {
      if (Do("GET", kWidgets).status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    FAIL() << "widgets never served";
  }
};

TEST_F(CrdValidation, RulesThatDoNotCompileRejectTheCrd) {
  Json spec = SpecSchema(false);
  spec["x-kubernetes-validations"] = Json::array({{{"rule", "self.sise > 0"}}});
  auto r = Do("POST", kCrdPath, WidgetCrd(spec));
  EXPECT_EQ(r.status, 422) << r.body;
  Json body = Body(r);
  ASSERT_EQ(body["details"]["causes"].size(), 1u) << r.body;
  EXPECT_EQ(body["details"]["causes"][0]["field"],
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]."
            "rule");
  std::string message = body["details"]["causes"][0]["message"];
  EXPECT_NE(message.find("compilation failed: ERROR: <input>:1:5: undefined field 'sise'"),
            std::string::npos)
      << message;
  EXPECT_EQ(Do("GET", std::string(kCrdPath) + "/widgets.example.com").status, 404);
}

TEST_F(CrdValidation, SpecStatusAndTransitionRulesRunOnTheirWrites) {
  ASSERT_EQ(Do("POST", kCrdPath, WidgetCrd(SpecSchema(false))).status, 201);
  WaitServed();
  Json w = {{"apiVersion", "example.com/v1"},
            {"kind", "Widget"},
            {"metadata", {{"name", "w"}}},
            {"spec", {{"size", 2}}}};
  ASSERT_EQ(Do("POST", kWidgets, w).status, 201);
  const std::string item = std::string(kWidgets) + "/w";
  auto shrink = Do("PATCH", item, Json{{"spec", {{"size", 1}}}}, "application/merge-patch+json");
  EXPECT_EQ(shrink.status, 422);
  EXPECT_EQ(Body(shrink)["message"],
            "Widget.example.com \"w\" is invalid: spec.size: Invalid value: \"integer\": size may "
            "only grow");
  EXPECT_EQ(Do("PATCH", item, Json{{"spec", {{"size", 5}}}}, "application/merge-patch+json").status,
            200);
  auto status = Do("PATCH", item + "/status", Json{{"status", {{"ready", 4}}}},
                   "application/merge-patch+json");
  EXPECT_EQ(status.status, 422) << status.body;
  EXPECT_EQ(Body(status)["message"],
            "Widget.example.com \"w\" is invalid: status: Invalid value: \"object\": ready must "
            "not exceed 3");
  EXPECT_EQ(Do("PATCH", item + "/status", Json{{"status", {{"ready", 3}}}},
               "application/merge-patch+json")
                .status,
            200);
  EXPECT_EQ(Body(Do("GET", item))["spec"]["size"], 5);
}

TEST_F(CrdValidation, DefaultsAddedLaterAreAppliedWhenReading) {
  ASSERT_EQ(Do("POST", kCrdPath, WidgetCrd(SpecSchema(false))).status, 201);
  WaitServed();
  Json w = {{"apiVersion", "example.com/v1"},
            {"kind", "Widget"},
            {"metadata", {{"name", "old"}}},
            {"spec", {{"size", 1}}}};
  ASSERT_EQ(Do("POST", kWidgets, w).status, 201);
  // The CRD gains a default for spec.color; the stored object does not have the field.
  UpdateCrd([](Json& crd) {
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"] =
        SpecSchema(true);
  });
  // Served resources are refreshed asynchronously after a CRD update.
  Json got;
  for (int i = 0; i < 200; ++i) {
    got = Body(Do("GET", std::string(kWidgets) + "/old"));
    if (got["spec"].contains("color")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(got["spec"]["color"], "blue");
  Json list = Body(Do("GET", kWidgets));
  ASSERT_EQ(list["items"].size(), 1u);
  EXPECT_EQ(list["items"][0]["spec"]["color"], "blue");
  // A watch from the beginning replays the object with the default as well.
  auto watch = Do("GET", std::string(kWidgets) + "?watch=1&resourceVersion=0&timeoutSeconds=1");
  EXPECT_EQ(watch.status, 200);
  auto first_line = watch.body.substr(0, watch.body.find('\n'));
  auto event = machinery::ParseJson(first_line);
  ASSERT_TRUE(event.ok()) << watch.body;
  EXPECT_EQ((*event)["object"]["spec"]["color"], "blue") << first_line;
}

TEST_F(CrdValidation, RulesAddedLaterRatchetUnchangedValuesWithAWarning) {
  ASSERT_EQ(Do("POST", kCrdPath, WidgetCrd(SpecSchema(false))).status, 201);
  WaitServed();
  Json w = {{"apiVersion", "example.com/v1"},
            {"kind", "Widget"},
            {"metadata", {{"name", "red"}}},
            {"spec", {{"size", 1}, {"color", "red"}}}};
  ASSERT_EQ(Do("POST", kWidgets, w).status, 201);
  UpdateCrd([](Json& crd) {
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
       ["color"]["x-kubernetes-validations"] = Json::array({{{"rule", "self != 'red'"}}});
  });
  const std::string item = std::string(kWidgets) + "/red";
  // Once the new rule is served, a new red widget is rejected ...
  Json other = w;
  other["metadata"]["name"] = "red2";
  int code = 0;
  for (int i = 0; i < 200 && code != 422; ++i) {
    code = Do("POST", std::string(kWidgets) + "?dryRun=All", other).status;
    if (code != 422) std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(code, 422);
  // ... but the stored one may still change other fields: the failure is a warning.
  auto r = Do("PATCH", item, Json{{"spec", {{"size", 2}}}}, "application/merge-patch+json");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.Get("Warning"),
            "299 - \"spec.color: Invalid value: \\\"string\\\": failed rule: self != 'red'\"");
  // Changing the invalid value itself is checked.
  EXPECT_EQ(
      Do("PATCH", item, Json{{"spec", {{"color", "red "}}}}, "application/merge-patch+json").status,
      200);
  EXPECT_EQ(
      Do("PATCH", item, Json{{"spec", {{"color", "red"}}}}, "application/merge-patch+json").status,
      422);
}

}  // namespace
}  // namespace klutch::testing
