// Test helpers for the bind backend's HTTP side (src/bind/web/web_unit_test.cc, web_test.cc): a
// browser with a cookie jar that calls an http::Router in-process, and a Control Plane on a
// TestCluster with the provider CRDs, an offered API (postgresqlinstances.anynines.com) and
// its template. Not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apis/klutch/clusterbinding.h"
#include "apis/klutch/register.h"
#include "apis/klutch_crds.h"
#include "bind/web/web_protocol.h"
#include "client/dynamic.h"
#include "core/clock.h"
#include "core/strings.h"
#include "http/router.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "reconcile/crd_installer.h"
#include "test/support/test_cluster.h"

namespace klutch::bind::testing {

using machinery::Json;

// A browser: keeps cookies (name -> value) from Set-Cookie headers, sends them back, and
// follows nothing by itself (tests look at each redirect).
class Browser {
 public:
  explicit Browser(const http::Router& router, std::string host = "backend.test")
      : router_(router), host_(std::move(host)) {}

  http::Response Get(const std::string& target) { return Send("GET", target, ""); }
  http::Response Post(const std::string& target,
                      const std::vector<std::pair<std::string, std::string>>& form) {
    std::string body;
    for (const auto& [k, v] : form) {
      if (!body.empty()) body += '&';
      body += core::PercentEncode(k) + "=" + core::PercentEncode(v);
    }
    return Send("POST", target, body);
  }
  http::Response Send(const std::string& method, const std::string& target,
                      const std::string& body) {
    http::Request request;
    request.method = method;
    request.SetTarget(target);
    request.headers.Add("Host", host_);
    if (method == "POST") {
      request.headers.Add("Content-Type", "application/x-www-form-urlencoded");
    }
    std::string cookie;
    for (const auto& [k, v] : jar) {
      if (!cookie.empty()) cookie += "; ";
      cookie += k + "=" + v;
    }
    if (!cookie.empty()) request.headers.Add("Cookie", cookie);
    request.body = body;
    http::Response response = router_.Serve(request);
    for (const auto& [k, v] : response.headers.items()) {
      if (core::ToLower(k) != "set-cookie") continue;
      set_cookies.push_back(v);
      auto semi = v.find(';');
      std::string pair = v.substr(0, semi);
      auto eq = pair.find('=');
      std::string name = pair.substr(0, eq);
      std::string value = eq == std::string::npos ? "" : pair.substr(eq + 1);
      if (v.find("Max-Age=0") != std::string::npos) {
        jar.erase(name);
      } else {
        jar[name] = value;
      }
    }
    return response;
  }

  std::map<std::string, std::string> jar;
  std::vector<std::string> set_cookies;  // every Set-Cookie value seen

