// The konnector end to end (bind-protocol.md §4): two `klutch apiserver` processes, a Control
// Plane set up as the bind backend would (test/support/bind_provider.h, the provider kubeconfig
// routed through a TcpProxy so a test can break the connection) and an App Cluster, with
// `klutch konnector` running as a child process against the App Cluster. Users act with the
// real kubectl, and every check is read back with kubectl too:
//  - the export's CRD appears in the App Cluster; a claim's spec flows up into the mapped
//    provider namespace `<clusterNs>-<ns>`, its status flows down, provider-side spec edits are
//    reverted;
//  - claimed Secrets owned by the Provider flow down and are restored; Secrets owned by the
//    Consumer flow up;
//  - deletions on either side and of the consumer namespace propagate;
//  - heartbeat, binding and export conditions; bad kubeconfig Secrets give SecretValid=False
//    while a good binding keeps syncing; /healthz and /metrics are served.
// Waits are bounded polls (Eventually), never sleeps.
#include <signal.h>

#include "test/e2e/konnector_fixture.h"

namespace klutch::testing {
namespace {

TEST_F(KonnectorE2eTest, ServesHealthAndMetrics) {
  http::Client health({.port = health_port_});
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = health.Do("GET", "/healthz");
        return r.ok() && r->status == 200;
      },
      kWait))
      << "GET /healthz on " << health_port_ << " never answered 200";
  http::Client metrics({.port = metrics_port_});
  std::string body;
  EXPECT_TRUE(Eventually(
      [&] {
        auto r = metrics.Do("GET", "/metrics");
        if (!r.ok() || r->status != 200) return false;
        body = r->body;
        return body.find("klutch_konnector_") != std::string::npos;
      },
      kWait))
      << "GET /metrics on " << metrics_port_ << " has no klutch_konnector_ family:\n"
      << Tail(body, 3000);
}

TEST_F(KonnectorE2eTest, BindingConnectsAndHeartbeats) {
  // The export's CRD in the App Cluster, owned by the binding.
  EXPECT_TRUE(Eventually([&] { return CrdEstablished(*app_, kExportName); }, kWait))
      << "CRD " << kExportName << " not Established in the App Cluster";
  Json crd = Get(*app_, "crd " + kExportName);
  ASSERT_FALSE(crd.is_null());
  EXPECT_EQ(machinery::GetString(crd, {"spec", "names", "kind"}), "PostgresqlInstance");
  ASSERT_TRUE(crd["metadata"].contains("ownerReferences")) << crd["metadata"].dump();
  EXPECT_EQ(crd["metadata"]["ownerReferences"][0].value("kind", ""), "APIServiceBinding");
  EXPECT_EQ(crd["metadata"]["ownerReferences"][0].value("name", ""), kExportName);

  // The binding's conditions and the provider's pretty name.
  const std::string binding = "apiservicebindings -n " + kBindNs + " " + kExportName;
  for (const char* type : {"SecretValid", "Connected", "Heartbeating"}) {
    EXPECT_TRUE(
        Eventually([&] { return Condition(Get(*app_, binding), type).first == "True"; }, kWait))
        << "APIServiceBinding condition " << type << " never True: " << Get(*app_, binding).dump();
  }
  EXPECT_TRUE(Eventually(
      [&] {
        return machinery::GetString(Get(*app_, binding), {"status", "providerPrettyName"}) ==
               "klutch-test-provider";
      },
      kWait))
      << Get(*app_, binding).dump();

  // The export on the Control Plane is Connected.
  const std::string exported =
      "apiserviceexports -n " + provider_.cluster_namespace + " " + kExportName;
  EXPECT_TRUE(Eventually(
      [&] { return Condition(Get(*cp_, exported), "Connected").first == "True"; }, kWait))
      << Get(*cp_, exported).dump();

  // Heartbeats: lastHeartbeatTime is set and moves on (interval 2s).
  const std::string cluster = "clusterbindings -n " + provider_.cluster_namespace + " cluster";
  std::string first;
  EXPECT_TRUE(Eventually(
      [&] {
        first = machinery::GetString(Get(*cp_, cluster), {"status", "lastHeartbeatTime"});
        return !first.empty();
      },
      kWait))
      << "no heartbeat: " << Get(*cp_, cluster).dump();
  EXPECT_TRUE(Eventually(
      [&] {
        std::string now = machinery::GetString(Get(*cp_, cluster), {"status", "lastHeartbeatTime"});
        return !now.empty() && now > first;  // RFC 3339 UTC compares as text
      },
      kWait))
      << "lastHeartbeatTime stayed at " << first << ": " << Get(*cp_, cluster).dump();
  Json cb = Get(*cp_, cluster);
  EXPECT_FALSE(machinery::GetString(cb, {"status", "heartbeatInterval"}).empty()) << cb.dump();
  EXPECT_FALSE(machinery::GetString(cb, {"status", "konnectorVersion"}).empty()) << cb.dump();
}

