// The OSB and backup-manager clients against FakeBroker on loopback (and a TLS listener for the
// TLS settings).
#include <gtest/gtest.h>

#include <filesystem>

#include "core/clock.h"
#include "http/certs.h"
#include "providers/anynines/backup_client.h"
#include "providers/anynines/osb_client.h"
#include "test/support/fake_broker.h"
#include "test/support/process.h"

namespace klutch::providers::anynines::clients_test {
namespace {

using testing::FakeBroker;

ServiceEndpoint EndpointOf(const FakeBroker& broker) {
  return {.url = broker.url() + "/",  // a trailing slash is ignored
          .username = broker.options().username,
          .password = broker.options().password,
          .timeout = std::chrono::seconds(10)};
}

std::unique_ptr<OsbClient> Osb(const FakeBroker& broker, OsbClientOptions options = {}) {
  auto c = OsbClient::New(EndpointOf(broker), options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

TEST(OsbClient, SendsVersionHeaderAndBasicAuthBelowTheUrlPrefix) {
  FakeBroker broker;
  ASSERT_TRUE(broker.ok());
  auto osb = Osb(broker);
  auto catalog = osb->Catalog();
  ASSERT_TRUE(catalog.ok()) << catalog.status().ToString();
  ASSERT_EQ(catalog->size(), 2u);
  EXPECT_EQ((*catalog)[0].plans.size(), 3u);
  auto reqs = broker.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].path, "/postgresql/v2/catalog");
  EXPECT_EQ(reqs[0].version, "2.14");
  EXPECT_EQ(reqs[0].authorization, "Basic " + core::Base64Encode("broker-user:broker-pass"));
}

TEST(OsbClient, CachesTheCatalogForItsTtl) {
  FakeBroker broker;
  core::FakeClock clock;
  auto osb = Osb(broker, {.catalog_ttl = std::chrono::seconds(15), .clock = &clock});
  ASSERT_TRUE(osb->Catalog().ok());
  ASSERT_TRUE(osb->ResolvePlan("a9s-postgresql15", "postgresql-single-nano").ok());
  clock.Advance(std::chrono::seconds(14));
  ASSERT_TRUE(osb->Catalog().ok());
  EXPECT_EQ(broker.requests("GET", "/v2/catalog").size(), 1u);
  clock.Advance(std::chrono::seconds(2));
  ASSERT_TRUE(osb->Catalog().ok());
  EXPECT_EQ(broker.requests("GET", "/v2/catalog").size(), 2u);
  auto uncached = Osb(broker, {.catalog_ttl = std::chrono::milliseconds(0), .clock = &clock});
  ASSERT_TRUE(uncached->Catalog().ok());
  ASSERT_TRUE(uncached->Catalog().ok());
  EXPECT_EQ(broker.requests("GET", "/v2/catalog").size(), 4u);
}

TEST(OsbClient, ResolvesServiceByPrefixAndPlanExactly) {
  FakeBroker broker;
  auto osb = Osb(broker);
  auto ids = osb->ResolvePlan("a9s-postgresql15", "postgresql-single-small");
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->service_id, "svc-pg");
  EXPECT_EQ(ids->plan_id, "plan-small");
  auto service = osb->ResolvePlan("a9s-mongodb", "x");
  EXPECT_TRUE(IsUserError(service.status()));
  EXPECT_EQ(service.status().message(),
            "no entry for the service name \"a9s-mongodb\" (the broker offers: "
            "a9s-postgresql15-ms-1687789907, a9s-keyvalue8)");
  auto plan = osb->ResolvePlan("a9s-postgresql", "postgresql-single");
  EXPECT_EQ(plan.status().message(),
            "no entry for the plan name \"postgresql-single\" (service "
            "a9s-postgresql15-ms-1687789907 offers: postgresql-single-nano, "
            "postgresql-single-small, postgresql-replica-small)");
}

TEST(OsbClient, ProvisionsAsynchronouslyAndFollowsTheOperation) {
  FakeBroker broker;
  auto osb = Osb(broker);
  auto op = osb->Provision({.instance_id = "i-1",
                            .service_id = "svc-pg",
                            .plan_id = "plan-nano",
                            .organization_guid = "org",
                            .space_guid = "space",
                            .parameters = {{"max_connections", 100}}});
  ASSERT_TRUE(op.ok()) << op.status().ToString();
  EXPECT_TRUE(op->async);
  EXPECT_EQ(op->operation, "provision-1");
  auto put = broker.requests("PUT", "/v2/service_instances/i-1");
  ASSERT_EQ(put.size(), 1u);
  EXPECT_EQ(put[0].query, "accepts_incomplete=true");
  auto body = machinery::ParseJson(put[0].body);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(
      *body,
      (Json{
          {"service_id", "svc-pg"},
          {"plan_id", "plan-nano"},
          {"organization_guid", "org"},
          {"space_guid", "space"},
          {"parameters", {{"max_connections", 100}}},
          {"context",
           {{"platform", "kubernetes"}, {"organization_guid", "org"}, {"space_guid", "space"}}}}));
  auto doc = osb->GetA9sInstance("i-1");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(machinery::GetString(*doc, {"state"}), "created");
  auto lo = osb->GetLastOperation("i-1", op->operation);
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_EQ(lo->state, "succeeded");
  EXPECT_EQ(broker.requests("GET", "/last_operation")[0].query, "operation=provision-1");
  auto svc = osb->GetServiceInstance("i-1");
  ASSERT_TRUE(svc.ok());
  EXPECT_EQ(machinery::GetString(*svc, {"plan_id"}), "plan-nano");
}

TEST(OsbClient, ChecksRequiredIdsBeforeSending) {
  FakeBroker broker;
  auto osb = Osb(broker);
  auto r = osb->Provision({.instance_id = "i", .service_id = "s", .plan_id = "p"});
  EXPECT_EQ(r.status().message(), "provision: organization_guid is required");
  EXPECT_FALSE(osb->Update({.instance_id = "i"}).ok());
  EXPECT_FALSE(osb->Deprovision("i", "s", "", true).ok());
  EXPECT_FALSE(osb->Bind("i", "", "s", "p", true).ok());
  EXPECT_FALSE(osb->Unbind("i", "b", "", "p", true).ok());
  EXPECT_TRUE(broker.requests().empty());
}

TEST(OsbClient, RejectsAnAsyncAnswerToASynchronousRequest) {
  FakeBroker broker;
  broker.Inject("PUT", "/v2/service_instances/", 202, {{"operation", "x"}});
  auto osb = Osb(broker);
  auto r = osb->Provision({.instance_id = "i",
                           .service_id = "svc-pg",
                           .plan_id = "plan-nano",
                           .organization_guid = "o",
                           .space_guid = "s",
                           .accepts_incomplete = false});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("202"), std::string::npos);
}

