// The real check of EncodeOpenApiV2Protobuf: real kubectl binaries read the encoded document
// from a minimal API server (legacy discovery, /openapi/v3 absent, /openapi/v2 as protobuf only)
// and act on what they found in it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "codec/openapi_v2.h"
#include "http/server.h"
#include "machinery/json.h"
#include "test/support/process.h"

namespace klutch::codec {
namespace {

using machinery::Json;
using machinery::ParseYaml;

namespace fs = std::filesystem;

// The parts of Kubernetes' /openapi/v2 that `explain configmap` and `create -f` of a ConfigMap
// read. With `field_validation`, the PATCH operation of ConfigMap takes the `fieldValidation`
// query parameter (so kubectl leaves validation to the server); without it, kubectl validates
// client-side against the definitions.
Json SwaggerDocument(bool field_validation) {
  Json patch_params = Json::parse(R"([
    {"name": "body", "in": "body", "required": true,
     "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
    {"uniqueItems": true, "type": "string", "name": "dryRun", "in": "query",
     "description": "When present, indicates that modifications should not be persisted."}
  ])");
  if (field_validation) {
    patch_params.push_back(Json::parse(R"(
      {"uniqueItems": true, "type": "string", "name": "fieldValidation", "in": "query",
       "description": "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields."})"));
  }
  Json doc = Json::parse(R"json({
    "swagger": "2.0",
    "info": {"title": "Kubernetes", "version": "v1.27.0"},
    "paths": {
      "/api/v1/namespaces/{namespace}/configmaps/{name}": {
        "parameters": [
          {"uniqueItems": true, "type": "string", "description": "name of the ConfigMap",
           "name": "name", "in": "path", "required": true},
          {"$ref": "#/parameters/namespace-vgWSWtn3"}
        ],
        "patch": {
          "description": "partially update the specified ConfigMap",
          "consumes": ["application/json-patch+json", "application/merge-patch+json",
                       "application/strategic-merge-patch+json", "application/apply-patch+yaml"],
          "produces": ["application/json", "application/yaml"],
          "schemes": ["https"],
          "tags": ["core_v1"],
          "operationId": "patchCoreV1NamespacedConfigMap",
          "responses": {
            "200": {"description": "OK",
                    "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.ConfigMap"}},
            "401": {"description": "Unauthorized"}
          },
          "x-kubernetes-action": "patch",
          "x-kubernetes-group-version-kind": {"group": "", "version": "v1", "kind": "ConfigMap"}
        }
      }
    },
    "definitions": {
      "io.k8s.api.core.v1.ConfigMap": {
        "description": "ConfigMap holds configuration data for pods to consume (served by the klutch openapi_v2 test).",
        "type": "object",
        "properties": {
          "apiVersion": {"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"},
          "binaryData": {"description": "BinaryData contains the binary data.", "type": "object",
                         "additionalProperties": {"type": "string", "format": "byte"}},
          "data": {"description": "Data contains the configuration data (klutch test marker).",
                   "type": "object", "additionalProperties": {"type": "string", "default": ""}},
          "immutable": {"description": "Immutable, if set to true, ensures that data stored in the ConfigMap cannot be updated.", "type": "boolean"},
          "kind": {"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"},
          "metadata": {"description": "Standard object's metadata.", "default": {},
                       "$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
        },
        "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}]
      },
      "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "type": "object",
        "properties": {
          "annotations": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
          "finalizers": {"type": "array", "items": {"type": "string", "default": ""},
                         "x-kubernetes-patch-strategy": "merge"},
          "generation": {"type": "integer", "format": "int64"},
          "labels": {"type": "object", "additionalProperties": {"type": "string", "default": ""}},
          "name": {"description": "Name must be unique within a namespace.", "type": "string"},
          "namespace": {"type": "string"}
        }
      },
      "io.k8s.apimachinery.pkg.apis.meta.v1.Patch": {
        "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body.",
        "type": "object"
      }
    },
    "parameters": {
      "namespace-vgWSWtn3": {"uniqueItems": true, "type": "string", "name": "namespace",
                             "in": "path", "required": true,
                             "description": "object name and auth scope"}
    },
    "securityDefinitions": {
      "BearerToken": {"description": "Bearer Token authentication", "type": "apiKey",
                      "name": "authorization", "in": "header"}
    },
    "security": [{"BearerToken": []}]
  })json");
  doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"]["parameters"] =
      patch_params;
  // Every other message of the schema, so that kubectl's protobuf decoder and its OpenAPI
  // parser read them too; ConfigMap gains a `sink` field to make one of them visible.
  doc["definitions"]["io.k8s.api.core.v1.ConfigMap"]["properties"]["sink"] = {
      {"description", "Sink exercises every Schema keyword."},
      {"$ref", "#/definitions/io.klutch.test.v1.Sink"}};
  doc.merge_patch(Json::parse(R"json({
    "info": {"description": "d", "termsOfService": "t",
             "contact": {"name": "n", "url": "https://u", "email": "e@x", "x-c": 1},
             "license": {"name": "Apache 2.0", "url": "https://l"}, "x-info": [1, "two"]},
    "host": "127.0.0.1", "basePath": "/", "schemes": ["http", "https"],
    "consumes": ["application/json"], "produces": ["application/json"],
    "tags": [{"name": "core_v1", "description": "core", "externalDocs": {"url": "https://t"}}],
    "externalDocs": {"description": "docs", "url": "https://d"},
    "x-root": {"nested": [true, null, 1.5]},
    "paths": {
      "/kitchen/{sink}": {
        "$ref": "#/paths/other",
        "get": {
          "summary": "s", "deprecated": true, "security": [{"BearerToken": []}],
          "externalDocs": {"url": "https://o"},
          "parameters": [
            {"name": "X-Thing", "in": "header", "type": "array", "collectionFormat": "csv",
             "items": {"type": "integer", "format": "int32", "maximum": 10.5,
                       "exclusiveMaximum": true, "enum": [1, 2], "default": 1,
                       "items": {"type": "string"}}},
            {"name": "f", "in": "formData", "type": "string", "allowEmptyValue": true,
             "minLength": 1, "maxLength": 9, "pattern": "^a", "enum": ["a", "ab"]},
            {"name": "sink", "in": "path", "required": true, "type": "string",
             "minimum": -1, "exclusiveMinimum": true, "multipleOf": 0.25},
            {"name": "q", "in": "query", "type": "array", "maxItems": 3, "minItems": 1,
             "uniqueItems": true, "items": {"type": "string"}, "x-q": "ext"},
            {"$ref": "#/parameters/body-sink"}
          ],
          "responses": {
            "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.klutch.test.v1.Sink"},
                    "headers": {"X-Rate": {"type": "integer", "description": "r", "minimum": 0}},
                    "examples": {"application/json": {"n": 1}}, "x-r": "ext"},
            "404": {"$ref": "#/responses/NotFound"},
            "default": {"description": "a file", "schema": {"type": "file", "format": "binary"}},
            "x-responses": 1
          }
        },
        "x-path": "ext"
      }
    },
    "definitions": {
      "io.klutch.test.v1.Sink": {
        "title": "Sink", "description": "Sink exercises every Schema keyword.", "type": "object",
        "discriminator": "kind", "required": ["kind"], "maxProperties": 10, "minProperties": 1,
        "externalDocs": {"url": "https://s"}, "example": {"kind": "Sink"},
        "properties": {
          "kind": {"type": "string", "enum": ["Sink", null], "readOnly": true,
                   "xml": {"name": "k", "namespace": "https://n", "prefix": "p",
                           "attribute": true, "wrapped": false}},
          "number": {"type": "number", "format": "double", "multipleOf": 0.5, "maximum": 3.5,
                     "exclusiveMaximum": true, "minimum": -1e10, "exclusiveMinimum": false,
                     "default": 1.5},
          "text": {"type": "string", "maxLength": 64, "minLength": 0, "pattern": "^[a-z]+$"},
          "list": {"type": "array", "items": {"type": "integer", "format": "int32"},
                   "maxItems": 5, "minItems": 0, "uniqueItems": true},
          "tuple": {"type": "array", "items": [{"type": "string"}]},
          "anything": {"type": "object", "additionalProperties": true},
          "nothing": {"type": "object", "additionalProperties": false, "properties": {}},
          "combined": {"allOf": [{"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}]}
        },
        "x-kubernetes-preserve-unknown-fields": true
      }
    },
    "parameters": {
      "body-sink": {"name": "body", "in": "body", "required": true, "description": "b",
                    "schema": {"$ref": "#/definitions/io.klutch.test.v1.Sink"}, "x-p": 1},
      "header-trace": {"name": "X-Trace", "in": "header", "type": "string"}
    },
    "responses": {
      "NotFound": {"description": "not found",
                   "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}}
    },
    "securityDefinitions": {
      "basic": {"type": "basic", "description": "b", "x-s": 1},
      "implicit": {"type": "oauth2", "flow": "implicit", "authorizationUrl": "https://a",
                   "scopes": {"read": "r"}},
      "password": {"type": "oauth2", "flow": "password", "tokenUrl": "https://t",
                   "scopes": {"read": "r"}},
      "application": {"type": "oauth2", "flow": "application", "tokenUrl": "https://t",
                      "scopes": {}},
      "accessCode": {"type": "oauth2", "flow": "accessCode", "authorizationUrl": "https://a",
                     "tokenUrl": "https://t", "scopes": {"read": "r", "write": "w"}}
    },
    "security": [{"BearerToken": []}, {"accessCode": ["read", "write"]}]
  })json"));
  return doc;
}

struct Recorded {
  std::string method;
  std::string path;
  std::string target;
  std::string accept;
  std::string body;
};

// Just enough of an API server for kubectl to map "configmap" and fetch /openapi/v2; POSTs of
// ConfigMaps are echoed back as created. Every request is recorded.
class FakeApiServer {
 public:
  explicit FakeApiServer(std::string openapi_v2) : openapi_v2_(std::move(openapi_v2)) {}

  core::Status Start() {
    auto server = http::Server::Start({}, [this](http::Request& r) { return Handle(r); });
    if (!server.ok()) return server.status();
    server_ = std::move(*server);
    return core::Status::Ok();
  }
  uint16_t port() const { return server_->port(); }

  std::vector<Recorded> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  static http::Response JsonResponse(int status, const Json& body) {
    http::Response r;
    r.status = status;
    r.headers.Set("Content-Type", "application/json");
    r.body = body.dump();
    return r;
  }

  http::Response Handle(http::Request& r) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(
          {r.method, r.path, r.target, std::string(r.headers.Get("Accept")), r.body});
    }
    if (r.method == "GET" && r.path == "/version") {
      return JsonResponse(200, {{"major", "1"},
                                {"minor", "27"},
                                {"gitVersion", "v1.27.0"},
                                {"gitCommit", "0000000000000000000000000000000000000000"},
                                {"gitTreeState", "clean"},
                                {"buildDate", "2023-04-11T00:00:00Z"},
                                {"goVersion", "go1.20.3"},
                                {"compiler", "gc"},
                                {"platform", "linux/amd64"}});
    }
    if (r.method == "GET" && r.path == "/api") {
      return JsonResponse(200, {{"kind", "APIVersions"},
                                {"versions", {"v1"}},
                                {"serverAddressByClientCIDRs",
                                 {{{"clientCIDR", "0.0.0.0/0"},
                                   {"serverAddress", "127.0.0.1:" + std::to_string(port())}}}}});
    }
    if (r.method == "GET" && r.path == "/apis") {
      return JsonResponse(
          200, {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", Json::array()}});
    }
    if (r.method == "GET" && r.path == "/api/v1") {
      return JsonResponse(200, Json::parse(R"({
        "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [{"name": "configmaps", "singularName": "configmap", "namespaced": true,
                       "kind": "ConfigMap", "shortNames": ["cm"],
                       "verbs": ["create", "delete", "deletecollection", "get", "list",
                                 "patch", "update", "watch"]}]})"));
    }
    if (r.method == "GET" && r.path == "/openapi/v2" &&
        r.headers.Get("Accept").find("protobuf") != std::string_view::npos) {
      http::Response resp;
      resp.headers.Set("Content-Type", std::string(kOpenApiV2ProtobufContentType));
      resp.body = openapi_v2_;
      return resp;
    }
    if (r.method == "POST" && r.path == "/api/v1/namespaces/default/configmaps") {
      auto object = ParseYaml(r.body);
      if (!object.ok() || !object->is_object()) {
        return JsonResponse(400, {{"kind", "Status"}, {"status", "Failure"}, {"code", 400}});
      }
      (*object)["metadata"]["namespace"] = "default";
      (*object)["metadata"]["uid"] = "6a1b1f0e-0000-4000-8000-000000000001";
      (*object)["metadata"]["resourceVersion"] = "1";
      (*object)["metadata"]["creationTimestamp"] = "2024-05-01T10:00:00Z";
      return JsonResponse(201, *object);
    }
    return JsonResponse(404, {{"kind", "Status"},
                              {"apiVersion", "v1"},
                              {"metadata", Json::object()},
                              {"status", "Failure"},
                              {"message", "the server could not find the requested resource"},
                              {"reason", "NotFound"},
                              {"details", Json::object()},
                              {"code", 404}});
  }