TEST_F(KonnectorE2eTest, ClaimSpecFlowsUpAndStatusFlowsDown) {
  Json upstream = CreateBoundClaim("team-a", "db1", "14");
  ASSERT_FALSE(upstream.is_null());
  EXPECT_EQ(machinery::GetString(upstream, {"metadata", "annotations", bind::kBoundAnnotation}),
            "true")
      << upstream.dump();
  EXPECT_EQ(machinery::GetString(upstream, {"spec", "version"}), "14");
  // The consumer namespace is mapped through an APIServiceNamespace.
  Json asn = Get(*cp_, "apiservicenamespaces -n " + provider_.cluster_namespace + " team-a");
  EXPECT_EQ(machinery::GetString(asn, {"status", "namespace"}), Mapped("team-a")) << asn.dump();
  // The App object carries the syncer finalizer.
  EXPECT_TRUE(Eventually(
      [&] {
        Json d = Get(*app_, "postgresqlinstances -n team-a db1");
        return !d.is_null() && machinery::HasFinalizer(d, bind::kSyncerFinalizer);
      },
      kWait))
      << Get(*app_, "postgresqlinstances -n team-a db1").dump();

  // A spec edit in the App Cluster flows up.
  ASSERT_TRUE(Run(
      *app_,
      R"(patch postgresqlinstances -n team-a db1 --type merge -p '{"spec":{"version":"15"}}')"));
  EXPECT_TRUE(Eventually([&] { return UpstreamSpecVersion("team-a", "db1") == "15"; }, kWait))
      << "upstream spec.version: " << UpstreamSpecVersion("team-a", "db1");

  // A spec edit on the Control Plane copy is reverted.
  ASSERT_TRUE(Run(*cp_, "patch postgresqlinstances -n " + Mapped("team-a") +
                            R"( db1 --type merge -p '{"spec":{"version":"99"}}')"));
  EXPECT_TRUE(Eventually([&] { return UpstreamSpecVersion("team-a", "db1") == "15"; }, kWait))
      << "upstream spec.version: " << UpstreamSpecVersion("team-a", "db1");

  // Status written on the Control Plane flows down.
  ASSERT_TRUE(
      Run(*cp_, "patch postgresqlinstances -n " + Mapped("team-a") +
                    R"( db1 --subresource=status --type merge -p '{"status":{"phase":"Ready"}}')"));
  EXPECT_TRUE(Eventually(
      [&] {
        return machinery::GetString(Get(*app_, "postgresqlinstances -n team-a db1"),
                                    {"status", "phase"}) == "Ready";
      },
      kWait))
      << Get(*app_, "postgresqlinstances -n team-a db1").dump();
  // ... and the App spec stayed as the user wrote it.
  EXPECT_EQ(
      machinery::GetString(Get(*app_, "postgresqlinstances -n team-a db1"), {"spec", "version"}),
      "15");
}