TEST(OsbClient, ErrorsKeepStatusCodeAndDescription) {
  FakeBroker broker;
  auto osb = Osb(broker);
  broker.Inject("PUT", "/v2/service_instances/", 400,
                {{"error", "BadRequest"}, {"description", "Instance limit reached."}});
  auto r = osb->Provision({.instance_id = "i",
                           .service_id = "svc-pg",
                           .plan_id = "plan-nano",
                           .organization_guid = "o",
                           .space_guid = "s"});
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsServiceError(r.status()));
  EXPECT_EQ(ServiceErrorStatus(r.status()), 400);
  EXPECT_EQ(ServiceErrorCode(r.status()), "BadRequest");
  EXPECT_EQ(ServiceErrorDescription(r.status()), "Instance limit reached.");
  bool internal = true;
  EXPECT_EQ(UserMessage(r.status(), internal), "Instance limit reached.");
  EXPECT_FALSE(internal);

  // 5xx and 4xx without a description are internal.
  broker.Inject("GET", "/v2/catalog", 500, {{"description", "database down"}});
  auto c = osb->Catalog();
  EXPECT_EQ(UserMessage(c.status(), internal), "Internal error in provider");
  EXPECT_TRUE(internal);
  broker.Inject("GET", "/v2/catalog", 409, Json::object());
  EXPECT_EQ(UserMessage(osb->Catalog().status(), internal), "Internal error in provider");
}