 private:
  const http::Router& router_;
  std::string host_;
};

// The value of query parameter `name` in `url`.
inline std::string QueryParam(const std::string& url, const std::string& name) {
  auto q = url.find('?');
  if (q == std::string::npos) return "";
  std::string_view query = std::string_view(url).substr(q + 1);
  if (auto hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  for (const auto& [k, v] : http::ParseQuery(query)) {
    if (k == name) return v;
  }
  return "";
}

// The hidden input `name` of the first form in `html` that holds `marker`.
inline std::string FormValue(const std::string& html, const std::string& name,
                             const std::string& marker = "<form") {
  auto at = html.find(marker);
  if (at == std::string::npos) return "";
  auto input = html.find("name=\"" + name + "\" value=\"", at);
  if (input == std::string::npos) return "";
  input += name.size() + 15;
  return html.substr(input, html.find('"', input) - input);
}

// The Control Plane side every test needs: provider CRDs, a claim CRD with a plan enum and a
// description, and the template offering it (with one permission claim).
inline core::Status SetUpControlPlane(client::RestClient& admin) {
  for (auto file : apis::ProviderCrdFiles(false)) {
    KLUTCH_ASSIGN_OR_RETURN(Json crd, machinery::ParseYaml(apis::KlutchCrdYaml(file)));
    KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(admin, crd, std::chrono::seconds(30)));
  }
  Json schema = {
      {"type", "object"},
      {"description", "A PostgreSQL <database> & its \"plan\""},
      {"properties",
       {{"spec",
         {{"type", "object"},
          {"properties",
           {{"plan", {{"type", "string"}, {"enum", {"small", "medium"}}}},
            {"service", {{"type", "string"}}}}}}},
        {"status", {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}};
  Json crd = {{"apiVersion", "apiextensions.k8s.io/v1"},
              {"kind", "CustomResourceDefinition"},
              {"metadata", {{"name", "postgresqlinstances.anynines.com"}}},
              {"spec",
               {{"group", "anynines.com"},
                {"scope", "Namespaced"},
                {"names",
                 {{"plural", "postgresqlinstances"},
                  {"singular", "postgresqlinstance"},
                  {"kind", "PostgresqlInstance"}}},
                {"versions", Json::array({{{"name", "v1"},
                                           {"served", true},
                                           {"storage", true},
                                           {"subresources", {{"status", Json::object()}}},
                                           {"schema", {{"openAPIV3Schema", schema}}}}})}}}};
  KLUTCH_RETURN_IF_ERROR(reconcile::InstallCrd(admin, crd, std::chrono::seconds(30)));
  client::ResourceClient namespaces(admin, client::resources::kNamespaces);
  (void)namespaces.Create(Json{
      {"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", "crossplane-system"}}}});
  Json tmpl = {
      {"apiVersion", "example-backend.klutch.anynines.com/v1alpha1"},
      {"kind", "APIServiceExportTemplate"},
      {"metadata", {{"name", "postgresqlinstances"}, {"namespace", "crossplane-system"}}},
      {"spec",
       {{"APIServiceSelector", {{"group", "anynines.com"}, {"resource", "postgresqlinstances"}}},
        {"permissionClaims", Json::array({{{"group", ""},
                                           {"resource", "secrets"},
                                           {"version", "v1"},
                                           {"required", true},
                                           {"selector", {{"owner", "Provider"}}}}})}}}};
  auto created =
      client::ResourceClient(admin, apis::klutch::kApiServiceExportTemplates, "crossplane-system")
          .Create(tmpl);
  if (!created.ok() && !core::IsAlreadyExists(created.status())) return created.status();
  return core::Status::Ok();
}

// What a connected konnector and a claim leave in cluster namespace `ns` (made by a bind):
// heartbeat and konnector v9.8.7, the App Cluster namespace "default" (Control Plane namespace
// <ns>-default), the export of postgresqlinstances.anynines.com (v1), served, and claim db1
// (spec `claim_spec`) there, Ready=False Creating "waiting for <broker> in namespace
// \"<ns>-default\"" (a Control Plane name in a reason). Returns the time
// written; failures are test failures.
inline std::string SeedConnectedClusterWithClaim(client::RestClient& admin, const std::string& ns,
                                                 const Json& claim_spec) {
  auto patch_status = [&](const client::GroupVersionResource& gvr, const std::string& in,
                          const std::string& name, const Json& status) {
    auto r = client::ResourceClient(admin, gvr, in)
                 .Patch(name, client::PatchType::kMerge, machinery::Dump({{"status", status}}), {},
                        "status");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
  };
  const std::string now = core::FormatTime(core::RealClock::Get().Now());
  patch_status(
      apis::klutch::kClusterBindings, ns, "cluster",
      {{"lastHeartbeatTime", now},
       {"konnectorVersion", "v9.8.7"},
       {"conditions",
        Json::array({{{"type", "Ready"}, {"status", "True"}, {"lastTransitionTime", now}}})}});
  EXPECT_TRUE(client::ResourceClient(admin, apis::klutch::kApiServiceNamespaces, ns)
                  .Create({{"apiVersion", "klutch.anynines.com/v1alpha1"},
                           {"kind", "APIServiceNamespace"},
                           {"metadata", {{"name", "default"}, {"namespace", ns}}},
                           {"spec", Json::object()}})
                  .ok());
  patch_status(apis::klutch::kApiServiceNamespaces, ns, "default",
               {{"namespace", ns + "-default"}});
  EXPECT_TRUE(client::ResourceClient(admin, client::resources::kNamespaces)
                  .Create({{"apiVersion", "v1"},
                           {"kind", "Namespace"},
                           {"metadata", {{"name", ns + "-default"}}}})
                  .ok());
  auto exported =
      client::ResourceClient(admin, apis::klutch::kApiServiceExports, ns)
          .Create({{"apiVersion", "klutch.anynines.com/v1alpha1"},
                   {"kind", "APIServiceExport"},
                   {"metadata", {{"name", "postgresqlinstances.anynines.com"}, {"namespace", ns}}},
                   {"spec",
                    {{"group", "anynines.com"},
                     {"names", {{"plural", "postgresqlinstances"}, {"kind", "PostgresqlInstance"}}},
                     {"scope", "Namespaced"},
                     {"informerScope", "Namespaced"},
                     {"versions",
                      Json::array({{{"name", "v1"},
                                    {"served", true},
                                    {"storage", true},
                                    {"subresources", Json::object()},
                                    {"schema", {{"openAPIV3Schema", {{"type", "object"}}}}}}})}}}});
  EXPECT_TRUE(exported.ok()) << exported.status().ToString();
  // Served: connected and established, though the summary waits for a schema-conformance
  // report no konnector sends.
  auto condition = [&](const char* type, const char* status, const char* message) {
    return Json{
        {"type", type}, {"status", status}, {"message", message}, {"lastTransitionTime", now}};
  };
  patch_status(
      apis::klutch::kApiServiceExports, ns, "postgresqlinstances.anynines.com",
      {{"conditions",
        Json::array({condition("Connected", "True", ""), condition("Established", "True", ""),
                     condition("Ready", "False", "no conformance report")})}});
  const client::GroupVersionResource claims{"anynines.com", "v1", "postgresqlinstances"};
  EXPECT_TRUE(client::ResourceClient(admin, claims, ns + "-default")
                  .Create({{"apiVersion", "anynines.com/v1"},
                           {"kind", "PostgresqlInstance"},
                           {"metadata", {{"name", "db1"}, {"namespace", ns + "-default"}}},
                           {"spec", claim_spec}})
                  .ok());
  patch_status(
      claims, ns + "-default", "db1",
      {{"conditions",
        Json::array({{{"type", "Ready"},
                      {"status", "False"},
                      {"reason", "Creating"},
                      {"message", "waiting for <broker> in namespace \"" + ns + "-default\""},
                      {"lastTransitionTime", now}}})}});

  return now;
}

// Names of the cluster namespaces (those with the identity annotation).
inline std::vector<std::string> ClusterNamespaces(client::RestClient& admin) {
  std::vector<std::string> out;
  auto list = client::ResourceClient(admin, client::resources::kNamespaces).ListAll();
  if (!list.ok()) return out;
  for (const auto& ns : (*list)["items"]) {
    if (!machinery::Annotation(ns, apis::klutch::kIdentityAnnotation).empty()) {
      out.push_back(machinery::Name(ns));
    }
  }
  return out;
}

// The BindingResponse in a redirect to the CLI (the `response` parameter), decoded with the
// standard alphabet as the Klutch CLI does.
inline Json DecodeResponse(const std::string& location) {
  std::string payload = QueryParam(location, "response");
  auto standard = core::Base64Decode(payload);
  EXPECT_TRUE(standard.has_value()) << "response is not standard base64: " << payload;
  if (!standard) return Json();
  auto json = machinery::ParseJson(*standard);
  EXPECT_TRUE(json.ok()) << *standard;
  return json.ok() ? *json : Json();
}

}  // namespace klutch::bind::testing
