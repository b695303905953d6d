// The protocol documents (BindingProvider, BindingResponse, the export request): the shape each
// encoder writes, a round trip through its decoder, what each decoder refuses, a BindingResponse
// as upstream Klutch's Go backend writes it, and the callback payload.
#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <string>

#include "apis/klutch/binding_provider.h"
#include "apis/klutch/binding_response.h"
#include "apis/klutch/export_request.h"
#include "core/strings.h"
#include "machinery/json.h"

namespace klutch::apis::klutch::protocol_test {
namespace {

using machinery::Json;

BindingProvider Provider(std::string name, std::string authorize,
                         std::optional<std::array<std::string, 3>> device = std::nullopt) {
  BindingProvider p{.pretty_name = std::move(name),
                    .version = "v0.0.0",
                    .authenticated_url = std::move(authorize)};
  if (device) {
    p.device_authorization_url = (*device)[0];
    p.device_token_url = (*device)[1];
    p.device_bind_url = (*device)[2];
  }
  return p;
}

TEST(BindingProvider, HasUpstreamShapeAndOurDeviceMethodLast) {
  Json j = EncodeBindingProvider(Provider("anynines", "https://b/authorize"));
  EXPECT_EQ(j, Json::parse(R"({"kind":"BindingProvider","apiVersion":"v1alpha1",
    "providerPrettyName":"anynines","version":"v0.0.0","authenticationMethods":[
    {"method":"OAuth2CodeGrant","oauth2CodeGrant":{"authenticatedURL":"https://b/authorize"}}]})"));
  Json d = EncodeBindingProvider(
      Provider("x", "https://b/authorize",
               std::array<std::string, 3>{"https://b/device/authorize", "https://b/device/token",
                                          "https://b/device/bind"}));
  ASSERT_EQ(d["authenticationMethods"].size(), 2u);
  EXPECT_EQ(d["authenticationMethods"][0]["method"], "OAuth2CodeGrant");
  EXPECT_EQ(d["authenticationMethods"][1],
            Json::parse(R"({"method":"OAuth2DeviceGrant","oauth2DeviceGrant":{
              "deviceAuthorizationURL":"https://b/device/authorize","tokenURL":"https://b/device/token",
              "bindURL":"https://b/device/bind"}})"));
}

TEST(BindingProvider, RoundTrips) {
  for (const BindingProvider& p :
       {Provider("anynines", "https://b/authorize"),
        Provider("x", "https://b/authorize",
                 std::array<std::string, 3>{"https://b/d/a", "https://b/d/t", "https://b/d/b"}),
        Provider("x", "https://b/authorize",
                 std::array<std::string, 3>{"https://b/d/a", "https://b/d/t", ""})}) {
    auto decoded = DecodeBindingProvider(EncodeBindingProvider(p));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, p);
  }
}

TEST(BindingProvider, DecoderTakesTheFirstMethodOfEachKindAndRefusesOthers) {
  Json doc = EncodeBindingProvider(Provider("p", "https://first/authorize"));
  doc["authenticationMethods"].push_back(
      {{"method", "OAuth2CodeGrant"}, {"oauth2CodeGrant", {{"authenticatedURL", "https://2nd"}}}});
  doc["authenticationMethods"].push_back({{"method", "Carrier pigeon"}});
  auto decoded = DecodeBindingProvider(doc);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->authenticated_url, "https://first/authorize");

  Json wrong_kind = doc;
  wrong_kind["kind"] = "Secret";
  EXPECT_NE(DecodeBindingProvider(wrong_kind).status().message().find("instead of BindingProvider"),
            std::string::npos);
  Json grouped = doc;
  grouped["apiVersion"] = "klutch.anynines.com/v1alpha1";
  EXPECT_NE(DecodeBindingProvider(grouped).status().message().find("v1alpha1"), std::string::npos);
  Json none = doc;
  none["authenticationMethods"] = Json::array({{{"method", "Carrier pigeon"}}});
  EXPECT_FALSE(DecodeBindingProvider(none).ok());
  EXPECT_FALSE(DecodeBindingProvider(Json("<html>")).ok());
}