TEST_F(KonnectorE2eTest, DeletionsPropagate) {
  Json upstream = CreateBoundClaim("team-b", "db2");
  ASSERT_FALSE(upstream.is_null());
  const std::string uid = machinery::Uid(upstream);

  // Deleting the Control Plane copy re-creates it.
  ASSERT_TRUE(Run(*cp_, "delete postgresqlinstances -n " + Mapped("team-b") + " db2 --wait=false"));
  EXPECT_TRUE(Eventually(
      [&] {
        Json u = Get(*cp_, "postgresqlinstances -n " + Mapped("team-b") + " db2");
        return !u.is_null() && machinery::Uid(u) != uid && !machinery::IsBeingDeleted(u);
      },
      kWait))
      << "the deleted upstream copy was not re-created";

  // Deleting the claim in the App Cluster deletes the copy, and the claim goes (finalizer
  // dropped).
  ASSERT_TRUE(Run(*app_, "delete postgresqlinstances -n team-b db2 --wait=false"));
  EXPECT_TRUE(Eventually(
      [&] { return NotFound(*cp_, "postgresqlinstances -n " + Mapped("team-b") + " db2"); }, kWait))
      << "upstream copy still there: "
      << Get(*cp_, "postgresqlinstances -n " + Mapped("team-b") + " db2").dump();
  EXPECT_TRUE(
      Eventually([&] { return NotFound(*app_, "postgresqlinstances -n team-b db2"); }, kWait))
      << "App claim still there: " << Get(*app_, "postgresqlinstances -n team-b db2").dump();

  // Deleting the App namespace (with a bound claim in it) removes its APIServiceNamespace on
  // the Control Plane, and the backend then its mapped namespace.
  ASSERT_FALSE(CreateBoundClaim("team-b", "db3").is_null());
  ASSERT_TRUE(Run(*app_, "delete namespace team-b --wait=false"));
  EXPECT_TRUE(Eventually([&] { return NotFound(*app_, "namespace team-b"); }, kWait))
      << "App namespace team-b not gone (claim finalizer?): "
      << Get(*app_, "postgresqlinstances -n team-b").dump();
  EXPECT_TRUE(Eventually(
      [&] {
        return NotFound(*cp_, "apiservicenamespaces -n " + provider_.cluster_namespace + " team-b");
      },
      kWait))
      << "APIServiceNamespace team-b still on the Control Plane";
  EXPECT_TRUE(Eventually(
      [&] {
        if (NotFound(*cp_, "namespace " + Mapped("team-b"))) return true;
        Json n = Get(*cp_, "namespace " + Mapped("team-b"));
        return !n.is_null() && machinery::IsBeingDeleted(n);
      },
      kWait));
}

TEST_F(KonnectorE2eTest, ProviderOwnedSecretsFlowDown) {
  ASSERT_FALSE(CreateBoundClaim("team-c", "db4").is_null());
  ASSERT_TRUE(Run(*cp_, "create secret generic db4-creds -n " + Mapped("team-c") +
                            " --from-literal=password=s3cret"));
  auto secret_password = [&](const Json& s) {
    return core::Base64Decode(machinery::GetString(s, {"data", "password"})).value_or("");
  };
  Json down;
  EXPECT_TRUE(Eventually(
      [&] {
        down = Get(*app_, "secret -n team-c db4-creds");
        return !down.is_null() && secret_password(down) == "s3cret";
      },
      kWait))
      << "provider secret did not reach the App namespace";
  EXPECT_EQ(machinery::GetString(down, {"metadata", "annotations", bind::kResourceOwnerAnnotation}),
            "Provider")
      << down.dump();
  // The provider copy is marked as the owner's too.
  EXPECT_TRUE(Eventually(
      [&] {
        return machinery::GetString(Get(*cp_, "secret -n " + Mapped("team-c") + " db4-creds"),
                                    {"metadata", "annotations", bind::kResourceOwnerAnnotation}) ==
               "Provider";
      },
      kWait));

  // Deleted in the App Cluster: restored.
  const std::string uid = machinery::Uid(down);
  ASSERT_TRUE(Run(*app_, "delete secret -n team-c db4-creds"));
  EXPECT_TRUE(Eventually(
      [&] {
        Json s = Get(*app_, "secret -n team-c db4-creds");
        return !s.is_null() && machinery::Uid(s) != uid && secret_password(s) == "s3cret";
      },
      kWait))
      << "deleted provider-owned secret not restored";
  // Edited in the App Cluster: overwritten by the provider's copy.
  ASSERT_TRUE(Run(
      *app_,
      R"(patch secret -n team-c db4-creds --type merge -p '{"data":{"password":"aGFja2Vk"}}')"));
  EXPECT_TRUE(Eventually(
      [&] { return secret_password(Get(*app_, "secret -n team-c db4-creds")) == "s3cret"; }, kWait))
      << "consumer edit of a provider-owned secret not reverted";
}