TEST(OsbClient, NotFoundMeansExactly404InstanceNotFound) {
  FakeBroker broker;
  auto osb = Osb(broker);
  auto missing = osb->GetA9sInstance("nope");
  EXPECT_TRUE(IsInstanceNotFound(missing.status()));
  broker.Inject("GET", "/instances/", 404, {{"error", "Other"}});
  EXPECT_FALSE(IsInstanceNotFound(osb->GetA9sInstance("nope").status()));
  broker.Inject("GET", "/instances/", 410, {{"error", "InstanceNotFound"}});
  auto gone = osb->GetA9sInstance("nope");
  EXPECT_FALSE(IsInstanceNotFound(gone.status()));
  EXPECT_TRUE(IsGoneOrNotFound(gone.status()));
}

TEST(OsbClient, BindsFetchesAndUnbinds) {
  FakeBroker broker({.polls_to_finish = 1});
  auto osb = Osb(broker);
  ASSERT_TRUE(osb->Provision({.instance_id = "i",
                              .service_id = "svc-pg",
                              .plan_id = "plan-nano",
                              .organization_guid = "o",
                              .space_guid = "s"})
                  .ok());
  auto early = osb->Bind("i", "b-1", "svc-pg", "plan-nano", true);
  EXPECT_EQ(ServiceErrorDescription(early.status()), "Instance is not provisioned currently.");
  ASSERT_TRUE(osb->GetLastOperation("i", "provision-1").ok());
  auto bound = osb->Bind("i", "b-1", "svc-pg", "plan-nano", true);
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_FALSE(bound->async);
  const Json* creds = machinery::Find(bound->body, {"credentials"});
  ASSERT_TRUE(creds);
  EXPECT_EQ(machinery::GetString(*creds, {"host"}), "pg.example.internal");
  auto put = broker.requests("PUT", "/service_bindings/b-1");
  ASSERT_EQ(put.size(), 2u);
  EXPECT_EQ(machinery::ParseJson(put[1].body).value(),
            (Json{{"service_id", "svc-pg"}, {"plan_id", "plan-nano"}}));
  auto fetched = osb->GetBinding("i", "b-1");
  ASSERT_TRUE(fetched.ok());
  EXPECT_EQ(*machinery::Find(*fetched, {"credentials"}), *creds);
  ASSERT_TRUE(osb->Unbind("i", "b-1", "svc-pg", "plan-nano", true).ok());
  auto del = broker.requests("DELETE", "/service_bindings/b-1");
  ASSERT_EQ(del.size(), 1u);
  EXPECT_EQ(del[0].query, "service_id=svc-pg&plan_id=plan-nano&accepts_incomplete=true");
  // Unbinding again: 410, which is success; an empty 200 body is accepted too.
  EXPECT_TRUE(osb->Unbind("i", "b-1", "svc-pg", "plan-nano", true).ok());
  EXPECT_TRUE(IsGoneOrNotFound(osb->GetBinding("i", "b-1").status()));
}