  const std::string openapi_v2_;
  std::unique_ptr<http::Server> server_;
  mutable std::mutex mu_;
  std::vector<Recorded> requests_;
};

class OpenApiV2Kubectl : public ::testing::TestWithParam<std::string> {
 protected:
  // Serves SwaggerDocument(field_validation) and writes a kubeconfig pointing at it.
  void Serve(bool field_validation) {
    auto encoded = EncodeOpenApiV2Protobuf(SwaggerDocument(field_validation));
    ASSERT_TRUE(encoded.ok()) << encoded.status().ToString();
    server_ = std::make_unique<FakeApiServer>(std::move(*encoded));
    core::Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
    std::ofstream(work_.path() / "kubeconfig") << "apiVersion: v1\n"
                                                  "kind: Config\n"
                                                  "clusters:\n"
                                                  "- name: fake\n"
                                                  "  cluster:\n"
                                                  "    server: http://127.0.0.1:"
                                               << server_->port()
                                               << "\n"
                                                  "contexts:\n"
                                                  "- name: fake\n"
                                                  "  context:\n"
                                                  "    cluster: fake\n"
                                                  "    user: anonymous\n"
                                                  "    namespace: default\n"
                                                  "current-context: fake\n"
                                                  "users:\n"
                                                  "- name: anonymous\n"
                                                  "  user: {}\n";
    std::ofstream(work_.path() / "cm.yaml") << "apiVersion: v1\n"
                                               "kind: ConfigMap\n"
                                               "metadata:\n"
                                               "  name: probe\n"
                                               "data:\n"
                                               "  k: v\n"
                                               "extra: 1\n";
  }

