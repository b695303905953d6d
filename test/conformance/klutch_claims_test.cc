// Klutch's upstream claim APIs on a real `klutch apiserver`: the claim CRDs Crossplane would
// generate from the XRDs in ../shared/conformance/klutch/crossplane-api/api (read at run
// time), every upstream example claim accepted, and the admission cases of the data-services
// spec (§2, §3.3, §8.2) rejected with the upstream CEL messages, through the REST API and
// through the real kubectl.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "machinery/json.h"
#include "test/support/claim_crd.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

const fs::path kApi = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api";

std::string ReadAll(const fs::path& p) { return ReadFileOrEmpty(p); }

Json Yaml(const std::string& text) {
  auto j = machinery::ParseYaml(text);
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j.ok() ? *j : Json();
}

struct Env {
  TempDir dir{"klutch-claims"};
  std::unique_ptr<ApiServerProcess> server;
  std::unique_ptr<http::Client> client;
  std::map<std::string, std::string> plural_by_kind;  // claim kind -> plural
};

Env* env = nullptr;

http::ClientResponse Do(std::string_view method, const std::string& path, const Json& body = {},
                        std::string_view content_type = "application/json") {
  auto r =
      Call(*env->client, method, path, body.is_null() ? "" : machinery::Dump(body), content_type);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : http::ClientResponse{};
}

std::string ClaimPath(const Json& claim, const std::string& query = "") {
  std::string kind = claim.value("kind", "");
  std::string ns = claim["metadata"].value("namespace", "default");
  return "/apis/anynines.com/v1/namespaces/" + ns + "/" + env->plural_by_kind[kind] + query;
}

// The messages of a 422's causes, "field: message" each.
std::vector<std::string> Causes(const http::ClientResponse& r) {
  std::vector<std::string> out;
  auto body = machinery::ParseJson(r.body);
  if (!body.ok()) return {"<unparsable: " + r.body + ">"};
  for (const auto& c : (*body)["details"].value("causes", Json::array())) {
    out.push_back(c.value("field", "") + ": " + c.value("message", ""));
  }
  return out;
}

class KlutchClaims : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    env = new Env();
    std::string error;
    env->server = ApiServerProcess::Start(env->dir.path() / "data", {}, &error);
    ASSERT_TRUE(env->server) << error;
    auto creds = ReadKubeconfig(env->server->kubeconfig());
    ASSERT_TRUE(creds.ok());
    env->client = NewClient(*creds);
    for (const auto& entry : fs::recursive_directory_iterator(kApi / "api")) {
      std::string name = entry.path().filename().string();
      if (name != "definition.yaml" && !name.ends_with("_definition.yaml")) continue;
      Json xrd = Yaml(ReadAll(entry.path()));
      if (!xrd["spec"].contains("claimNames")) continue;
      Json crd = ClaimCrd(xrd);
      auto r = Do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd);
      ASSERT_EQ(r.status, 201) << entry.path() << ": " << r.body;
      env->plural_by_kind[crd["spec"]["names"]["kind"]] = crd["spec"]["names"]["plural"];
    }
    ASSERT_EQ(env->plural_by_kind.size(), 11u);
    // Served once the list answers.
    for (const auto& [kind, plural] : env->plural_by_kind) {
      bool served = false;
      for (int i = 0; i < 200 && !served; ++i) {
        served = Do("GET", "/apis/anynines.com/v1/namespaces/default/" + plural).status == 200;
        if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      ASSERT_TRUE(served) << plural;
    }
  }
  static void TearDownTestSuite() {
    delete env;
    env = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(env != nullptr && env->client != nullptr)
        << "suite setup failed (see SetUpTestSuite's failure above)";
  }
};

