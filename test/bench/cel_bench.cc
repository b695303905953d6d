// Benchmark of CRD validation rules (x-kubernetes-validations) with the PostgreSQL claim
// schema generated from Klutch's upstream XRD, baselines measured in the same run:
//   - create path: the whole rule set on a claim, vs. structural schema validation of the
//     same claim and vs. parsing its JSON;
//   - update path (plan change: transition rules and every spec rule run), same baselines;
//   - refusals (a plan typo, a missing compositionRef), which also search the values the
//     failed rules accept, vs. the create path;
//   - compiling the rules of the largest upstream XRD's claim CRD (what CRD creation adds),
//     vs. parsing that CRD's JSON; and creating that CRD on a real `klutch apiserver`, vs.
//     creating a ConfigMap of the same size there.
// Prints numbers and ratios; asserts nothing about time.
//
//   build/bin/klutch-bench-cel [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "apiserver/crd.h"
#include "machinery/json.h"
#include "schema/structural.h"
#include "schema/validation_rules.h"
#include "test/support/claim_crd.h"
#include "test/support/kube_client.h"
#include "test/support/process.h"

namespace klutch::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using machinery::Json;

const fs::path kApi = fs::path(KLUTCH_SHARED_DIR) / "conformance/klutch/crossplane-api";

// Nanoseconds per call of `f`, the best of `rounds` rounds of `n` calls (the least disturbed
// by other work on the machine).
double NsPerCall(int rounds, int n, const std::function<void()>& f) {
  double best = 1e300;
  for (int r = 0; r < rounds; ++r) {
    auto start = Clock::now();
    for (int i = 0; i < n; ++i) f();
    double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count() / n;
    best = std::min(best, ns);
  }
  return best;
}

Json Load(const fs::path& p) {
  auto j = machinery::ParseYaml(ReadFileOrEmpty(p));
  if (!j.ok()) {
    std::fprintf(stderr, "%s: %s\n", p.c_str(), j.status().message().c_str());
    std::exit(1);
  }
  return *j;
}