TEST(ExportRequest, HasSpecShapeAndRoundTrips) {
  Json claims = Json::array({{{"group", ""}, {"resource", "secrets"}, {"version", "v1"}}});
  ExportRequest request = ExportRequestFor("anynines.com", "postgresqlinstances", claims);
  Json req = EncodeExportRequest(request);
  EXPECT_EQ(req["kind"], "APIServiceExportRequest");
  EXPECT_EQ(req["apiVersion"], "klutch.anynines.com/v1alpha1");
  EXPECT_EQ(req["metadata"], Json::parse(R"({"name":"postgresqlinstances.anynines.com"})"));
  EXPECT_EQ(req["spec"]["resources"][0]["group"], "anynines.com");
  EXPECT_EQ(req["spec"]["resources"][0]["resource"], "postgresqlinstances");
  EXPECT_EQ(req["spec"]["resources"][0]["permissionClaims"], claims);
  EXPECT_EQ(req["status"], Json::object());
  EXPECT_FALSE(
      EncodeExportRequest(ExportRequestFor("g", "r", Json::array()))["spec"]["resources"][0]
          .contains("permissionClaims"));

  for (const ExportRequest& r :
       {request, ExportRequestFor("g", "r", Json::array()),
        ExportRequest{.name = "",
        .resources = {{.group = "", .resource = "configmaps"},
                      {.group = "a.b", .resource = "cs", .permission_claims = claims}}}}) {
    auto decoded = DecodeExportRequest(EncodeExportRequest(r));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, r);
  }
}

TEST(ExportRequest, DecoderRefusesWhatCannotBeBound) {
  Json good = EncodeExportRequest(ExportRequestFor("g", "r", Json()));
  Json no_resources = good;
  no_resources["spec"]["resources"] = Json::array();
  EXPECT_NE(DecodeExportRequest(no_resources).status().message().find("names no resource"),
            std::string::npos);
  Json unnamed = good;
  unnamed["spec"]["resources"][0].erase("resource");
  EXPECT_NE(DecodeExportRequest(unnamed).status().message().find("needs a resource"),
            std::string::npos);
  Json other = good;
  other["apiVersion"] = "kube-bind.io/v1alpha1";
  EXPECT_NE(DecodeExportRequest(other).status().message().find("expected an "
                                                               "APIServiceExportRequest"),
            std::string::npos);
  EXPECT_FALSE(DecodeExportRequest(Json::array()).ok());
}

BindingResponse Response(std::string display_name = "") {
  Json claims = Json::array({{{"group", ""}, {"resource", "secrets"}, {"version", "v1"}}});
  return BindingResponse{.session_id = "aB3xZ9",
                         .id = "https://idp/1234",
                         .display_name = std::move(display_name),
                         .kubeconfig = "apiVersion: v1\n",
                         .requests = {EncodeExportRequest(
                             ExportRequestFor("anynines.com", "postgresqlinstances", claims))}};
}

TEST(BindingResponse, HasSpecShape) {
  Json r = EncodeBindingResponse(Response());
  EXPECT_EQ(r["kind"], "BindingResponse");
  EXPECT_EQ(r["apiVersion"], "klutch.anynines.com/v1alpha1");
  EXPECT_EQ(r["authentication"]["oauth2CodeGrant"]["sid"], "aB3xZ9");
  EXPECT_EQ(r["authentication"]["oauth2CodeGrant"]["id"], "https://idp/1234");
  EXPECT_EQ(r["kubeconfig"], core::Base64Encode("apiVersion: v1\n"));
  ASSERT_EQ(r["requests"].size(), 1u);
  EXPECT_EQ(r["requests"][0]["kind"], "APIServiceExportRequest");
}

// Issue #23: kubectl bind greeted the user with the subject ("as Mne2w2..."), a name nobody knows.
TEST(BindingResponse, CarriesTheDisplayNameOnlyWhenKnown) {
  BindingResponse named = Response("alice");
  named.requests.clear();
  EXPECT_EQ(EncodeBindingResponse(named)["authentication"]["oauth2CodeGrant"]["displayName"],
            "alice");
  BindingResponse unnamed = Response();
  unnamed.requests.clear();
  EXPECT_FALSE(
      EncodeBindingResponse(unnamed)["authentication"]["oauth2CodeGrant"].contains("displayName"));
}

TEST(BindingResponse, RoundTrips) {
  for (const BindingResponse& r : {Response(), Response("alice")}) {
    auto decoded = DecodeBindingResponse(EncodeBindingResponse(r));
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    EXPECT_EQ(*decoded, r);
    // Through the callback payload too, as kubectl bind receives it.
    auto text = DecodeAnyBase64(EncodeResponsePayload(EncodeBindingResponse(r)));
    ASSERT_TRUE(text.has_value());
    auto again = DecodeBindingResponse(Json::parse(*text));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, r);
  }
}