// One upstream example contradicts its own XRD: it sets the six clustered-only keyvalue
// parameters on a single plan, which the XRD's spec rules forbid, so a real cluster rejects
// it too. It must be rejected with exactly those rules' messages.
const std::map<std::string, std::vector<std::string>> kInvalidExamples = {
    {"a9s/keyvalue/serviceinstance-claim-parameters.yaml",
     [] {
       std::vector<std::string> causes;
       for (const char* p : {"hostnameResolution", "downAfterMilliseconds", "failoverTimeout",
                             "minReplicasMaxLag", "minReplicasToWrite", "replBacklogSize"}) {
         causes.push_back(std::string("spec: Invalid value: \"object\": parameters.") + p +
                          " is only supported for clustered plans");
       }
       return causes;
     }()},
};

TEST_F(KlutchClaims, EveryValidUpstreamExampleIsAccepted) {
  int accepted = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kApi / "examples")) {
    if (entry.path().extension() != ".yaml") continue;
    std::string rel = fs::relative(entry.path(), kApi / "examples").string();
    Json claim = Yaml(ReadAll(entry.path()));
    ASSERT_TRUE(env->plural_by_kind.count(claim["kind"])) << entry.path();
    auto r = Do("POST", ClaimPath(claim, "?dryRun=All&fieldValidation=Strict"), claim);
    if (auto it = kInvalidExamples.find(rel); it != kInvalidExamples.end()) {
      EXPECT_EQ(r.status, 422) << rel;
      EXPECT_EQ(Causes(r), it->second) << rel;
      continue;
    }
    EXPECT_EQ(r.status, 201) << entry.path() << ": " << r.body;
    ++accepted;
  }
  EXPECT_EQ(accepted, 45);
}

Json Pg(const std::string& composition, const std::string& service, const std::string& plan,
        const Json& parameters = nullptr) {
  Json c = {{"apiVersion", "anynines.com/v1"},
            {"kind", "PostgresqlInstance"},
            {"metadata", {{"name", "pg"}, {"namespace", "default"}}},
            {"spec",
             {{"service", service}, {"plan", plan}, {"compositionRef", {{"name", composition}}}}}};
  if (!parameters.is_null()) c["spec"]["parameters"] = parameters;
  return c;
}

// "a", "b" as Kubernetes lists supported values.
std::string Quoted(const std::vector<std::string>& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "\"" : ", \"") + v + "\"";
  return out;
}

// The plans each PostgreSQL backend accepts, in the order the upstream plan rule names them:
// what a refused plan lists (issue #23: the refusal named none).
const std::string kA8sPlans =
    Quoted({"postgresql-single-nano", "postgresql-single-small", "postgresql-single-big",
            "postgresql-replica-small", "postgresql-replica-big", "postgresql-replica-nano",
            "postgresql-replica-medium", "postgresql-single-medium"});
// Without the bionic plans, which the XRD's bionic rule refuses on a9s-postgresql15.
const std::string kA9sPlansOn15 =
    Quoted({"postgresql-single-nano", "postgresql-single-nano-ssl", "postgresql-single-small",
            "postgresql-single-small-ssl", "postgresql-single-big", "postgresql-single-big-ssl",
            "postgresql-replica-small", "postgresql-replica-small-ssl", "postgresql-replica-big",
            "postgresql-replica-big-ssl"});

struct InvalidCase {
  const char* name;
  Json claim;
  std::vector<std::string> causes;
};