int Run(bool quick) {
  const int rounds = quick ? 1 : 5;
  const int n = quick ? 200 : 20000;

  // --- rule evaluation -------------------------------------------------------------------
  Json crd = ClaimCrd(Load(kApi / "api/common/postgresql_definition.yaml"));
  auto schema = std::make_shared<Json>(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]);
  std::vector<core::Cause> errors;
  auto rules = schema::ValidationRules::Compile(schema, *schema, "", errors);
  if (!errors.empty() || rules->empty()) {
    std::fprintf(stderr, "rules did not compile: %s\n",
                 errors.empty() ? "none" : errors[0].message.c_str());
    return 1;
  }
  Json claim = Load(kApi / "examples/a9s/postgresql/serviceinstance-claim-parameters.yaml");
  Json old = claim;
  old["spec"]["plan"] = "postgresql-single-nano-ssl";
  claim["spec"]["plan"] = "postgresql-single-small-ssl";
  machinery::SchemaCursor cursor(schema.get(), nullptr);
  std::string text = machinery::Dump(claim);

  std::vector<core::Cause> causes;
  auto check = [&](const Json* o) {
    causes.clear();
    rules->Validate(claim, o, causes);
    if (!causes.empty()) {
      std::fprintf(stderr, "unexpected cause: %s: %s\n", causes[0].field.c_str(),
                   causes[0].message.c_str());
      std::exit(1);
    }
  };
  double create_ns = NsPerCall(rounds, n, [&] { check(nullptr); });
  double update_ns = NsPerCall(rounds, n, [&] { check(&old); });
  double structural_ns = NsPerCall(rounds, n, [&] {
    causes.clear();
    schema::Validate(claim, cursor, causes);
  });
  double parse_ns = NsPerCall(rounds, n, [&] { (void)machinery::ParseJson(text); });
  // Refusals name what to write (issue #23): a plan typo lists the plans the rule accepts, a
  // missing compositionRef the compositions; both evaluate changed copies of the claim.
  auto refuse = [&](const Json& bad) {
    causes.clear();
    rules->Validate(bad, nullptr, causes);
    if (causes.size() != 1) {
      std::fprintf(stderr, "expected one cause, got %zu\n", causes.size());
      std::exit(1);
    }
  };
  Json typo = claim;
  typo["spec"]["plan"] = "postgresql-single-nanoo";
  Json unreferenced = claim;
  unreferenced["spec"].erase("compositionRef");
  double typo_ns = NsPerCall(rounds, n, [&] { refuse(typo); });
  double unreferenced_ns = NsPerCall(rounds, n, [&] { refuse(unreferenced); });

  std::printf("PostgreSQL claim rule set: %zu rules, claim of %zu bytes\n", rules->size(),
              text.size());
  std::printf("  create path   %8.2f us/object  (%.2fx structural validation, %.2fx JSON parse)\n",
              create_ns / 1000, create_ns / structural_ns, create_ns / parse_ns);
  std::printf("  update path   %8.2f us/object  (%.2fx structural validation, %.2fx JSON parse)\n",
              update_ns / 1000, update_ns / structural_ns, update_ns / parse_ns);
  std::printf("  refused, plan typo           %8.2f us/object  (%.2fx create path)\n",
              typo_ns / 1000, typo_ns / create_ns);
  std::printf("  refused, no compositionRef   %8.2f us/object  (%.2fx create path)\n",
              unreferenced_ns / 1000, unreferenced_ns / create_ns);
  std::printf("  baselines: structural validation %.2f us, JSON parse %.2f us\n",
              structural_ns / 1000, parse_ns / 1000);

  // --- rule compilation for the largest XRD -----------------------------------------------
  fs::path largest;
  uintmax_t largest_size = 0;
  for (const auto& e : fs::recursive_directory_iterator(kApi / "api")) {
    std::string name = e.path().filename().string();
    if (name != "definition.yaml" && !name.ends_with("_definition.yaml")) continue;
    if (e.file_size() > largest_size) {
      largest_size = e.file_size();
      largest = e.path();
    }
  }
  Json big_crd = ClaimCrd(Load(largest));
  std::string big_text = machinery::Dump(big_crd);
  const int compile_n = quick ? 5 : 50;
  double compile_ns = NsPerCall(rounds, compile_n, [&] {
    std::vector<core::Cause> c;
    apiserver::ValidateCrdSpec(big_crd, nullptr, c);
    auto resources = apiserver::ResourcesForCrd(big_crd);
    if (!c.empty() || !resources.ok()) {
      std::fprintf(stderr, "largest CRD rejected\n");
      std::exit(1);
    }
  });
  double big_parse_ns = NsPerCall(rounds, compile_n, [&] { (void)machinery::ParseJson(big_text); });
  std::printf("Largest XRD (%s, claim CRD %zu bytes JSON)\n", fs::relative(largest, kApi).c_str(),
              big_text.size());
  std::printf(
      "  CRD validation + serving setup incl. rule compilation  %.2f ms  (%.1fx JSON parse "
      "%.3f ms)\n",
      compile_ns / 1e6, compile_ns / big_parse_ns, big_parse_ns / 1e6);

  // --- the same CRD created on a real API server ------------------------------------------
  TempDir dir("klutch-bench-cel");
  std::string error;
  auto server = ApiServerProcess::Start(dir.path() / "data", {}, &error);
  if (!server) {
    std::fprintf(stderr, "server: %s\n", error.c_str());
    return 1;
  }
  auto creds = ReadKubeconfig(server->kubeconfig());
  auto client = NewClient(*creds);
  const int creates = quick ? 2 : 10;
  std::vector<double> crd_ms, cm_ms;
  for (int i = 0; i < creates; ++i) {
    Json c = big_crd;
    std::string plural = "bench" + std::to_string(i) + "s";
    c["spec"]["names"]["plural"] = plural;
    c["spec"]["names"]["kind"] = "Bench" + std::to_string(i);
    c["spec"]["names"]["listKind"] = "Bench" + std::to_string(i) + "List";
    c["metadata"]["name"] = plural + ".anynines.com";
    auto start = Clock::now();
    auto r = Call(*client, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                  machinery::Dump(c));
    crd_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!r.ok() || r->status != 201) {
      std::fprintf(stderr, "CRD create failed: %s\n", r.ok() ? r->body.c_str() : "");
      return 1;
    }
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", "cm" + std::to_string(i)}}},
               {"data", {{"crd", big_text}}}};
    start = Clock::now();
    r = Call(*client, "POST", "/api/v1/namespaces/default/configmaps", machinery::Dump(cm));
    cm_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!r.ok() || r->status != 201) {
      std::fprintf(stderr, "ConfigMap create failed\n");
      return 1;
    }
  }
  std::sort(crd_ms.begin(), crd_ms.end());
  std::sort(cm_ms.begin(), cm_ms.end());
  double crd_med = crd_ms[crd_ms.size() / 2], cm_med = cm_ms[cm_ms.size() / 2];
  std::printf(
      "  POST of that CRD on klutch apiserver  median %.2f ms  (%.2fx a ConfigMap of the "
      "same size, %.2f ms)\n",
      crd_med, crd_med / cm_med, cm_med);
  return 0;
}

}  // namespace
}  // namespace klutch::testing

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  return klutch::testing::Run(quick);
}
