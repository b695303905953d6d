// Every upstream Klutch CRD (each `kind: CustomResourceDefinition` document under
// ../shared/conformance/klutch, found at run time so a new file is picked up) applied
// unchanged with the real kubectl to a real `klutch apiserver`, each Established; then the
// printer columns as kubectl shows them: a managed resource's EXTERNAL-NAME column
// (`.metadata.annotations.crossplane\.io/external-name`) prints the annotation, and the bind
// CRD's odd `.metadata.annotations.bind\.klutch.\anynines\.com/resources` column prints
// nothing, as kube-apiserver serves them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "machinery/json.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Json;

const fs::path kKlutch = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch";
// The dispatcher the machine image installs (shared/specs/dependencies.md, section 9).
const fs::path kKubectl = "/usr/bin/kubectl";

struct CrdFile {
  fs::path path;
  std::vector<std::string> names;  // the CRDs it defines
};

// Every file below `root` with a CustomResourceDefinition document, and the CRDs' names.
std::vector<CrdFile> FindCrds(const fs::path& root) {
  std::vector<CrdFile> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".yaml" && ext != ".yml") continue;
    const std::string text = ReadFileOrEmpty(entry.path());
    if (text.find("kind: CustomResourceDefinition") == std::string::npos) continue;
    CrdFile file{entry.path(), {}};
    // Documents are separated by "---" lines.
    const std::vector<std::string> docs = SplitYamlDocuments(text);
    for (const auto& doc : docs) {
      if (doc.find("kind: CustomResourceDefinition") == std::string::npos) continue;
      auto parsed = machinery::ParseYaml(doc);
      EXPECT_TRUE(parsed.ok()) << entry.path() << ": " << parsed.status().ToString();
      if (!parsed.ok() || parsed->value("kind", "") != "CustomResourceDefinition") continue;
      file.names.push_back((*parsed)["metadata"].value("name", ""));
    }
    if (!file.names.empty()) out.push_back(std::move(file));
  }
  std::sort(out.begin(), out.end(),
            [](const CrdFile& a, const CrdFile& b) { return a.path < b.path; });
  return out;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out.push_back(l);
  }
  return out;
}

// The text of the row's cell that starts under `column` in kubectl's table output.
std::string Cell(const std::string& header, const std::string& row, const std::string& column) {
  const size_t at = header.find(column);
  if (at == std::string::npos || at > row.size()) return "<no column " + column + ">";
  std::string rest = row.substr(at);
  return rest.substr(0, rest.find(' '));
}

class KlutchCrds : public ::testing::Test {
 protected:
  void SetUp() override {
    // kubectl is part of every machine (the fresh-machine script copies it in): without it
    // this test cannot check anything, so that is a failure, not a skip.
    ASSERT_TRUE(fs::exists(kKubectl))
        << kKubectl << " is missing: the kubectl dispatcher of the machine image "
        << "(/usr/lib/google-cloud-sdk/bin/kubectl*) is required to run this test";
    ASSERT_TRUE(fs::is_directory(kKlutch))
        << kKlutch << " is missing: the upstream Klutch manifests in the shared folder are "
        << "required to run this test";
    std::string error;
    server_ = ApiServerProcess::Start(dir_.path() / "data", {}, &error);
    ASSERT_TRUE(server_) << error;
    auto creds = ReadKubeconfig(server_->kubeconfig());
    ASSERT_TRUE(creds.ok()) << creds.status().ToString();
    client_ = NewClient(*creds);
  }

  void TearDown() override {
    if (HasFailure() && server_) {
      const std::string log = server_->log();
      ADD_FAILURE() << "server log tail:\n"
                    << log.substr(log.size() > 3000 ? log.size() - 3000 : 0);
    }
  }

  CommandResult Kubectl(const std::string& args, const std::string& input = "") {
    std::string script = kKubectl.string() + " " + args;
    if (!input.empty()) script += " <<'KLUTCH_EOF'\n" + input + "\nKLUTCH_EOF";
    std::map<std::string, std::string> env = {
        {"KUBECONFIG", server_->kubeconfig().string()},
        {"HOME", (dir_.path() / "home").string()},
        {"KUBECACHEDIR", (dir_.path() / "kube-cache").string()},
        {"PATH", "/usr/local/bin:/usr/bin:/bin"},
        {"LC_ALL", "C"},
    };
    return RunShell(script, env, dir_.path(), std::chrono::seconds(120));
  }

  // The Table the server sends for one object, as kubectl asks for it.
  Json TableOf(const std::string& path) {
    http::Headers h;
    h.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io");
    auto r = client_->Do("GET", path, h, "");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return Json();
    EXPECT_EQ(r->status, 200) << r->body;
    return Json::parse(r->body, nullptr, false);
  }

  // The cell of the first row under the column named `column`.
  static Json TableCell(const Json& table, const std::string& column) {
    const Json& defs = table["columnDefinitions"];
    for (size_t i = 0; i < defs.size(); ++i) {
      if (defs[i].value("name", "") == column) return table["rows"][0]["cells"][i];
    }
    return "<no column " + column + ">";
  }