  // Runs `kubectl.<version> <args>` with a private HOME (and so discovery cache).
  testing::CommandResult Kubectl(const std::string& args) {
    std::map<std::string, std::string> env = {
        {"KUBECONFIG", (work_.path() / "kubeconfig").string()},
        {"HOME", work_.path().string()},
        {"LC_ALL", "C"},
    };
    testing::CommandResult r = testing::RunShell(kubectl_.string() + " " + args, env, work_.path(),
                                                 std::chrono::seconds(60));
    EXPECT_FALSE(r.timed_out) << args;
    return r;
  }

  void SetUp() override {
    kubectl_ = "/usr/lib/google-cloud-sdk/bin/kubectl." + GetParam();
    // Every kubectl version is part of the machine: a missing one fails the test.
    ASSERT_TRUE(fs::exists(kubectl_))
        << kubectl_ << " is missing: kubectl " << GetParam() << " is required to run this test";
  }

  // GET /openapi/v2 requests, each with the protobuf media type kubectl asks for.
  int OpenApiV2Fetches() const {
    int n = 0;
    for (const Recorded& r : server_->requests()) {
      if (r.method != "GET" || r.path != "/openapi/v2") continue;
      EXPECT_NE(r.accept.find(kOpenApiV2ProtobufDeprecatedContentType), std::string::npos)
          << r.accept;
      ++n;
    }
    return n;
  }