TEST_F(KonnectorE2eTest, ConsumerOwnedSecretsFlowUp) {
  ASSERT_FALSE(CreateBoundClaim("team-d", "db5").is_null());
  ASSERT_TRUE(Apply(*app_, {{"apiVersion", "v1"},
                            {"kind", "Secret"},
                            {"metadata",
                             {{"name", "client-cert"},
                              {"namespace", "team-d"},
                              {"annotations", {{bind::kResourceOwnerAnnotation, "Consumer"}}}}},
                            {"stringData", {{"tls.crt", "consumer-cert"}}}}));
  const std::string up = "secret -n " + Mapped("team-d") + " client-cert";
  auto cert = [&](const Json& s) {
    return core::Base64Decode(machinery::GetString(s, {"data", "tls.crt"})).value_or("");
  };
  EXPECT_TRUE(Eventually([&] { return cert(Get(*cp_, up)) == "consumer-cert"; }, kWait))
      << "consumer-owned secret did not reach the Control Plane";
  EXPECT_EQ(machinery::GetString(Get(*cp_, up),
                                 {"metadata", "annotations", bind::kResourceOwnerAnnotation}),
            "Consumer");
  // An edit by the owner flows up; one on the Control Plane copy is overwritten.
  ASSERT_TRUE(Run(
      *app_,
      R"(patch secret -n team-d client-cert --type merge -p '{"data":{"tls.crt":"cm90YXRlZA=="}}')"));
  EXPECT_TRUE(Eventually([&] { return cert(Get(*cp_, up)) == "rotated"; }, kWait));
  ASSERT_TRUE(
      Run(*cp_, "patch " + up + R"( --type merge -p '{"data":{"tls.crt":"dGFtcGVyZWQ="}}')"));
  EXPECT_TRUE(Eventually([&] { return cert(Get(*cp_, up)) == "rotated"; }, kWait))
      << "provider edit of a consumer-owned secret not reverted";
}

TEST_F(KonnectorE2eTest, BadBindingsReportSecretProblemsWhileTheGoodOneSyncs) {
  // A binding whose Secret is missing, and one whose Secret holds garbage.
  ASSERT_TRUE(Apply(*app_, Binding("missing.anynines.com", "no-such-secret")));
  ASSERT_TRUE(Apply(*app_, KubeconfigSecret("kubeconfig-garbage", "this is: [not a kubeconfig")));
  ASSERT_TRUE(Apply(*app_, Binding("garbage.anynines.com", "kubeconfig-garbage")));
  auto secret_valid = [&](const std::string& name) {
    return Condition(Get(*app_, "apiservicebindings -n " + kBindNs + " " + name), "SecretValid");
  };
  EXPECT_TRUE(Eventually(
      [&] {
        return secret_valid("missing.anynines.com") ==
               std::pair<std::string, std::string>{"False", "KubeconfigSecretNotFound"};
      },
      kWait))
      << Get(*app_, "apiservicebindings -n " + kBindNs + " missing.anynines.com").dump();
  EXPECT_TRUE(Eventually(
      [&] {
        return secret_valid("garbage.anynines.com") ==
               std::pair<std::string, std::string>{"False", "KubeconfigSecretInvalid"};
      },
      kWait))
      << Get(*app_, "apiservicebindings -n " + kBindNs + " garbage.anynines.com").dump();

  // The good binding is unaffected and keeps syncing.
  EXPECT_TRUE(Eventually([&] { return secret_valid(kExportName).first == "True"; }, kWait));
  Json upstream = CreateBoundClaim("team-e", "db6", "16");
  ASSERT_FALSE(upstream.is_null());
  EXPECT_EQ(machinery::GetString(upstream, {"spec", "version"}), "16");
}

TEST_F(KonnectorE2eTest, SyncResumesAfterTheProviderConnectionBreaks) {
  ASSERT_FALSE(CreateBoundClaim("team-f", "db7").is_null());
  // Every connection from the konnector to the Control Plane breaks at once.
  proxy_->CutAll();
  ASSERT_FALSE(CreateBoundClaim("team-f", "db8").is_null());
  ASSERT_TRUE(
      Run(*cp_, "patch postgresqlinstances -n " + Mapped("team-f") +
                    R"( db7 --subresource=status --type merge -p '{"status":{"phase":"Ready"}}')"));
  EXPECT_TRUE(Eventually(
      [&] {
        return machinery::GetString(Get(*app_, "postgresqlinstances -n team-f db7"),
                                    {"status", "phase"}) == "Ready";
      },
      kWait))
      << "status did not flow down after the connection broke";
}

