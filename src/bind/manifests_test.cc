// deploy/backend: every file parses and is listed in the kustomization, the RBAC has no
// wildcard and grants escalate/bind only on roles, the Deployment's probes, ports and Service
// agree, and the templates select the Klutch data-service APIs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "machinery/json.h"
#include "test/support/process.h"

namespace klutch::bind::manifests_test {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

const fs::path kDir = fs::path(KLUTCH_SOURCE_DIR) / "deploy/backend";

struct Manifest {
  std::string file;  // relative to kDir
  Json object;
};

std::vector<Manifest> Load() {
  std::vector<Manifest> out;
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(kDir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& path : files) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    for (const std::string& doc : testing::SplitYamlDocuments(text.str())) {
      auto parsed = machinery::ParseYaml(doc);
      EXPECT_TRUE(parsed.ok()) << path << ": " << parsed.status().message();
      if (!parsed.ok() || parsed->is_null()) continue;
      out.push_back({fs::relative(path, kDir).string(), *parsed});
    }
  }
  return out;
}

std::vector<const Json*> OfKind(const std::vector<Manifest>& all, const std::string& kind) {
  std::vector<const Json*> out;
  for (const Manifest& m : all) {
    if (m.object.value("kind", "") == kind) out.push_back(&m.object);
  }
  return out;
}

TEST(BackendManifests, KustomizationListsEveryFile) {
  auto all = Load();
  auto k = OfKind(all, "Kustomization");
  ASSERT_EQ(k.size(), 1u);
  std::set<std::string> listed, present;
  for (const Json& r : (*k[0])["resources"]) listed.insert(r.get<std::string>());
  for (const Manifest& m : all) {
    if (m.file != "kustomization.yaml") present.insert(m.file);
  }
  EXPECT_EQ(listed, present);
}

TEST(BackendManifests, RbacIsNarrow) {
  auto all = Load();
  for (const char* kind : {"ClusterRole", "Role"}) {
    for (const Json* role : OfKind(all, kind)) {
      for (const Json& rule : (*role)["rules"]) {
        for (const char* key : {"apiGroups", "resources", "verbs"}) {
          for (const Json& v : rule[key]) {
            EXPECT_EQ(v.get<std::string>().find('*'), std::string::npos) << rule;
          }
        }
        std::set<std::string> verbs;
        for (const Json& v : rule["verbs"]) verbs.insert(v.get<std::string>());
        if (verbs.contains("escalate") || verbs.contains("bind")) {
          for (const Json& r : rule["resources"]) {
            EXPECT_TRUE(r == "clusterroles" || r == "roles") << rule;
          }
        }
      }
    }
  }
  std::set<std::string> bound;
  for (const char* kind : {"ClusterRoleBinding", "RoleBinding"}) {
    for (const Json* b : OfKind(all, kind)) {
      EXPECT_EQ(
          (*b)["subjects"],
          Json::parse(R"([{"kind":"ServiceAccount","name":"klutch-backend","namespace":"bind"}])"));
      bound.insert((*b)["roleRef"]["name"].get<std::string>());
    }
  }
  EXPECT_EQ(bound, (std::set<std::string>{"klutch-backend", "klutch-backend-leader-election"}));
}

// The backend keeps ResourceQuota klutch-consumer in consumer namespaces (watch, create,
// put back) and deletes the spaces no konnector connected to.
TEST(BackendManifests, RbacCoversConsumerQuotasAndCollection) {
  auto all = Load();
  auto granted = [&](const std::string& group, const std::string& resource) {
    std::set<std::string> verbs;
    for (const Json* role : OfKind(all, "ClusterRole")) {
      if ((*role)["metadata"]["name"] != "klutch-backend") continue;
      for (const Json& rule : (*role)["rules"]) {
        bool group_ok = false, resource_ok = false;
        for (const Json& g : rule["apiGroups"]) group_ok |= g == group;
        for (const Json& r : rule["resources"]) resource_ok |= r == resource;
        if (!group_ok || !resource_ok) continue;
        for (const Json& v : rule["verbs"]) verbs.insert(v.get<std::string>());
      }
    }
    return verbs;
  };
  auto quotas = granted("", "resourcequotas");
  for (const char* verb : {"get", "list", "watch", "create", "update"}) {
    EXPECT_TRUE(quotas.contains(verb)) << verb;
  }
  EXPECT_TRUE(granted("", "namespaces").contains("delete"));
  for (const char* resource : {"clusterroles", "clusterrolebindings"}) {
    EXPECT_TRUE(granted("rbac.authorization.k8s.io", resource).contains("delete")) << resource;
  }
  // The catalog narrows plans to the Compositions that exist (issue #23).
  EXPECT_TRUE(granted("apiextensions.crossplane.io", "compositions").contains("list"));
}

TEST(BackendManifests, DeploymentServiceAndProbesAgree) {
  auto all = Load();
  auto deployments = OfKind(all, "Deployment");
  ASSERT_EQ(deployments.size(), 1u);
  const Json& pod = (*deployments[0])["spec"]["template"]["spec"];
  EXPECT_EQ(pod["serviceAccountName"], "klutch-backend");
  const Json& c = pod["containers"][0];
  EXPECT_EQ(c["command"], Json::array({"klutch", "backend"}));
  EXPECT_EQ(c["image"], "klutch:latest");
  EXPECT_EQ(c["ports"][0]["containerPort"], 9443);
  const Json& args = c["args"];
  EXPECT_NE(std::find(args.begin(), args.end(), "--listen-address=0.0.0.0:9443"), args.end());
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(c[probe]["httpGet"]["scheme"], "HTTPS") << probe;
    EXPECT_EQ(c[probe]["httpGet"]["port"], "https") << probe;
  }
  EXPECT_EQ(c["securityContext"]["readOnlyRootFilesystem"], true);
  auto services = OfKind(all, "Service");
  ASSERT_EQ(services.size(), 1u);
  EXPECT_EQ((*services[0])["spec"]["ports"][0]["port"], 443);
  EXPECT_EQ((*services[0])["spec"]["ports"][0]["targetPort"], "https");
  EXPECT_EQ((*services[0])["spec"]["selector"],
            (*deployments[0])["spec"]["selector"]["matchLabels"]);
}

TEST(BackendManifests, TemplatesOfferTheKlutchDataServices) {
  std::set<std::string> offered;
  for (const Manifest& m : Load()) {
    if (m.object.value("kind", "") != "APIServiceExportTemplate") continue;
    EXPECT_TRUE(m.file.starts_with("templates/")) << m.file;
    const Json& sel = m.object["spec"]["APIServiceSelector"];
    offered.insert(sel["resource"].get<std::string>() + "." + sel["group"].get<std::string>());
  }
  EXPECT_EQ(offered,
            (std::set<std::string>{
                "postgresqlinstances.anynines.com", "keyvalueinstances.anynines.com",
                "mariadbinstances.anynines.com", "mongodbinstances.anynines.com",
                "searchinstances.anynines.com", "logme2instances.anynines.com",
                "messaginginstances.anynines.com", "prometheusinstances.anynines.com",
                "servicebindings.anynines.com", "backups.anynines.com", "restores.anynines.com"}));
}

}  // namespace
}  // namespace klutch::bind::manifests_test