  std::vector<Recorded> Posts() const {
    std::vector<Recorded> out;
    for (const Recorded& r : server_->requests()) {
      if (r.method == "POST") out.push_back(r);
    }
    return out;
  }

  fs::path kubectl_;
  testing::TempDir work_{"klutch-openapi-v2"};
  std::unique_ptr<FakeApiServer> server_;
};

TEST_P(OpenApiV2Kubectl, ExplainPrintsTheDocumentsDefinition) {
  Serve(/*field_validation=*/true);
  auto r = Kubectl("explain configmap --output=plaintext-openapiv2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("KIND:"), std::string::npos) << r.out;
  // kubectl wraps descriptions at 80 columns.
  EXPECT_NE(
      r.out.find("     ConfigMap holds configuration data for pods to consume (served by the\n"
                 "     klutch openapi_v2 test)."),
      std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("Data contains the configuration data (klutch test marker)."),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("data\t<map[string]string>"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("immutable\t<boolean>"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metadata\t<Object>"), std::string::npos) << r.out;
  EXPECT_GE(OpenApiV2Fetches(), 1);

  // A nested field follows the $ref into ObjectMeta.
  r = Kubectl("explain configmap.metadata.finalizers --output=plaintext-openapiv2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("FIELD:    finalizers <[]string>"), std::string::npos) << r.out;

  // The kitchen-sink definition decoded with all its keywords.
  r = Kubectl("explain configmap.sink --output=plaintext-openapiv2");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* want :
       {"RESOURCE: sink <Object>", "Sink exercises every Schema keyword.",
        "kind\t<string> -required-", "number\t<number>", "text\t<string>", "list\t<[]integer>",
        "tuple\t<[]string>", "anything\t<map[string]>", "nothing\t<Object>"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " in:\n" << r.out;
  }
}

TEST_P(OpenApiV2Kubectl, CreateLeavesValidationToTheServerWhenPatchTakesFieldValidation) {
  Serve(/*field_validation=*/true);
  auto r = Kubectl("create -f cm.yaml --dry-run=server");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "configmap/probe created (server dry run)\n");
  auto posts = Posts();
  ASSERT_EQ(posts.size(), 1u);
  EXPECT_NE(posts[0].target.find("fieldValidation=Strict"), std::string::npos) << posts[0].target;
  EXPECT_NE(posts[0].target.find("dryRun=All"), std::string::npos) << posts[0].target;
  // The unknown field reached the server: kubectl did not validate client-side.
  EXPECT_NE(posts[0].body.find("\"extra\""), std::string::npos) << posts[0].body;
}

TEST_P(OpenApiV2Kubectl, CreateValidatesClientSideAgainstTheDefinitionsOtherwise) {
  Serve(/*field_validation=*/false);
  auto r = Kubectl("create -f cm.yaml --dry-run=server");
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("unknown field \"extra\""), std::string::npos) << r.err;
  EXPECT_TRUE(Posts().empty());
  EXPECT_GE(OpenApiV2Fetches(), 1);
}

INSTANTIATE_TEST_SUITE_P(Versions, OpenApiV2Kubectl, ::testing::Values("1.27", "1.32", "1.33"),
                         [](const auto& info) {
                           std::string name = "kubectl_" + info.param;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

}  // namespace
}  // namespace klutch::codec