// What upstream Klutch's backend (Go, encoding/json) writes: struct field order, the kubeconfig
// as a []byte (standard base64, padded), no displayName, each request an
// APIServiceExportRequestResponse (metadata with the name only, an empty status). Written here
// from bind-protocol.md §1.1 and §1.9 and upstream's types.
TEST(BindingResponse, DecodesWhatUpstreamsBackendWrites) {
  const std::string kubeconfig =
      "apiVersion: v1\nkind: Config\nclusters:\n- name: provider\n  cluster:\n"
      "    server: https://cp.example.com:6443\ncontexts:\n- name: provider\n  context:\n"
      "    cluster: provider\n    namespace: cluster-7qaxin\n    user: provider\n"
      "current-context: provider\nusers:\n- name: provider\n  user:\n    token: abc\n";
  const std::string upstream =
      R"({"kind":"BindingResponse","apiVersion":"klutch.anynines.com/v1alpha1",)"
      R"("authentication":{"oauth2CodeGrant":{"sid":"4cgpcy","id":"https://idp.example.com/)"
      R"(realms/klutch/0f9e4a1c"}},"kubeconfig":")" +
      core::Base64Encode(kubeconfig) +
      R"(","requests":[{"kind":"APIServiceExportRequest","apiVersion":)"
      R"("klutch.anynines.com/v1alpha1","metadata":{"name":"postgresqlinstances.anynines.com"},)"
      R"("spec":{"resources":[{"group":"anynines.com","resource":"postgresqlinstances",)"
      R"("permissionClaims":[{"group":"","resource":"secrets","version":"v1",)"
      R"("selector":{"owner":"Provider"},"required":true}]}]},"status":{}}]})";
  auto decoded = DecodeBindingResponse(Json::parse(upstream));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->session_id, "4cgpcy");
  EXPECT_EQ(decoded->id, "https://idp.example.com/realms/klutch/0f9e4a1c");
  EXPECT_EQ(decoded->display_name, "");
  EXPECT_EQ(decoded->kubeconfig, kubeconfig);
  ASSERT_EQ(decoded->requests.size(), 1u);
  auto request = DecodeExportRequest(decoded->requests[0]);
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(request->name, "postgresqlinstances.anynines.com");
  ASSERT_EQ(request->resources.size(), 1u);
  EXPECT_EQ(request->resources[0].group, "anynines.com");
  EXPECT_EQ(request->resources[0].resource, "postgresqlinstances");
  EXPECT_EQ(request->resources[0].permission_claims[0]["selector"]["owner"], "Provider");
  // Encoding what was decoded writes the same document (key order aside).
  EXPECT_EQ(EncodeBindingResponse(*decoded), Json::parse(upstream));
}

TEST(BindingResponse, DecoderRefusesIncompleteResponses) {
  Json good = EncodeBindingResponse(Response());
  Json no_requests = good;
  no_requests["requests"] = Json::array();
  EXPECT_FALSE(DecodeBindingResponse(no_requests).ok());
  Json foreign = good;
  foreign["requests"] = Json::array({{{"kind", "Secret"}, {"apiVersion", "v1"}}});
  EXPECT_FALSE(DecodeBindingResponse(foreign).ok());
  Json no_kubeconfig = good;
  no_kubeconfig["kubeconfig"] = "";
  EXPECT_FALSE(DecodeBindingResponse(no_kubeconfig).ok());
  Json no_grant = good;
  no_grant.erase("authentication");
  EXPECT_FALSE(DecodeBindingResponse(no_grant).ok());
  Json upstream_group = good;
  upstream_group["apiVersion"] = "kube-bind.io/v1alpha1";
  EXPECT_FALSE(DecodeBindingResponse(upstream_group).ok());
}

TEST(ResponsePayload, DecodesWithBothAlphabetsToTheSameJson) {
  // Characters whose base64 differs between the alphabets at some offsets, at every offset.
  for (int pad = 0; pad < 3; ++pad) {
    Json v = {{"x", std::string(pad, 'a') + ">?~\x7f<&é\xff end"}};
    std::string payload = EncodeResponsePayload(v);
    EXPECT_EQ(payload.find_first_of("+/"), std::string::npos);
    auto standard = core::Base64Decode(payload);
    ASSERT_TRUE(standard.has_value()) << payload;
    auto url = core::Base64UrlDecode(payload);
    ASSERT_TRUE(url.has_value());
    EXPECT_EQ(*standard, *url);
    auto parsed = machinery::ParseJson(*standard);
    ASSERT_TRUE(parsed.ok());
    Json want = v;
    want["x"] = std::string(pad, 'a') + ">?~\x7f<&é\xef\xbf\xbd end";  // invalid byte replaced
    EXPECT_EQ(*parsed, want);
    EXPECT_EQ(standard->find_first_of("<>&?~\x7f"), std::string::npos) << *standard;
  }
  EXPECT_EQ(*DecodeAnyBase64("-_8="), *core::Base64Decode("+/8="));
}

}  // namespace
}  // namespace klutch::apis::klutch::protocol_test