TEST(OsbClient, UpdatesWithParameterDeltaAndDeprovisions) {
  FakeBroker broker;
  auto osb = Osb(broker);
  ASSERT_TRUE(osb->Provision({.instance_id = "i",
                              .service_id = "svc-pg",
                              .plan_id = "plan-nano",
                              .organization_guid = "o",
                              .space_guid = "s"})
                  .ok());
  auto up = osb->Update({.instance_id = "i",
                         .service_id = "svc-pg",
                         .plan_id = "plan-small",
                         .parameters = {{"gone", nullptr}, {"kept", 1}},
                         .organization_guid = "o",
                         .space_guid = "s",
                         .previous_plan_id = "plan-nano"});
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_TRUE(up->async);
  auto patch = broker.requests("PATCH", "/v2/service_instances/i");
  ASSERT_EQ(patch.size(), 1u);
  auto body = machinery::ParseJson(patch[0].body).value();
  EXPECT_EQ(body["parameters"], (Json{{"gone", nullptr}, {"kept", 1}}));
  EXPECT_EQ(body["previous_values"]["plan_id"], "plan-nano");
  auto del = osb->Deprovision("i", "svc-pg", "plan-small", true);
  ASSERT_TRUE(del.ok());
  EXPECT_TRUE(del->async);
  EXPECT_EQ(broker.requests("DELETE", "/v2/service_instances/i")[0].query,
            "service_id=svc-pg&plan_id=plan-small&accepts_incomplete=true");
  // 410 from a deprovision is success.
  broker.Inject("DELETE", "/v2/service_instances/", 410, Json::object());
  EXPECT_TRUE(osb->Deprovision("i", "svc-pg", "plan-small", true).ok());
}

TEST(OsbClient, HealthCheckWantsExactly200) {
  FakeBroker broker;
  auto osb = Osb(broker);
  EXPECT_TRUE(osb->CheckHealth("/instances").ok());
  EXPECT_EQ(broker.requests("HEAD", "/instances").size(), 1u);
  broker.Inject("HEAD", "/instances", 202, Json::object());
  auto s = osb->CheckHealth("/instances");
  EXPECT_EQ(s.message(), "Received unexpected status 202");
}

TEST(OsbClient, UnreachableBrokerNamesItsUrl) {
  FakeBroker broker;
  std::string url = broker.url();
  auto osb = Osb(broker);
  broker.Stop();
  auto r = osb->Catalog();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(IsUnreachable(r.status()));
  bool internal = true;
  std::string message = UserMessage(r.status(), internal);
  EXPECT_FALSE(internal);
  EXPECT_TRUE(message.starts_with("the service broker at " + url + " is unreachable: ")) << message;
}

TEST(OsbClient, WrongCredentialsAreShownAsRefused) {
  FakeBroker broker;
  ServiceEndpoint e = EndpointOf(broker);
  e.password = "wrong";
  auto osb = OsbClient::New(e).value();
  auto r = osb->Catalog();
  EXPECT_EQ(ServiceErrorStatus(r.status()), 401);
  bool internal = true;
  EXPECT_NE(UserMessage(r.status(), internal).find("refused the ProviderConfig's credentials"),
            std::string::npos);
  EXPECT_FALSE(internal);
}

TEST(ApiClient, ValidatesUrlAndTlsSettings) {
  EXPECT_TRUE(IsUserError(OsbClient::New({.url = "ftp://x"}).status()));
  auto both = OsbClient::New({.url = "https://x",
                              .ca_pem = "-----BEGIN CERTIFICATE-----\n",
                              .insecure_skip_verify = true});
  EXPECT_TRUE(IsUserError(both.status()));
  auto bad_ca = BackupClient::New({.url = "https://x", .ca_pem = "not pem"});
  EXPECT_EQ(bad_ca.status().message(), "failed to parse CA certificate");
}