// The provider rotates the consumer's credentials: a new token in its kubeconfig Secret, the
// old token revoked. The konnector mirrors the new kubeconfig into the App Cluster and
// reconnects with it, without a restart.
TEST_F(KonnectorE2eTest, RotatedProviderKubeconfigKeepsSyncAlive) {
  ASSERT_FALSE(CreateBoundClaim("rot", "before").is_null());
  const std::string ns = provider_.cluster_namespace;
  ASSERT_TRUE(Apply(
      *cp_, {{"apiVersion", "v1"},
             {"kind", "Secret"},
             {"type", "kubernetes.io/service-account-token"},
             {"metadata",
              {{"name", "klutch-binder-rotated"},
               {"namespace", ns},
               {"annotations", {{"kubernetes.io/service-account.name", bind::kBinderName}}}}}}));
  std::string token;
  ASSERT_TRUE(Eventually(
      [&] {
        Json secret = Get(*cp_, "secret -n " + ns + " klutch-binder-rotated");
        token =
            secret.is_null()
                ? ""
                : core::Base64Decode(machinery::GetString(secret, {"data", "token"})).value_or("");
        return !token.empty();
      },
      kWait));
  std::string rotated = provider_.kubeconfig;
  rotated.replace(rotated.find(provider_.token), provider_.token.size(), token);
  ASSERT_TRUE(Apply(*cp_, {{"apiVersion", "v1"},
                           {"kind", "Secret"},
                           {"metadata", {{"name", "kubeconfig"}, {"namespace", ns}}},
                           {"stringData", {{"kubeconfig", rotated}}}}));
  EXPECT_TRUE(Eventually(
      [&] {
        Json mirrored = Get(*app_, "secret -n " + kBindNs + " kubeconfig-provider");
        return !mirrored.is_null() && core::Base64Decode(machinery::GetString(
                                          mirrored, {"data", "kubeconfig"})) == rotated;
      },
      kWait))
      << "the rotated kubeconfig did not reach the App Cluster";
  ASSERT_TRUE(Run(*cp_, "delete secret -n " + ns + " " + bind::kBinderName));
  EXPECT_FALSE(CreateBoundClaim("rot", "after").is_null()) << "sync stopped after the rotation";
}

// Two bindings whose kubeconfigs name different providers (cluster namespaces, accounts,
// exports) sync independently, and one provider's credentials failing stalls nothing of the
// other.
TEST_F(KonnectorE2eTest, TwoProvidersSyncIndependently) {
  auto second = bind::SetupProvider(
      *cp_rest_, {.server_url = "https://127.0.0.1:" + std::to_string(proxy_->port())});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  Json redis = bind::ExampleClaimCrd();
  redis["metadata"]["name"] = "redisinstances.anynines.com";
  redis["spec"]["names"] = {{"plural", "redisinstances"},
                            {"singular", "redisinstance"},
                            {"kind", "RedisInstance"},
                            {"listKind", "RedisInstanceList"}};
  ASSERT_TRUE(Apply(*cp_, redis));
  ASSERT_TRUE(bind::WaitForCrdEstablished(*cp_rest_, "redisinstances.anynines.com").ok());
  ASSERT_TRUE(
      bind::CreateExport(*cp_rest_, second->cluster_namespace, bind::ExportFromCrd(redis)).ok());
  bind::NamespaceMapper mapper(*cp_rest_, second->cluster_namespace);
  mapper.Start();
  ASSERT_TRUE(Apply(*app_, KubeconfigSecret("kubeconfig-second", second->kubeconfig)));
  Json binding = Binding("redisinstances.anynines.com", "kubeconfig-second");
  binding["spec"].erase("permissionClaims");
  ASSERT_TRUE(Apply(*app_, binding));
  ASSERT_TRUE(
      Eventually([&] { return CrdEstablished(*app_, "redisinstances.anynines.com"); }, kWait));
  auto redis_claim = [](const std::string& name) {
    Json c = Claim("two", name, "7");
    c["kind"] = "RedisInstance";
    return c;
  };
  ASSERT_FALSE(CreateBoundClaim("two", "pg").is_null());
  ASSERT_TRUE(Apply(*app_, redis_claim("cache")));
  const std::string second_ns = second->cluster_namespace + "-two";
  EXPECT_TRUE(Eventually(
      [&] { return !Get(*cp_, "redisinstances -n " + second_ns + " cache").is_null(); }, kWait));

  // The first provider's credentials stop working; the second provider keeps syncing.
  ASSERT_TRUE(
      Run(*cp_, "delete secret -n " + provider_.cluster_namespace + " " + bind::kBinderName));
  ASSERT_TRUE(Apply(*app_, redis_claim("cache-2")));
  EXPECT_TRUE(Eventually(
      [&] { return !Get(*cp_, "redisinstances -n " + second_ns + " cache-2").is_null(); }, kWait));
  mapper.Stop();
}