  TempDir dir_{"klutch-crds"};
  std::unique_ptr<ApiServerProcess> server_;
  std::unique_ptr<http::Client> client_;
};

TEST_F(KlutchCrds, EveryUpstreamCrdIsEstablishedAndPrintsItsColumns) {
  const std::vector<CrdFile> files = FindCrds(kKlutch);
  std::set<std::string> names;
  std::string apply = "apply";
  for (const auto& f : files) {
    apply += " -f '" + f.path.string() + "'";
    names.insert(f.names.begin(), f.names.end());
  }
  // The five whose printer-column paths escape dots must be among them.
  for (const char* name :
       {"serviceinstances.dataservices.anynines.com", "servicebindings.dataservices.anynines.com",
        "backups.dataservices.anynines.com", "restores.dataservices.anynines.com",
        "apiservicebindings.klutch.anynines.com"}) {
    EXPECT_TRUE(names.count(name)) << name << " not found under " << kKlutch;
  }
  ASSERT_GE(names.size(), 13u);

  CommandResult r = Kubectl(apply);
  ASSERT_EQ(r.exit_code, 0) << "kubectl " << apply << "\nstdout:\n"
                            << r.out << "stderr:\n"
                            << r.err;
  std::set<std::string> created;
  for (const auto& line : Lines(r.out)) created.insert(line);
  for (const auto& name : names) {
    EXPECT_TRUE(created.count("customresourcedefinition.apiextensions.k8s.io/" + name + " created"))
        << name << "\n"
        << r.out;
  }

  std::string wait = "wait --for=condition=Established --timeout=60s";
  for (const auto& name : names) wait += " crd/" + name;
  r = Kubectl(wait);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::set<std::string> met;
  for (const auto& line : Lines(r.out)) met.insert(line);
  for (const auto& name : names) {
    EXPECT_TRUE(
        met.count("customresourcedefinition.apiextensions.k8s.io/" + name + " condition met"))
        << name << "\n"
        << r.out;
  }

  // A managed resource from the upstream sample, named by its provider as Crossplane does.
  const fs::path sample =
      kKlutch / "provider-anynines/examples/sample/postgresql/serviceinstance.yaml";
  r = Kubectl("apply -f '" + sample.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out,
            "serviceinstance.dataservices.anynines.com/example-postgresql-instance-jklasd "
            "created\n");
  r = Kubectl(
      "annotate serviceinstance example-postgresql-instance-jklasd "
      "crossplane.io/external-name=pg-1234");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Kubectl("get serviceinstances");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(std::regex_match(lines[0], std::regex("NAME +READY +SYNCED +EXTERNAL-NAME +AGE")))
      << r.out;
  EXPECT_EQ(Cell(lines[0], lines[1], "NAME"), "example-postgresql-instance-jklasd") << r.out;
  EXPECT_EQ(Cell(lines[0], lines[1], "EXTERNAL-NAME"), "pg-1234") << r.out;
  Json table = TableOf(
      "/apis/dataservices.anynines.com/v1/serviceinstances/example-postgresql-instance-jklasd");
  EXPECT_EQ(TableCell(table, "EXTERNAL-NAME"), "pg-1234") << table.dump();
  EXPECT_EQ(TableCell(table, "READY"), nullptr) << table.dump();

  // The bind CRD's Resources column names `bind.klutch` then `anynines.com/resources`, so
  // the annotation its controller writes is not what it shows: kube-apiserver prints nothing.
  r = Kubectl("apply -f -", R"(apiVersion: klutch.anynines.com/v1alpha1
kind: APIServiceBinding
metadata:
  name: postgresqlinstances
  namespace: default
  annotations:
    bind.klutch.anynines.com/resources: all-of-them
spec:
  kubeconfigSecretRef:
    key: kubeconfig
    name: kubeconfig
    namespace: bind)");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = Kubectl("get apiservicebindings -o wide");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(
      std::regex_match(lines[0], std::regex("NAME +PROVIDER +RESOURCES +READY +MESSAGE +AGE")))
      << r.out;
  EXPECT_EQ(lines[1].find("all-of-them"), std::string::npos) << r.out;
  table = TableOf(
      "/apis/klutch.anynines.com/v1alpha1/namespaces/default/apiservicebindings/"
      "postgresqlinstances");
  EXPECT_EQ(TableCell(table, "Resources"), nullptr) << table.dump();
}

TEST_F(KlutchCrds, APathNotStartingWithADotIsRefusedAsKubeApiserverRefusesIt) {
  CommandResult r = Kubectl("apply -f -", R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  names: {kind: Thing, plural: things}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object}
    additionalPrinterColumns:
    - name: External
      type: string
      jsonPath: metadata.annotations.crossplane\.io/external-name)");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_EQ(r.err,
            "The CustomResourceDefinition \"things.example.com\" is invalid: "
            "spec.versions[0].additionalPrinterColumns[0].JSONPath: Invalid value: "
            "\"metadata.annotations.crossplane\\\\.io/external-name\": must be a simple json path "
            "starting with .\n");
}

}  // namespace
}  // namespace klutch::testing
