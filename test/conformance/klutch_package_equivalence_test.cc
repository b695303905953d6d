// Our own package (deploy/package) and provider-anynines API (deploy/provider-anynines) against
// the upstream files they stand in for (../shared/conformance/klutch, read by this test only):
// the same facts, in our own words. Each upstream CRD and XRD has a counterpart whose spec is
// identical once documentation is set aside (descriptions and the other documentation-only
// schema keywords; an XRD schema's `supported:` holder of YAML anchors, which Crossplane drops);
// the CRDs the composition engine generates from each pair of XRDs are identical the same way;
// Compositions are identical as data (only their comments differ). No description of ours
// repeats upstream's, whole or as a run of six words. Our CRDs, and those generated from our
// XRDs, pass the API server's CRD checks, and the ProviderConfig templates are upstream's
// examples with the broker address filled in.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "apiserver/crd.h"
#include "compose/xrd.h"
#include "core/strings.h"
#include "machinery/json.h"
#include "machinery/object.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using machinery::Dump;
using machinery::GetString;
using machinery::Json;

const fs::path kUpstream = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch";
const fs::path kUpstreamApi = kUpstream / "crossplane-api/api";
const fs::path kUpstreamCrds = kUpstream / "provider-anynines/package/crds";
const fs::path kDeploy = fs::path(KLUTCH_SOURCE_DIR) / "deploy";
const fs::path kOurPackage = kDeploy / "package";
const fs::path kOurCrds = kDeploy / "provider-anynines/crds";
const fs::path kOurProviderConfigs = kDeploy / "provider-anynines/providerconfigs";

// The upstream package files: the definitions and the a9s and a8s compositions (paths below
// kUpstreamApi).
const std::vector<std::string>& UpstreamPackageFiles() {
  static const auto* files = new std::vector<std::string>{
      // Definitions.
      "common/postgresql_definition.yaml",
      "a9s/keyvalue/definition.yaml",
      "a9s/mariadb/definition.yaml",
      "a9s/mongodb/definition.yaml",
      "a9s/search/definition.yaml",
      "a9s/logme2/definition.yaml",
      "a9s/messaging/definition.yaml",
      "a9s/prometheus/definition.yaml",
      "common/servicebinding_definition.yaml",
      "common/backup_definition.yaml",
      "common/restore_definition.yaml",
      // Compositions.
      "a9s/postgresql/composition.yaml",
      "a9s/keyvalue/composition.yaml",
      "a9s/mariadb/composition.yaml",
      "a9s/mongodb/composition.yaml",
      "a9s/search/composition.yaml",
      "a9s/logme2/composition.yaml",
      "a9s/messaging/composition.yaml",
      "a9s/prometheus/composition.yaml",
      "a9s/servicebinding/composition.yaml",
      "a9s/backup/composition.yaml",
      "a9s/restore/composition.yaml",
      "a8s/postgresql/composition.yaml",
      "a8s/servicebinding/composition.yaml",
      "a8s/backup/composition.yaml",
      "a8s/restore/composition.yaml",
  };
  return *files;
}

// Ours without an upstream file: the function the Compositions name (built into the manager,
// installed by this file on a Crossplane Control Plane) and the provider-kubernetes
// ProviderConfig the a8s Compositions name (upstream leaves it to the platform team).
const std::set<std::string>& OurExtras() {
  static const auto* extras = new std::set<std::string>{"Function/function-patch-and-transform",
                                                        "ProviderConfig/kubernetes-provider"};
  return *extras;
}

// Patches of ours beyond upstream's Compositions (composition -> toFieldPaths): status the
// claim shows and anynines' operator never writes, so copying it is a no-op there.
const std::map<std::string, std::set<std::string>>& OurCompositionPatches() {
  static const auto* extras = new std::map<std::string, std::set<std::string>>{
      {"a8s-postgresql", {"status.managed.runningVersion", "status.managed.versionSubstituted"}}};
  return *extras;
}

// `composition` without OurCompositionPatches(); `removed` counts them.
Json WithoutOurPatches(Json composition, size_t& removed) {
  auto extras = OurCompositionPatches().find(machinery::Name(composition));
  if (extras == OurCompositionPatches().end()) return composition;
  for (Json& step : composition["spec"]["pipeline"]) {
    for (Json& r : step["input"]["resources"]) {
      Json kept = Json::array();
      for (const Json& patch : r["patches"]) {
        if (extras->second.count(GetString(patch, {"toFieldPath"}))) {
          ++removed;
        } else {
          kept.push_back(patch);
        }
      }
      r["patches"] = std::move(kept);
    }
  }
  return composition;
}