// Two replicas, as the Deployment runs them: one leads, the other waits on the Lease and
// takes over when the leader is killed without releasing it.
TEST_F(KonnectorE2eTest, ASecondReplicaTakesOverWhenTheLeaderDies) {
  ASSERT_FALSE(CreateBoundClaim("ha", "first").is_null());
  std::unique_ptr<ChildProcess> leader = std::move(konnector_);
  const fs::path leader_log = konnector_log_;
  ASSERT_NO_FATAL_FAILURE(StartKonnector());  // the standby
  auto acquired = [](const fs::path& log) {
    return ReadFileOrEmpty(log).find("acquired lease") != std::string::npos;
  };
  ASSERT_TRUE(acquired(leader_log));
  // The standby stays standby while the leader renews.
  ASSERT_FALSE(CreateBoundClaim("ha", "second").is_null());
  EXPECT_FALSE(acquired(konnector_log_)) << Tail(ReadFileOrEmpty(konnector_log_));
  ASSERT_TRUE(leader->Signal(SIGKILL, std::chrono::seconds(10)).has_value());
  EXPECT_TRUE(Eventually([&] { return acquired(konnector_log_); }, std::chrono::seconds(60)))
      << "the standby never took the lease:\n"
      << Tail(ReadFileOrEmpty(konnector_log_));
  EXPECT_FALSE(CreateBoundClaim("ha", "third").is_null()) << "no sync after the takeover";
}

class ControlPlaneModeE2eTest : public KonnectorE2eTest {
 protected:
  void SetUp() override {
    control_plane_mode_ = true;
    KonnectorE2eTest::SetUp();
  }
};

// Control-plane mode (§1.6, §4.1): the same create, update, status and delete checks, with
// the konnector beside the Control Plane reaching the App Cluster through a kubeconfig Secret.
TEST_F(ControlPlaneModeE2eTest, ClaimsSyncBothWaysAndDeletionsPropagate) {
  const std::string root = provider_.cluster_namespace;
  EXPECT_TRUE(Eventually(
      [&] {
        Json b = Get(*cp_, "apiservicebindings -n " + root + " " + kExportName);
        return !b.is_null() && Condition(b, "SecretValid").first == "True" &&
               Condition(b, "Connected").first == "True";
      },
      kWait));
  EXPECT_TRUE(NotFound(*app_, "crd apiservicebindings.klutch.anynines.com"))
      << "control-plane mode installs no binding CRD in the App Cluster";
  ASSERT_FALSE(CreateBoundClaim("team", "db", "14").is_null());
  ASSERT_TRUE(Run(*app_,
                  "patch postgresqlinstances -n team db --type=merge -p "
                  "'{\"spec\":{\"version\":\"15\"}}'"));
  EXPECT_TRUE(Eventually([&] { return UpstreamSpecVersion("team", "db") == "15"; }, kWait));
  ASSERT_TRUE(Run(*cp_, "patch postgresqlinstances -n " + Mapped("team") +
                            " db --subresource=status --type=merge -p "
                            "'{\"status\":{\"phase\":\"Ready\"}}'"));
  EXPECT_TRUE(Eventually(
      [&] {
        Json d = Get(*app_, "postgresqlinstances -n team db");
        return !d.is_null() && machinery::GetString(d, {"status", "phase"}) == "Ready";
      },
      kWait));
  ASSERT_TRUE(Run(*app_, "delete postgresqlinstances -n team db --wait=false"));
  EXPECT_TRUE(Eventually(
      [&] {
        return NotFound(*app_, "postgresqlinstances -n team db") &&
               NotFound(*cp_, "postgresqlinstances -n " + Mapped("team") + " db");
      },
      kWait));
}

}  // namespace
}  // namespace klutch::testing