TEST_F(KlutchClaims, InvalidClaimsAreRejectedWithTheUpstreamMessages) {
  const std::string kObj = "spec: Invalid value: \"object\": ";
  const std::vector<InvalidCase> cases = {
      {"a8s-with-unsupported-parameter",
       Pg("a8s-postgresql", "a9s-postgresql14", "postgresql-single-nano",
          {{"dataChecksums", "enabled"}}),
       {kObj + "parameters.dataChecksums is not supported for a8s-postgresql"}},
      // The rule's message stays first; then the values with which the rule (and the rules
      // that held before) would hold, changing one field.
      {"a8s-with-wrong-plan-bionic",
       Pg("a8s-postgresql", "a9s-postgresql14", "postgresql-single-nano-bionic"),
       {kObj +
        "Unsupported plan used for postgresql; supported values for spec.plan: " + kA8sPlans}},
      {"a8s-with-wrong-plan-ssl",
       Pg("a8s-postgresql", "a9s-postgresql14", "postgresql-single-nano-ssl"),
       {kObj +
        "Unsupported plan used for postgresql; supported values for spec.plan: " + kA8sPlans}},
      {"a8s-plan-typo",
       Pg("a8s-postgresql", "a9s-postgresql13", "postgresql-single-nanoo"),
       {kObj +
        "Unsupported plan used for postgresql; supported values for spec.plan: " + kA8sPlans}},
      {"a9s-plan-typo",
       Pg("a9s-postgresql", "a9s-postgresql15", "postgresql-single-nanoo"),
       {kObj +
        "Unsupported plan used for postgresql; supported values for spec.plan: " + kA9sPlansOn15}},
      {"a8s-with-wrong-service",
       Pg("a8s-postgresql", "a9s-postgresql15", "postgresql-single-nano"),
       {kObj + "Unsupported service used for postgresql; supported values for spec.service: "
               "\"a9s-postgresql13\", \"a9s-postgresql14\" (or spec.compositionRef.name: "
               "\"a9s-postgresql\")"}},
      {"a9s-with-wrong-plan",
       Pg("a9s-postgresql", "a9s-postgresql15", "postgresql-single-medium"),
       {kObj +
        "Unsupported plan used for postgresql; supported values for spec.plan: " + kA9sPlansOn15}},
      {"a9s-with-wrong-service",
       Pg("a9s-postgresql", "a9s-postgresql14", "postgresql-single-nano"),
       {kObj + "Unsupported service used for postgresql; supported values for spec.service: "
               "\"a9s-postgresql13\", \"a9s-postgresql15\", \"a9s-postgresql17\" (or "
               "spec.compositionRef.name: \"a8s-postgresql\")"}},
      {"bionic-plan-on-15",
       Pg("a9s-postgresql", "a9s-postgresql15", "postgresql-single-nano-bionic"),
       {kObj + "Bionic plans are only supported by a9s PostgreSQL 13; supported values for "
               "spec.service: \"a9s-postgresql13\""}},
      {"a8s-only-parameter-on-a9s",
       Pg("a9s-postgresql", "a9s-postgresql13", "postgresql-single-nano",
          {{"maxLocksPerTransaction", 64}}),
       {kObj + "parameters.maxLocksPerTransaction is not supported for a9s-postgresql; "
               "supported values for spec.compositionRef.name: \"a8s-postgresql\""}},
      {"out-of-range-parameter",
       Pg("a8s-postgresql", "a9s-postgresql13", "postgresql-single-nano",
          {{"tempFileLimit", -5}, {"maxConnections", 100}}),
       {"spec.parameters.tempFileLimit: Invalid value: \"integer\": Must be either -1 (no limit) "
        "or a limit specified in kilobytes"}},
      {"missing-composition-ref",
       [] {
         Json c = Pg("a8s-postgresql", "a9s-postgresql13", "postgresql-single-nano");
         c["spec"].erase("compositionRef");
         return c;
       }(),
       // One cause for the rules that read the absent field (kube-apiserver reports each
       // rule's `no such key: compositionRef`), with the compositions they accept. The
       // bionic rule holds despite the absence: `|| self.service == 'a9s-postgresql13'` is
       // true, and CEL's || absorbs errors.
       {"spec.compositionRef: Required value: rules \"Unsupported service used for "
        "postgresql\" and \"Unsupported plan used for postgresql\" read "
        "spec.compositionRef.name: set it (supported values: \"a9s-postgresql\", "
        "\"a8s-postgresql\")"}},
      {"missing-composition-ref-on-15",
       [] {
         Json c = Pg("a9s-postgresql", "a9s-postgresql15", "postgresql-single-nano");
         c["spec"].erase("compositionRef");
         return c;
       }(),
       {"spec.compositionRef: Required value: rules \"Unsupported service used for "
        "postgresql\", \"Unsupported plan used for postgresql\" and \"Bionic plans are only "
        "supported by a9s PostgreSQL 13\" read spec.compositionRef.name: set it (supported "
        "values: \"a9s-postgresql\")"}},
      {"enum-violation-skips-rules",
       [] {
         Json c = Pg("a8s-postgresql", "a9s-postgresql13", "postgresql-single-nano");
         c["spec"]["expose"] = "Public";
         return c;
       }(),
       {"spec.expose: Unsupported value: \"Public\": supported values: \"Internal\", "
        "\"LoadBalancer\"",
        "<nil>: Invalid value: \"null\": some validation rules were not checked because the "
        "object was invalid; correct the existing errors to complete validation"}},
      {"a8s-backup-of-keyvalue",
       Json{{"apiVersion", "anynines.com/v1"},
            {"kind", "Backup"},
            {"metadata", {{"name", "b"}, {"namespace", "default"}}},
            {"spec",
             {{"instanceRef", "kv"},
              {"serviceInstanceType", "keyvalue"},
              {"compositionRef", {{"name", "a8s-backup"}}}}}},
       {kObj + "Selected service instance type is not supported. Supported values for "
               "spec.serviceInstanceType: \"postgresql\""}},
      {"backup-missing-instance-ref",
       Json{
           {"apiVersion", "anynines.com/v1"},
           {"kind", "Backup"},
           {"metadata", {{"name", "b"}, {"namespace", "default"}}},
           {"spec",
            {{"serviceInstanceType", "postgresql"}, {"compositionRef", {{"name", "a8s-backup"}}}}}},
       {"spec.instanceRef: Required value",
        "<nil>: Invalid value: \"null\": some validation rules were not checked because the "
        "object was invalid; correct the existing errors to complete validation"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = Do("POST", ClaimPath(c.claim, "?dryRun=All"), c.claim);
    EXPECT_EQ(r.status, 422) << r.body;
    EXPECT_EQ(Causes(r), c.causes) << r.body;
  }
  // Nothing was stored by the rejected (or dry-run) requests.
  auto list = Do("GET", "/apis/anynines.com/v1/namespaces/default/postgresqlinstances");
  EXPECT_EQ(machinery::ParseJson(list.body)->at("items").size(), 0u);
}

// Plan updates follow the matrix of data-services §3.3, derived here from the plan names:
// the size never shrinks, replica never becomes single, ssl and bionic never change.
int Size(const std::string& plan) {
  for (auto [token, rank] : {std::pair{"nano", 0}, {"small", 1}, {"medium", 2}, {"big", 3}}) {
    if (plan.find(token) != std::string::npos) return rank;
  }
  return -1;
}

std::string Expected(const std::string& from, const std::string& to) {
  std::vector<std::string> causes;
  const std::string kPlan = "spec.plan: Invalid value: \"string\": ";
  if (Size(to) < Size(from))
    causes.push_back(kPlan + "Transition from bigger to smaller plan size is not supported.");
  auto has = [](const std::string& p, const char* t) { return p.find(t) != std::string::npos; };
  if (has(from, "ssl") != has(to, "ssl")) {
    causes.push_back(kPlan + "Plan migrations not possible from Non-SSL to SSL and SSL to Non-SSL");
  }
  if (has(from, "bionic") != has(to, "bionic")) {
    causes.push_back(
        kPlan + "Plan migrations not possible from Non-Bionic to Bionic and Bionic to Non-Bionic");
  }
  if (has(from, "-replica-") && has(to, "-single-")) {
    causes.push_back(kPlan +
                     "Migration from clustered to single Data Service Instance is not supported.");
  }
  std::string out;
  for (const auto& c : causes) out += c + "\n";
  return out;
}

TEST_F(KlutchClaims, PlanAndServiceUpdatesFollowTheUpgradeMatrix) {
  struct Backend {
    std::string composition;
    std::vector<std::string> plans;
  };
  std::vector<Backend> backends = {
      {"a8s-postgresql", {}},
      {"a9s-postgresql", {}},
  };
  for (const char* topo : {"single", "replica"}) {
    for (const char* size : {"nano", "small", "medium", "big"}) {
      backends[0].plans.push_back(std::string("postgresql-") + topo + "-" + size);
    }
  }
  for (const char* base :
       {"single-nano", "single-small", "single-big", "replica-small", "replica-big"}) {
    for (const char* suffix : {"", "-ssl", "-bionic", "-ssl-bionic"}) {
      backends[1].plans.push_back(std::string("postgresql-") + base + suffix);
    }
  }
  int checked = 0;
  for (const auto& b : backends) {
    for (const auto& from : b.plans) {
      Json base = Pg(b.composition, "a9s-postgresql13", from);
      base["metadata"]["name"] = "upd";
      auto created = Do("POST", ClaimPath(base), base);
      ASSERT_EQ(created.status, 201) << created.body;
      for (const auto& to : b.plans) {
        if (to == from) continue;
        SCOPED_TRACE(b.composition + ": " + from + " -> " + to);
        Json patch = {{"spec", {{"plan", to}}}};
        auto r =
            Do("PATCH", ClaimPath(base) + "/upd?dryRun=All", patch, "application/merge-patch+json");
        std::string want = Expected(from, to);
        if (want.empty()) {
          EXPECT_EQ(r.status, 200) << r.body;
        } else {
          EXPECT_EQ(r.status, 422) << r.body;
          std::string got;
          for (const auto& c : Causes(r)) got += c + "\n";
          EXPECT_EQ(got, want);
        }
        ++checked;
      }
      // The service is immutable; an unchanged service passes.
      auto same =
          Do("PATCH", ClaimPath(base) + "/upd?dryRun=All",
             Json{{"spec", {{"service", "a9s-postgresql13"}}}}, "application/merge-patch+json");
      EXPECT_EQ(same.status, 200) << same.body;
      auto changed =
          Do("PATCH", ClaimPath(base) + "/upd?dryRun=All",
             Json{{"spec",
                   {{"service", b.composition == "a8s-postgresql" ? "a9s-postgresql14"
                                                                  : "a9s-postgresql15"}}}},
             "application/merge-patch+json");
      EXPECT_EQ(changed.status, 422) << changed.body;
      std::vector<std::string> causes = Causes(changed);
      EXPECT_NE(std::find(causes.begin(), causes.end(),
                          "spec.service: Invalid value: \"string\": Service is an immutable field"),
                causes.end())
          << changed.body;
      ASSERT_EQ(Do("DELETE", ClaimPath(base) + "/upd").status, 200);
      // Deletion completes before the next base reuses the name.
      for (int i = 0; i < 200 && Do("GET", ClaimPath(base) + "/upd").status != 404; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  EXPECT_EQ(checked, 8 * 7 + 20 * 19);
}

TEST_F(KlutchClaims, KubectlPrintsTheRejection) {
  fs::path kubectl = "/usr/bin/kubectl";
  // kubectl is part of the machine: a missing one fails the test, it is not skipped.
  ASSERT_TRUE(fs::exists(kubectl)) << kubectl << " is missing: it is required to run this test";
  TempDir work("klutch-claims-kubectl");
  std::map<std::string, std::string> vars = {{"KUBECONFIG", env->server->kubeconfig().string()}};
  auto valid = work.Write("valid.yaml", machinery::Dump(Pg("a9s-postgresql", "a9s-postgresql13",
                                                           "postgresql-single-nano")));
  auto invalid = work.Write("invalid.yaml", machinery::Dump(Pg("a9s-postgresql", "a9s-postgresql15",
                                                               "postgresql-single-medium")));
  auto r = RunShell("kubectl apply --dry-run=server -f " + valid.string(), vars, work.path(),
                    std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "postgresqlinstance.anynines.com/pg created (server dry run)\n");
  r = RunShell("kubectl apply -f " + invalid.string(), vars, work.path(), std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "The PostgresqlInstance \"pg\" is invalid: spec: Invalid value: \"object\": "
            "Unsupported plan used for postgresql; supported values for spec.plan: " +
                kA9sPlansOn15 + "\n");
  // An update through kubectl patch, as the upstream update suite runs it.
  r = RunShell("kubectl apply -f " + valid.string() +
                   " && kubectl patch postgresqlinstance pg --type=merge --dry-run=server "
                   "-p '{\"spec\":{\"plan\":\"postgresql-single-nano-ssl\"}}'",
               vars, work.path(), std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err,
            "The PostgresqlInstance \"pg\" is invalid: spec.plan: Invalid value: \"string\": Plan "
            "migrations not possible from Non-SSL to SSL and SSL to Non-SSL\n");
  RunShell("kubectl delete postgresqlinstance pg", vars, work.path(), std::chrono::seconds(60));
  // A claim without compositionRef: one line saying what to set (issue #23: three `no such
  // key` errors, one about Bionic plans).
  Json unreferenced = Pg("a9s-postgresql", "a9s-postgresql15", "postgresql-single-nano");
  unreferenced["spec"].erase("compositionRef");
  auto file = work.Write("unreferenced.yaml", machinery::Dump(unreferenced));
  r = RunShell("kubectl apply -f " + file.string(), vars, work.path(), std::chrono::seconds(60));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err,
            "The PostgresqlInstance \"pg\" is invalid: spec.compositionRef: Required value: rules "
            "\"Unsupported service used for postgresql\", \"Unsupported plan used for "
            "postgresql\" and \"Bionic plans are only supported by a9s PostgreSQL 13\" read "
            "spec.compositionRef.name: set it (supported values: \"a9s-postgresql\")\n");
}

// kubectl explain describes every field Crossplane adds to a claim (issue #23: they showed
// `<no description>`), on the served OpenAPI of the claim CRD generated from the upstream XRD.
TEST_F(KlutchClaims, KubectlExplainDescribesTheFieldsCrossplaneAdds) {
  ASSERT_TRUE(fs::exists("/usr/bin/kubectl")) << "kubectl is required to run this test";
  TempDir work("klutch-claims-explain");
  std::map<std::string, std::string> vars = {{"KUBECONFIG", env->server->kubeconfig().string()}};
  for (const char* field :
       {"spec.compositionRef", "spec.compositionRef.name", "spec.compositionSelector",
        "spec.compositionSelector.matchLabels", "spec.compositionRevisionRef",
        "spec.compositionRevisionSelector", "spec.compositionUpdatePolicy",
        "spec.compositeDeletePolicy", "spec.writeConnectionSecretToRef",
        "spec.writeConnectionSecretToRef.name", "spec.resourceRef",
        "spec.publishConnectionDetailsTo", "spec.publishConnectionDetailsTo.configRef",
        "status.conditions", "status.connectionDetails"}) {
    SCOPED_TRACE(field);
    auto r = RunShell(std::string("kubectl explain postgresqlinstances.") + field, vars,
                      work.path(), std::chrono::seconds(60));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // kubectl prints DESCRIPTION: then the text, or `<no description>`.
    size_t at = r.out.find("DESCRIPTION:");
    ASSERT_NE(at, std::string::npos) << r.out;
    std::string description = r.out.substr(at + 12);
    description = description.substr(0, description.find("FIELDS:"));
    EXPECT_EQ(description.find("<no description>"), std::string::npos) << r.out;
    EXPECT_EQ(description.find("<empty>"), std::string::npos) << r.out;
    description.erase(std::remove_if(description.begin(), description.end(),
                                     [](char c) { return c == ' ' || c == '\n'; }),
                      description.end());
    EXPECT_GE(description.size(), 10u) << r.out;
  }
  // The choice of a composition is explained where a user looks for it.
  auto r = RunShell("kubectl explain postgresqlinstances.spec.compositionRef", vars, work.path(),
                    std::chrono::seconds(60));
  EXPECT_NE(r.out.find("defaultCompositionRef"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace klutch::testing