TEST(ApiClient, SpeaksTlsWithCaBundleServerNameOrInsecure) {
  auto ca = http::GenerateCertificateAuthority("broker-ca", std::chrono::hours(1));
  ASSERT_TRUE(ca.ok());
  auto cert = http::IssueCertificate(
      *ca, {.common_name = "broker", .dns_names = {"broker.internal"}, .server = true});
  ASSERT_TRUE(cert.ok());
  klutch::testing::TempDir dir("anynines-tls");
  auto cert_file = dir.Write("tls.crt", cert->certificate);
  auto key_file = dir.Write("tls.key", cert->private_key);
  auto server = http::Server::Start(
      {.tls = http::TlsOptions{.certificate_file = cert_file, .key_file = key_file}},
      [](http::Request&) {
        http::Response r;
        r.body = R"({"services":[]})";
        return r;
      });
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  std::string url = "https://127.0.0.1:" + std::to_string((*server)->port());
  auto with_name =
      OsbClient::New({.url = url, .ca_pem = ca->certificate, .server_name = "broker.internal"});
  ASSERT_TRUE(with_name.ok());
  EXPECT_TRUE((*with_name)->Catalog().ok()) << (*with_name)->Catalog().status().ToString();
  auto insecure = OsbClient::New({.url = url, .insecure_skip_verify = true});
  EXPECT_TRUE((*insecure)->Catalog().ok());
  auto other_ca = http::GenerateCertificateAuthority("other", std::chrono::hours(1));
  auto untrusted = OsbClient::New(
      {.url = url, .ca_pem = other_ca->certificate, .server_name = "broker.internal"});
  auto r = (*untrusted)->Catalog();
  EXPECT_TRUE(IsUnreachable(r.status())) << r.status().ToString();
  (*server)->Stop();
}

// --- backup manager -----------------------------------------------------------------------------

TEST(BackupClient, RunsBackupAndRestoreWithoutTheBrokerVersionHeader) {
  FakeBroker broker;
  auto osb = Osb(broker);
  ASSERT_TRUE(osb->Provision({.instance_id = "i",
                              .service_id = "svc-pg",
                              .plan_id = "plan-nano",
                              .organization_guid = "o",
                              .space_guid = "s"})
                  .ok());
  auto manager = BackupClient::New(EndpointOf(broker)).value();
  auto id = manager->CreateBackup("i");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto post = broker.requests("POST", "/instances/i/backups");
  ASSERT_EQ(post.size(), 1u);
  EXPECT_EQ(post[0].version, "");
  EXPECT_EQ(post[0].body, "");
  auto b = manager->GetBackup("i", *id);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->status, "running");
  b = manager->GetBackup("i", *id);
  EXPECT_EQ(b->status, "done");
  EXPECT_EQ(b->size, 4096);
  EXPECT_EQ(b->finished_at, "2024-05-01T10:00:01.000Z");
  auto restore = manager->CreateRestore("i", *id);
  ASSERT_TRUE(restore.ok()) << restore.status().ToString();
  auto locked = manager->DeleteBackup("i", *id);
  EXPECT_EQ(ServiceErrorStatus(locked), 423);
  EXPECT_EQ(ServiceErrorDescription(locked), "The backup is being restored.");
  auto r = manager->GetRestore("i", *restore);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->backup_id, *id);
  EXPECT_EQ(r->status, "running");
  EXPECT_EQ(manager->GetRestore("i", *restore)->status, "done");
  EXPECT_TRUE(manager->DeleteBackup("i", *id).ok());
  EXPECT_EQ(manager->GetBackup("i", *id)->status, "deleted");
  EXPECT_TRUE(IsGoneOrNotFound(manager->GetRestore("i", 999).status()));
  EXPECT_FALSE(manager->UpdateBackupConfig("i", Json::object()).ok());
}

TEST(BackupClient, HealthCheckAcceptsAny2xx) {
  FakeBroker broker;
  auto manager = BackupClient::New(EndpointOf(broker)).value();
  EXPECT_TRUE(manager->CheckHealth("/instances").ok());
  broker.Inject("GET", "/instances", 202, Json::object());
  EXPECT_TRUE(manager->CheckHealth("/instances").ok());
  broker.Inject("GET", "/instances", 503, Json::object());
  EXPECT_EQ(manager->CheckHealth("/instances").message(),
            "health check failed with status code 503");
}

}  // namespace
}  // namespace klutch::providers::anynines::clients_test