struct Doc {
  fs::path file;
  Json object;
};

std::vector<fs::path> YamlFiles(const fs::path& path) {
  std::vector<fs::path> out;
  if (fs::is_regular_file(path)) return {path};
  for (const auto& e : fs::recursive_directory_iterator(path)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// Every non-empty document of the YAML files at `path` (a file, or a tree), after replacing
// each `from` with `to` in the text.
std::vector<Doc> Load(const fs::path& path, const std::string& from = "",
                      const std::string& to = "") {
  std::vector<Doc> out;
  for (const fs::path& f : YamlFiles(path)) {
    std::string text = ReadFileOrEmpty(f);
    if (!from.empty()) text = ReplaceAll(text, from, to);
    for (const std::string& doc : SplitYamlDocuments(text)) {
      auto parsed = machinery::ParseYaml(doc);
      if (!parsed.ok()) {
        ADD_FAILURE() << f << ": " << parsed.status().ToString();
        continue;
      }
      if (parsed->is_object() && !parsed->empty()) out.push_back({f, *std::move(parsed)});
    }
  }
  return out;
}

std::string Key(const Json& o) { return machinery::Kind(o) + "/" + machinery::Name(o); }

std::map<std::string, Doc> ByKey(std::vector<Doc> docs) {
  std::map<std::string, Doc> out;
  for (Doc& d : docs) {
    const std::string key = Key(d.object);
    EXPECT_FALSE(out.count(key)) << key << " is defined twice: " << d.file;
    out[key] = std::move(d);
  }
  return out;
}

// Removes the keywords of an OpenAPI schema that only document it, in this schema and the ones
// nested in it. Field names are kept: a property called "description" stays.
void StripSchemaDocs(Json& schema) {
  if (!schema.is_object()) return;
  for (const char* k : {"description", "title", "example", "externalDocs"}) schema.erase(k);
  if (auto p = schema.find("properties"); p != schema.end() && p->is_object()) {
    for (auto& [name, sub] : p->items()) StripSchemaDocs(sub);
  }
  for (const char* k : {"items", "additionalProperties", "not"}) {
    if (auto it = schema.find(k); it != schema.end()) {
      if (it->is_object()) StripSchemaDocs(*it);
      if (it->is_array()) {
        for (Json& sub : *it) StripSchemaDocs(sub);
      }
    }
  }
  for (const char* k : {"allOf", "anyOf", "oneOf"}) {
    if (auto it = schema.find(k); it != schema.end() && it->is_array()) {
      for (Json& sub : *it) StripSchemaDocs(sub);
    }
  }
}

// A CRD's or XRD's apiVersion, kind, name and spec with the documentation set aside: schema
// docs, printer column descriptions and (XRDs) the root's `supported:` anchor holder.
Json Facts(const Json& o) {
  Json out = {{"apiVersion", o.value("apiVersion", "")},
              {"kind", o.value("kind", "")},
              {"name", machinery::Name(o)},
              {"spec", o.value("spec", Json::object())}};
  Json& versions = out["spec"]["versions"];
  if (!versions.is_array()) return out;
  for (Json& v : versions) {
    if (auto s = v.find("schema"); s != v.end() && s->is_object()) {
      if (auto root = s->find("openAPIV3Schema"); root != s->end() && root->is_object()) {
        StripSchemaDocs(*root);
        if (out["kind"] == "CompositeResourceDefinition") root->erase("supported");
      }
    }
    if (auto cols = v.find("additionalPrinterColumns"); cols != v.end() && cols->is_array()) {
      for (Json& c : *cols) c.erase("description");
    }
  }
  return out;
}

std::string DiffText(const Json& want, const Json& got) { return Dump(Json::diff(want, got)); }

// Every string under a "description" key, anywhere in `o`, with runs of whitespace as one space.
void CollectDescriptions(const Json& o, std::vector<std::string>& out) {
  if (o.is_object()) {
    for (const auto& [k, v] : o.items()) {
      if (k == "description" && v.is_string()) {
        std::string text = GetString(o, {"description"});
        std::string norm;
        for (const std::string_view w : core::Split(text, ' ')) {
          for (const std::string_view part : core::Split(w, '\n')) {
            if (part.empty()) continue;
            if (!norm.empty()) norm += ' ';
            norm += std::string(part);
          }
        }
        out.push_back(norm);
      } else {
        CollectDescriptions(v, out);
      }
    }
  } else if (o.is_array()) {
    for (const Json& v : o) CollectDescriptions(v, out);
  }
}

// The lower-cased words (letters, digits, '_') of `text`.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

constexpr size_t kRun = 6;  // words in a row that count as copied prose

std::set<std::string> Runs(const std::string& text) {
  std::vector<std::string> w = Words(text);
  std::set<std::string> out;
  for (size_t i = 0; i + kRun <= w.size(); ++i) {
    std::string run;
    for (size_t j = i; j < i + kRun; ++j) run += w[j] + " ";
    out.insert(run);
  }
  return out;
}

std::string Causes(const std::vector<core::Cause>& causes) {
  std::string out;
  for (const core::Cause& c : causes) out += "\n  " + c.field + ": " + c.message;
  return out;
}

// ---------------------------------------------------------------------------------------------

TEST(KlutchPackageEquivalence, ProviderCrdsHaveUpstreamsFacts) {
  std::map<std::string, Doc> upstream = ByKey(Load(kUpstreamCrds));
  std::map<std::string, Doc> ours = ByKey(Load(kOurCrds));
  ASSERT_EQ(upstream.size(), 7u) << "provider-anynines CRDs under " << kUpstreamCrds;
  for (const auto& [key, up] : upstream) {
    SCOPED_TRACE(key);
    auto it = ours.find(key);
    ASSERT_NE(it, ours.end()) << "no counterpart under " << kOurCrds;
    const Json want = Facts(up.object);
    const Json got = Facts(it->second.object);
    EXPECT_TRUE(got == want) << it->second.file << " differs from " << up.file << ": "
                             << DiffText(want, got);
  }
  for (const auto& [key, our] : ours) {
    EXPECT_TRUE(upstream.count(key)) << key << " (" << our.file << ") has no upstream CRD";
  }
}

TEST(KlutchPackageEquivalence, ProviderCrdsPassTheApiServersChecks) {
  std::vector<Doc> ours = Load(kOurCrds);
  ASSERT_EQ(ours.size(), 7u);
  for (const Doc& d : ours) {
    SCOPED_TRACE(d.file.string());
    EXPECT_EQ(machinery::Kind(d.object), "CustomResourceDefinition");
    std::vector<core::Cause> causes;
    apiserver::ValidateCrdSpec(d.object, nullptr, causes);
    apiserver::ValidateCrdSpec(d.object, &d.object, causes);
    EXPECT_TRUE(causes.empty()) << Causes(causes);
    auto resources = apiserver::ResourcesForCrd(d.object);
    EXPECT_TRUE(resources.ok()) << resources.status().ToString();
  }
}

TEST(KlutchPackageEquivalence, DefinitionsAndCompositionsHaveUpstreamsFacts) {
  std::map<std::string, Doc> upstream;
  for (const std::string& f : UpstreamPackageFiles()) {
    for (Doc& d : Load(kUpstreamApi / f)) upstream[Key(d.object)] = std::move(d);
  }
  ASSERT_EQ(upstream.size(), UpstreamPackageFiles().size());
  std::map<std::string, Doc> ours = ByKey(Load(kOurPackage));
  size_t definitions = 0, compositions = 0, extra_patches = 0;
  for (const auto& [key, up] : upstream) {
    SCOPED_TRACE(key);
    auto it = ours.find(key);
    ASSERT_NE(it, ours.end()) << "no counterpart under " << kOurPackage;
    const Json& our = it->second.object;
    if (machinery::Kind(up.object) == "Composition") {
      ++compositions;
      // Nothing in a Composition documents it: every value counts.
      const Json compared = WithoutOurPatches(our, extra_patches);
      EXPECT_TRUE(compared == up.object) << DiffText(up.object, compared);
      continue;
    }
    ASSERT_EQ(machinery::Kind(up.object), "CompositeResourceDefinition");
    ++definitions;
    const Json want = Facts(up.object);
    const Json got = Facts(our);
    EXPECT_TRUE(got == want) << it->second.file << " differs from " << up.file << ": "
                             << DiffText(want, got);

    // What the engine makes of them: the XR and claim CRDs, equal but for descriptions, and
    // accepted by the API server.
    auto up_crds = compose::CrdsForXrd(up.object);
    auto our_crds = compose::CrdsForXrd(our);
    ASSERT_TRUE(up_crds.ok()) << up_crds.status().ToString();
    ASSERT_TRUE(our_crds.ok()) << our_crds.status().ToString();
    ASSERT_TRUE(up_crds->claim.has_value());
    ASSERT_TRUE(our_crds->claim.has_value());
    for (const auto& [up_crd, our_crd] : {std::pair{&up_crds->composite, &our_crds->composite},
                                          std::pair{&*up_crds->claim, &*our_crds->claim}}) {
      SCOPED_TRACE(machinery::Name(*our_crd));
      Json a = *up_crd, b = *our_crd;
      Json fa = Facts(a), fb = Facts(b);
      a["spec"] = fa["spec"];
      b["spec"] = fb["spec"];
      EXPECT_TRUE(b == a) << DiffText(a, b);
      std::vector<core::Cause> causes;
      apiserver::ValidateCrdSpec(*our_crd, nullptr, causes);
      EXPECT_TRUE(causes.empty()) << Causes(causes);
    }
  }
  EXPECT_EQ(definitions, 11u);   // 8 instance kinds, ServiceBinding, Backup, Restore
  EXPECT_EQ(compositions, 15u);  // a9s: 8 instance kinds + 3; a8s: 4
  size_t listed = 0;
  for (const auto& [name, paths] : OurCompositionPatches()) listed += paths.size();
  EXPECT_EQ(extra_patches, listed) << "a patch OurCompositionPatches() lists is gone";
  for (const auto& [key, our] : ours) {
    EXPECT_TRUE(upstream.count(key) || OurExtras().count(key))
        << key << " (" << our.file << ") has no upstream counterpart";
  }
  for (const std::string& extra : OurExtras()) EXPECT_TRUE(ours.count(extra)) << extra;
}

TEST(KlutchPackageEquivalence, DescriptionsAreOurOwn) {
  std::vector<std::string> theirs, ours;
  for (const fs::path& root : {kUpstreamCrds, kUpstreamApi}) {
    for (const Doc& d : Load(root)) CollectDescriptions(d.object, theirs);
  }
  for (const fs::path& root : {kOurCrds, kOurPackage, kOurProviderConfigs}) {
    for (const Doc& d : Load(root)) CollectDescriptions(d.object, ours);
  }
  ASSERT_GT(theirs.size(), 300u);
  ASSERT_GT(ours.size(), 200u);  // the check below means something only if we describe things
  const std::set<std::string> exact(theirs.begin(), theirs.end());
  std::set<std::string> runs;
  for (const std::string& t : theirs) runs.merge(Runs(t));
  for (const std::string& d : ours) {
    if (d.find(' ') != std::string::npos) {
      EXPECT_FALSE(exact.count(d)) << "description copied from upstream: " << d;
    }
    for (const std::string& run : Runs(d)) {
      EXPECT_FALSE(runs.count(run)) << "\"" << run << "\" is upstream's wording, in: " << d;
    }
  }
}

TEST(KlutchPackageEquivalence, ProviderConfigTemplatesAreUpstreamsExamplesForTheLocalBroker) {
  const std::string broker = "http://127.0.0.1:8085";
  std::map<std::string, Doc> ours =
      ByKey(Load(kOurProviderConfigs, "${KLUTCH_BROKER_URL}", broker));
  size_t matched = 0;
  for (const char* example : {"config-postgres.yaml", "config-keyvalue.yaml", "config-mariadb.yaml",
                              "config-prometheus.yaml", "config-messaging.yaml"}) {
    for (const Doc& up : Load(kUpstream / "provider-anynines/examples/provider" / example)) {
      if (machinery::Kind(up.object) != "ProviderConfig") continue;  // Secrets: the broker's
      const std::string name = machinery::Name(up.object);
      SCOPED_TRACE(name);
      // As test/support/control_plane.cc adapts the examples: the URL of the broker's base path.
      std::string base = name;
      if (base.ends_with("-service-broker")) base.resize(base.size() - 15);
      Json want = up.object;
      want["spec"]["url"] = broker + "/" + base;
      auto it = ours.find(Key(want));
      ASSERT_NE(it, ours.end()) << "no ProviderConfig " << name << " under " << kOurProviderConfigs;
      EXPECT_TRUE(it->second.object == want) << DiffText(want, it->second.object);
      ++matched;
    }
  }
  EXPECT_EQ(matched, 10u);
  EXPECT_EQ(ours.size(), matched) << "templates without an upstream example";
}

}  // namespace
}  // namespace klutch::testing
